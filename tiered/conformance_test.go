package tiered_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"

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

type harness struct{ s blob.Store }

func (h harness) MakeDriver(context.Context) (driver.Bucket, error) {
	return blob.Driver(nopClose{h.s}), nil
}
func (harness) MakeDriverForNonexistentBucket(context.Context) (driver.Bucket, error) {
	return nil, nil
}
func (harness) HTTPClient() *http.Client         { return nil }
func (harness) SupportsCopy() bool               { return true }
func (harness) SupportsNonSlashDelimiters() bool { return true }
func (h harness) Close()                         { h.s.Close() }

func TestGocloudDrivertest(t *testing.T) {
	drivertest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return harness{openAggressive(ctx, t)}, nil
	}, nil)
}
