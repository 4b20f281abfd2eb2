package s3express_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// An endpoint that does not answer fails the open within connect_timeout,
// with an error that names it, instead of hanging until the caller gives up.
func TestOpenUnreachableEndpoint(t *testing.T) {
	setEmulatorCredentials(t)
	addr := emulators.Blackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := blob.Open(ctx, "s3express://logs--use1-az4--x-s3?region=us-east-1&connect_timeout=300ms&endpoint=http://"+addr)
	if err == nil {
		s.Close()
		t.Fatal("opened a store at an endpoint that never answers")
	}
	if ctx.Err() != nil {
		t.Fatalf("the open waited for the caller's context: %v", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connect_timeout") {
		t.Errorf("error does not name the endpoint and the bound: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("error %v reads as the caller's deadline or a missing object", err)
	}
}

// A missing bucket fails the open of a URL, naming the bucket and the
// endpoint, and is not a missing object.
func TestOpenMissingBucket(t *testing.T) {
	setEmulatorCredentials(t)
	srv := newServer(t, s3expresstest.Options{})
	s, err := blob.Open(context.Background(), "s3express://nope--use1-az4--x-s3?region=us-east-1&endpoint="+srv.URL())
	if err == nil {
		s.Close()
		t.Fatal("opened a missing bucket")
	}
	if !errors.Is(err, blob.ErrBucketNotFound) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("open of a missing bucket: %v, want ErrBucketNotFound only", err)
	}
	if !strings.Contains(err.Error(), `"nope--use1-az4--x-s3"`) || !strings.Contains(err.Error(), srv.URL()) {
		t.Errorf("error does not name the bucket and the endpoint: %v", err)
	}
}

func TestOpenNegativeConnectTimeout(t *testing.T) {
	_, err := blob.Open(context.Background(), "s3express://logs--use1-az4--x-s3?region=us-east-1&connect_timeout=-1s")
	if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "connect_timeout") {
		t.Errorf("negative connect_timeout: %v", err)
	}
}
