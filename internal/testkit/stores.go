package testkit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/quorum"
)

// seq names buckets and containers: every store a test makes on one
// emulator gets a fresh one.
var seq atomic.Int64

// Mem opens a mem:// store, closed when t ends.
func Mem(t testing.TB) blob.Store {
	t.Helper()
	s, err := regional.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Mems opens n mem:// stores (the zones or replicas of a test).
func Mems(t testing.TB, n int) []blob.Store {
	t.Helper()
	out := make([]blob.Store, n)
	for i := range out {
		out[i] = Mem(t)
	}
	return out
}

// Faulted is a mem:// store behind the fault wrapper.
func Faulted(t testing.TB, o fault.Options) *fault.Store {
	t.Helper()
	return fault.Wrap(Mem(t), o)
}

// GCSRapid is a gcsrapid Store over a new zonal bucket of srv, closed with
// its client when t ends. opts are as given: pooling is gcsrapid's default
// unless opts turn it off, and pipelined append streams reach the emulator
// only with opts.StreamDial = gcsrapid.EmulatorStreamDial(srv.Endpoint()).
// Extra client options (an interceptor, say) go to the client.
func GCSRapid(t testing.TB, srv *gcsrapidtest.Server, opts gcsrapid.Options, extra ...option.ClientOption) *gcsrapid.Store {
	t.Helper()
	ctx := context.Background()
	name := RapidBucket(t, srv)
	client, err := srv.Client(ctx, append([]option.ClientOption{storage.WithDisabledClientMetrics()}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gcsrapid.New(ctx, client, name, opts)
	if err != nil {
		client.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		client.Close()
	})
	return s
}

// RapidBucket creates a new zonal bucket on srv and returns its name, for a
// test that opens it another way (by URL, say).
func RapidBucket(t testing.TB, srv *gcsrapidtest.Server) string {
	t.Helper()
	name := fmt.Sprintf("zone%d", seq.Add(1))
	if err := srv.CreateBucket(name, true); err != nil {
		t.Fatal(err)
	}
	return name
}

// S3Express is an s3express Store over a new directory bucket of srv (its
// name ends in --x-s3, so the SDK runs S3 Express session auth), closed
// when t ends.
func S3Express(t testing.TB, srv *s3expresstest.Server, opts s3express.Options) *s3express.Store {
	t.Helper()
	n := seq.Add(1)
	name := fmt.Sprintf("zone%d--use1-az%d--x-s3", n, n%6+1)
	if err := srv.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
	s, err := s3express.New(context.Background(), srv.Client(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Azure is an azpremium Store over a new container of srv, signed with its
// account key (opts' Account, Endpoint and AccountKey are set from srv
// where empty: a test that puts a latency proxy in front sets Endpoint),
// closed when t ends.
func Azure(t testing.TB, srv *azuritetest.Server, opts azpremium.Options) *azpremium.Store {
	t.Helper()
	if opts.Account == "" {
		opts.Account = srv.Account
	}
	if opts.Endpoint == "" {
		opts.Endpoint = srv.Endpoint()
	}
	if opts.AccountKey == "" {
		opts.AccountKey = azpremium.Secret(srv.Key)
	}
	name := fmt.Sprintf("zone%d", seq.Add(1))
	s, err := azpremium.New(context.Background(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Client().Create(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// Quorum is a quorum Store over replicas, closed when t ends (which closes
// the replicas too).
func Quorum(t testing.TB, replicas []blob.Store, opts quorum.Options) *quorum.Store {
	t.Helper()
	q, err := quorum.New(replicas, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}
