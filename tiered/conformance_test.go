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
	var moved int64
	for _, s := range stores {
		moved += s.Stats().MovedObjects
	}
	if moved == 0 {
		t.Fatal("the compactor moved nothing during the suite")
	}
	t.Logf("the compactor moved %d objects during the suite", moved)
}

func TestGocloudDrivertest(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return openAggressive(ctx, t) },
		Caps:     conformance.Caps{NonSlashDelimiters: true},
	})
}
