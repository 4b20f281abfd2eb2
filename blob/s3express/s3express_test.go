package s3express_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/conformance"
)

func newServer(t testing.TB, opts s3expresstest.Options) *s3expresstest.Server {
	t.Helper()
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	return s3expresstest.Start(t, opts)
}

var bucketSeq atomic.Int64

// newBucket creates a fresh directory bucket on srv.
func newBucket(t testing.TB, srv *s3expresstest.Server) string {
	t.Helper()
	name := fmt.Sprintf("zb%d--use1-az4--x-s3", bucketSeq.Add(1))
	if err := srv.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
	return name
}

// newStore opens a Store on a fresh bucket of srv with a new client, so it
// starts without a session.
func newStore(t testing.TB, srv *s3expresstest.Server, opts s3express.Options, optFns ...func(*s3.Options)) *s3express.Store {
	t.Helper()
	s, err := s3express.New(context.Background(), srv.Client(optFns...), newBucket(t, srv), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{Profile: s3expresstest.MustProfile("zero")})
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newStore(t, srv, s3express.Options{})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
		OpenMissingBucket: func(ctx context.Context, t *testing.T) (blob.Store, error) {
			return s3express.New(ctx, srv.Client(), "nope--use1-az4--x-s3", s3express.Options{})
		},
	})
}

// TestConformanceNoSnapshots runs the listing tests with every page listed
// anew, the path taken when a snapshot has expired.
func TestConformanceNoSnapshots(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{Seed: 7})
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newStore(t, srv, s3express.Options{ListSnapshotTTL: -1})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestGocloudDrivertest(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return newStore(t, srv, s3express.Options{}) },
		Caps:     conformance.Caps{NonSlashDelimiters: true},
	})
}
