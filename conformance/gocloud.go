package conformance

import (
	"context"
	"net/http"
	"testing"

	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"

	"github.com/zonalblob/zonalblob/blob"
)

// RunGocloud runs gocloud's own conformance suite (drivertest) over the
// gocloud bridge of the stores h makes: the proof that an app written against
// gocloud.dev/blob works unchanged on them. Copy is always supported (the
// bridge falls back to a streamed copy); signed URLs never are.
func RunGocloud(t *testing.T, h Harness) {
	t.Helper()
	drivertest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		// drivertest expects every MakeDriver of one test to see the same
		// bucket, so one store serves them all and the harness closes it.
		return &gocloudHarness{s: h.NewStore(ctx, t), nonSlash: h.Caps.NonSlashDelimiters}, nil
	}, nil)
	// The bridge hands the store back, capabilities and all.
	t.Run("CapabilitiesThroughTheBridge", func(t *testing.T) {
		s := h.NewStore(context.Background(), t)
		defer s.Close()
		var back blob.Store
		if !blob.Bucket(s).As(&back) { // the bucket is not closed: the store is, once
			t.Fatal("the gocloud bucket's As gave no blob.Store")
		}
		if got, want := blob.CapabilitiesOf(back), blob.CapabilitiesOf(s); got != want {
			t.Errorf("capabilities through the bridge %+v, want %+v", got, want)
		}
	})
}

type gocloudHarness struct {
	s        blob.Store
	nonSlash bool
}

// MakeDriver bridges the store itself, so that the bridge sees its optional
// capabilities (native Copy, say) and drivertest runs them; the bucket, not
// the store, is wrapped to survive drivertest's Close.
func (g *gocloudHarness) MakeDriver(context.Context) (driver.Bucket, error) {
	return keepOpen{blob.Driver(g.s)}, nil
}

func (g *gocloudHarness) MakeDriverForNonexistentBucket(context.Context) (driver.Bucket, error) {
	return nil, nil
}

func (g *gocloudHarness) HTTPClient() *http.Client         { return nil }
func (g *gocloudHarness) SupportsCopy() bool               { return true }
func (g *gocloudHarness) SupportsNonSlashDelimiters() bool { return g.nonSlash }
func (g *gocloudHarness) Close()                           { g.s.Close() }

// keepOpen lets drivertest close its buckets without closing the shared store.
type keepOpen struct{ driver.Bucket }

func (keepOpen) Close() error { return nil }
