package tiered_test

import (
	"context"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/tiered"
)

// aggressiveURL moves every object as soon as it is written, checking for
// work every millisecond, so the suite runs against objects in mid move,
// in shards compaction shards.
func aggressiveURL(shards int) string {
	q := url.Values{"hot": {"mem://"}, "cold": {"mem://"}, "after": {"0"}, "interval": {"1ms"}, "shards": {strconv.Itoa(shards)}}
	return "tiered://?" + q.Encode()
}

func openAggressive(ctx context.Context, t *testing.T, shards int) blob.Store {
	s, err := blob.Open(ctx, aggressiveURL(shards))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// movingStore is a tiered Store that runs a pass after every tenth
// write, so that the suite, which may run faster than any compactor's
// interval, reads, overwrites and deletes objects that moved (into packs:
// every object is older than After=0), besides the ones its compactor
// moves meanwhile.
type movingStore struct {
	*tiered.Store
	writes *atomic.Int64
}

func (m movingStore) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	w, err := m.Store.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &movingWriter{Writer: w, m: m, ctx: ctx}, nil
}

type movingWriter struct {
	blob.Writer
	m   movingStore
	ctx context.Context
}

func (w *movingWriter) Close() error {
	err := w.Writer.Close()
	if err == nil && w.m.writes.Add(1)%10 == 0 {
		w.m.CompactOnce(w.ctx)
	}
	return err
}

func TestConformance(t *testing.T) { testConformance(t, 1) }

// With four shards, whose passes run at once.
func TestConformanceSharded(t *testing.T) { testConformance(t, 4) }

func testConformance(t *testing.T, shards int) {
	var stores []*tiered.Store
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s := openAggressive(ctx, t, shards)
			stores = append(stores, s.(*tiered.Store))
			return movingStore{s.(*tiered.Store), new(atomic.Int64)}
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	// The suite proves nothing about tiering unless objects really moved
	// while it ran.
	var moved, packs int64
	for _, s := range stores {
		moved += s.Stats().MovedObjects
		packs += s.Stats().Packs
	}
	if moved == 0 || packs == 0 {
		t.Fatalf("the compactor moved %d objects in %d packs during the suite: want some", moved, packs)
	}
	t.Logf("the compactor moved %d objects in %d packs during the suite", moved, packs)
}

func TestGocloudDrivertest(t *testing.T) {
	var stores []*tiered.Store
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s := openAggressive(ctx, t, 1)
			stores = append(stores, s.(*tiered.Store))
			return s
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
	var packs int64
	for _, s := range stores {
		packs += s.Stats().Packs
	}
	if packs == 0 {
		t.Fatal("no pack was made during the suite")
	}
	t.Logf("%d packs made during the suite", packs)
}
