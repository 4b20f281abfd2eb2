package tiered_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/tiered"
)

// aggressiveURL moves every object as soon as it is written, checking for
// work every millisecond, so the suite runs against objects in mid move.
func aggressiveURL() string {
	q := url.Values{"hot": {"mem://"}, "cold": {"mem://"}, "after": {"0"}, "interval": {"1ms"}}
	return "tiered://?" + q.Encode()
}

func openAggressive(ctx context.Context, t *testing.T) blob.Store {
	s, err := blob.Open(ctx, aggressiveURL())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	var stores []*tiered.Store
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s := openAggressive(ctx, t)
			stores = append(stores, s.(*tiered.Store))
			return s
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
			s := openAggressive(ctx, t)
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
