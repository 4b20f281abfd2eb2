package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/pool"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
)

func newCreator(ctx context.Context, t *testing.T, opts pool.CreatorOptions) *pool.Creator {
	t.Helper()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pool.NewCreator(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The Creator must be invisible but for where Create's objects come from.
func TestCreatorConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newCreator(ctx, t, pool.CreatorOptions{Capacity: 8})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestCreatorServesFromThePoolAndCleansUp(t *testing.T) {
	ctx := context.Background()
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	// Count prewarms reaching the store: the inner store is wrapped so
	// that its writes can be seen.
	f := fault.Wrap(mem, fault.Options{Seed: 1})
	c, err := pool.NewCreator(f, pool.CreatorOptions{Capacity: 4, MinIdle: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blob.CreateBytes(ctx, c, "p/", []byte("first"), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats()["p/"].Ready < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	key, err := blob.CreateBytes(ctx, c, "p/", []byte("pooled"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats()["p/"]; st.Hits < 1 {
		t.Errorf("pool hits %d after a warm create", st.Hits)
	}
	if got, _ := blob.ReadAll(ctx, c, key); string(got) != "pooled" {
		t.Errorf("read %q", got)
	}
	// A canceled pooled write commits nothing.
	cctx, cancel := context.WithCancel(ctx)
	k2, w, err := blob.Create(cctx, c, "p/", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("never"))
	cancel()
	if err := w.Close(); err == nil {
		t.Error("Close after cancel succeeded")
	}
	if ok, _ := blob.Exists(ctx, c, k2); ok {
		t.Errorf("canceled pooled write left %s", k2)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := blob.Create(ctx, c, "p/", nil); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Create after Close = %v", err)
	}
}

func TestCreatorRefusesUnsafeAges(t *testing.T) {
	mem, _ := blob.Open(context.Background(), "mem://")
	defer mem.Close()
	_, err := pool.NewCreator(mem, pool.CreatorOptions{MaxItemAge: 9 * time.Minute, WriteTimeout: time.Minute, GraceWindow: 10 * time.Minute})
	if !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("NewCreator with MaxItemAge+WriteTimeout = GraceWindow: %v", err)
	}
}
