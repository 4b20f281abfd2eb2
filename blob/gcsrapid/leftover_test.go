package gcsrapid_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// leave writes what a multi-message write whose process died leaves: an
// appendable object that declares a size it never committed ("?"), with
// part of its bytes. It returns the raw writer's object.
func leave(ctx context.Context, t *testing.T, rc *storage.Client, bucket, key string) *storage.ObjectHandle {
	t.Helper()
	o := rc.Bucket(bucket).Object(key)
	w := o.NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.Metadata = map[string]string{"zonalblob-size": "?"}
	w.Write(bytes.Repeat([]byte("l"), 3<<20))
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return o
}

// A key held by the leftover of a write that never committed (hidden from
// every reader) is taken by a conditional create once the leftover is older
// than LeftoverAge: a buffered write goes through, a streamed one fails with
// an error other than ErrExists and its caller's retry goes through. A young
// leftover may be a live write, and keeps the key.
func TestConditionalCreateOverALeftover(t *testing.T) {
	ctx := context.Background()
	srv := strictServer(t, gcsrapidtest.Options{})
	young := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool})
	defer young.Close()
	old := newStoreOnBucket(ctx, t, srv, young.Bucket(), gcsrapid.Options{CreatorOptions: noPool, LeftoverAge: time.Nanosecond, MaxBuffer: 4 << 20})
	defer old.Close()
	rc, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ifNew := &blob.WriterOptions{If: blob.IfNotExist()}

	leave(ctx, t, rc, young.Bucket(), "k")
	visibleAs(ctx, t, young, "k", nil)
	if err := blob.Put(ctx, young, "k", []byte("v"), ifNew); !errors.Is(err, blob.ErrExists) {
		t.Errorf("conditional create over a young leftover: %v, want ErrExists", err)
	}
	for _, val := range [][]byte{[]byte("small"), bytes.Repeat([]byte("m"), 3<<20)} {
		leave(ctx, t, rc, young.Bucket(), "k")
		before := old.Stats().LeftoversRemoved
		if err := blob.Put(ctx, old, "k", val, ifNew); err != nil {
			t.Fatalf("conditional create of %d bytes over an old leftover: %v", len(val), err)
		}
		visibleAs(ctx, t, young, "k", val)
		if got := old.Stats().LeftoversRemoved - before; got != 1 {
			t.Errorf("%d leftovers removed, want 1", got)
		}
		if err := old.Delete(ctx, "k", nil); err != nil {
			t.Fatal(err)
		}
	}
	// Streamed: its first bytes are gone by the time it learns.
	leave(ctx, t, rc, young.Bucket(), "k")
	huge := bytes.Repeat([]byte("h"), 9<<20)
	err = blob.Put(ctx, old, "k", huge, ifNew)
	if err == nil || errors.Is(err, blob.ErrExists) {
		t.Fatalf("streamed conditional create over an old leftover: %v, want a failure other than ErrExists", err)
	}
	if err := blob.Put(ctx, old, "k", huge, ifNew); err != nil {
		t.Fatalf("the caller's retry: %v", err)
	}
	visibleAs(ctx, t, young, "k", huge)
}

// The removal of a leftover races the commit of the write that made it:
// the write commits (declares its size) between the remover's look and its
// delete. The delete is conditional on the metageneration the commit
// changed, so the committed write stays and the conditional create fails
// with ErrExists.
func TestLeftoverRemovalRacingItsCommit(t *testing.T) {
	ctx := context.Background()
	srv := strictServer(t, gcsrapidtest.Options{})
	rc, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	bucket := "race"
	if err := srv.CreateBucket(bucket, true); err != nil {
		t.Fatal(err)
	}
	o := leave(ctx, t, rc, bucket, "k")
	var commits atomic.Int32
	commit := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/google.storage.v2.Storage/DeleteObject" && commits.Add(1) == 1 {
			// The leftover's writer was alive after all: it commits now.
			if _, err := o.Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{"zonalblob-size": "3145728"}}); err != nil {
				t.Errorf("commit: %v", err)
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client, err := srv.Client(ctx, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(commit)))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := gcsrapid.New(ctx, client, bucket, gcsrapid.Options{CreatorOptions: noPool, LeftoverAge: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := blob.Put(ctx, s, "k", []byte("v"), &blob.WriterOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrExists) {
		t.Errorf("conditional create over a write that committed meanwhile: %v, want ErrExists", err)
	}
	if commits.Load() == 0 {
		t.Fatal("the remover made no delete: the race was not run")
	}
	visibleAs(ctx, t, s, "k", bytes.Repeat([]byte("l"), 3<<20))
	if got := s.Stats().LeftoversRemoved; got != 0 {
		t.Errorf("%d leftovers removed, want 0", got)
	}
}
