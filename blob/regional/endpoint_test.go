package regional_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/conformance"
)

// regionalServer is a GCS emulator with no buckets; each store makes its own
// regional (non-zonal) bucket, so every test starts empty.
func regionalServer(t *testing.T) *gcsrapidtest.Server {
	t.Helper()
	return gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: gcsrapidtest.Zero()})
}

var bucketSeq atomic.Int64

func newRegionalBucket(t *testing.T, srv *gcsrapidtest.Server) string {
	t.Helper()
	name := fmt.Sprintf("regional-%d", bucketSeq.Add(1))
	if err := srv.CreateBucket(name, false); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestConformanceGSEndpoint(t *testing.T) {
	srv := regionalServer(t)
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, "gs://"+newRegionalBucket(t, srv)+"?endpoint="+srv.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		OpenMissingBucket: func(ctx context.Context, t *testing.T) (blob.Store, error) {
			return blob.Open(ctx, "gs://no-such-bucket?endpoint="+srv.Endpoint())
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}

func TestGocloudDrivertestGSEndpoint(t *testing.T) {
	srv := regionalServer(t)
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, "gs://"+newRegionalBucket(t, srv)+"?endpoint="+srv.Endpoint())
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}

// A path is a key prefix over the emulator as over Google: keys are stored
// under it and listed without it.
func TestGSEndpointPrefix(t *testing.T) {
	ctx := context.Background()
	srv := regionalServer(t)
	name := newRegionalBucket(t, srv)
	under, err := blob.Open(ctx, "gs://"+name+"/logs/?endpoint="+srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer under.Close()
	if err := blob.Put(ctx, under, "a", []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	whole, err := blob.Open(ctx, "gs://"+name+"?endpoint="+srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if got, err := blob.ReadAll(ctx, whole, "logs/a"); err != nil || string(got) != "1" {
		t.Errorf("logs/a = %q, %v; want the prefixed write", got, err)
	}
	page, err := under.List(ctx, nil)
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "a" {
		t.Errorf("list under the prefix = %+v, %v", page, err)
	}
}

// A bad endpoint, or a parameter an emulator connection has no use for, is
// refused before any connection is made, and the refusal does not repeat the
// endpoint (which could hold credentials).
func TestGSEndpointRefusedBeforeIO(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	addr := lis.Addr().String()
	for _, tc := range []struct{ name, url string }{
		{"credentials", "gs://b?endpoint=user:s3cret@" + addr},
		{"scheme", "gs://b?endpoint=http://" + addr},
		{"path", "gs://b?endpoint=" + addr + "/s3cret"},
		{"query", "gs://b?endpoint=" + addr + "%3Fkey%3Ds3cret"},
		{"no port", "gs://b?endpoint=s3cret"},
		{"bad port", "gs://b?endpoint=127.0.0.1:s3cret"},
		{"port out of range", "gs://b?endpoint=127.0.0.1:70000"},
		{"empty", "gs://b?endpoint="},
		{"twice", "gs://b?endpoint=" + addr + "&endpoint=" + addr},
		{"gocloud credentials", "gs://b?endpoint=" + addr + "&access_id=s3cret"},
		{"gocloud transport", "gs://b?endpoint=" + addr + "&grpc=true"},
		{"unknown parameter", "gs://b?endpoint=" + addr + "&bogus=1"},
		{"bad connect_timeout", "gs://b?endpoint=" + addr + "&connect_timeout=-1s"},
		{"user in the URL", "gs://me:s3cret@b?endpoint=" + addr},
		{"no bucket", "gs://?endpoint=" + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := blob.Open(context.Background(), tc.url)
			if !errors.Is(err, blob.ErrInvalidArgument) {
				t.Fatalf("open = %v, want ErrInvalidArgument", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("%d connections were made to refused endpoints", n)
	}
}

// An endpoint that does not answer fails the open within connect_timeout,
// naming it; a bucket it does not have fails with ErrBucketNotFound.
func TestGSEndpointUnreachableOrMissing(t *testing.T) {
	ctx := context.Background()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	_, err = blob.Open(ctx, "gs://b?connect_timeout=300ms&endpoint="+closed)
	if err == nil || !strings.Contains(err.Error(), closed) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("open on a closed port = %v, want an error naming %s", err, closed)
	}
	srv := regionalServer(t)
	_, err = blob.Open(ctx, "gs://absent?endpoint="+srv.Endpoint())
	if !errors.Is(err, blob.ErrBucketNotFound) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("open of a missing bucket = %v, want ErrBucketNotFound", err)
	}
}
