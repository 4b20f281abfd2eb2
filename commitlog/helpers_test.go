package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"

	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// backend makes n fresh zonal stores.
type backend struct {
	name  string
	mode  mode
	zones func(t testing.TB, n int) []blob.Store
}

func s3Zones(profile string) func(t testing.TB, n int) []blob.Store {
	return func(t testing.TB, n int) []blob.Store {
		out := make([]blob.Store, n)
		for i := range out {
			srv := s3expresstest.Start(t, s3expresstest.Options{Profile: s3expresstest.MustProfile(profile), Seed: uint64(i + 1)})
			out[i] = testkit.S3Express(t, srv, s3express.Options{})
		}
		return out
	}
}

// rapidZones are gcsrapid zones with pipelined append streams, as OpenURL
// opens them.
func rapidZones(profile gcsrapidtest.Profile) func(t testing.TB, n int) []blob.Store {
	return rapidZonesPiped(profile, true)
}

func rapidZonesPiped(profile gcsrapidtest.Profile, piped bool) func(t testing.TB, n int) []blob.Store {
	return func(t testing.TB, n int) []blob.Store {
		out := make([]blob.Store, n)
		for i := range out {
			out[i], _ = rapidZoneOf(t, profile, i, piped)
		}
		return out
	}
}

// rapidZone is zone i: a gcsrapid store over a bucket of an emulator of its
// own, which it returns for its counters.
func rapidZone(t testing.TB, profile gcsrapidtest.Profile, i int) (blob.Store, *gcsrapidtest.Server) {
	return rapidZoneOf(t, profile, i, true)
}

// rapidZoneOf is rapidZone with pipelined append streams or (piped false)
// the client library's Writer, one flush at a time.
func rapidZoneOf(t testing.TB, profile gcsrapidtest.Profile, i int, piped bool) (blob.Store, *gcsrapidtest.Server) {
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: profile, Seed: uint64(i + 1)})
	var opts gcsrapid.Options
	if piped {
		opts.StreamDial = gcsrapid.EmulatorStreamDial(srv.Endpoint())
	}
	return testkit.GCSRapid(t, srv, opts), srv
}

var backends = []backend{
	{"slots-mem", modeSlots, testkit.Mems},
	{"append-s3express", modeAppend, s3Zones("zero")},
	{"stream-gcsrapid", modeStream, rapidZones(gcsrapidtest.Zero())},
}

// simBackends are the backends of the simulation: the stream backend costs
// a gRPC stream per segment and zone, so it runs with fewer appends. The
// stream backend runs twice: pipelined, and one flush at a time.
var simBackends = append(slices.Clone(backends), backend{"stream-gcsrapid-serial", modeStream, rapidZonesPiped(gcsrapidtest.Zero(), false)})

func wrapAll(stores []blob.Store, seed uint64) ([]blob.Store, []*fault.Store) {
	out := make([]blob.Store, len(stores))
	fs := make([]*fault.Store, len(stores))
	for i, s := range stores {
		fs[i] = fault.Wrap(s, fault.Options{Seed: seed*31 + uint64(i), Name: fmt.Sprintf("zone%d", i)})
		out[i] = fs[i]
	}
	return out, fs
}

func mustOpen(t testing.TB, stores []blob.Store, name string, opts *Options) *Log {
	t.Helper()
	l, err := Open(context.Background(), stores, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// readN reads n records from r, failing the test on error.
func readN(t testing.TB, ctx context.Context, r *Reader, n int) []Record {
	t.Helper()
	out := make([]Record, 0, n)
	for range n {
		rec, err := r.Next(ctx)
		if err != nil {
			t.Fatalf("reading at %d: %v", r.Offset(), err)
		}
		out = append(out, rec)
	}
	return out
}

// azZones makes n containers on one Azurite server, each behind its own
// latency proxy with profile p (Azure Premium block blobs: appends are
// staged blocks committed under the blob's ETag).
func azZones(p azuritetest.Profile) func(t testing.TB, n int) []blob.Store {
	return func(t testing.TB, n int) []blob.Store {
		srv := azuritetest.Start(t, azuritetest.Options{})
		out := make([]blob.Store, n)
		for i := range out {
			endpoint := srv.Endpoint()
			if p.Name != azuritetest.None.Name {
				proxy := srv.WithLatency(p, uint64(i+1))
				t.Cleanup(proxy.Close)
				endpoint = proxy.Endpoint
			}
			out[i] = testkit.Azure(t, srv, azpremium.Options{Endpoint: endpoint, WarmConns: -1})
		}
		return out
	}
}

// wipe deletes every object under prefix in s: a zone replaced by an empty
// bucket.
func wipe(ctx context.Context, s blob.Store, prefix string) error {
	var keys []string
	for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return err
		}
		keys = append(keys, o.Key)
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k, nil); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	return nil
}

// opGate holds the first call that matches its armed prefix until
// released: a request that reaches the store late. The gate stores of the
// tests wrap a Store's method with it.
type opGate struct {
	mu      sync.Mutex
	prefix  string
	held    chan struct{} // closed when the held call arrives
	release chan struct{} // close to let it through
}

func (g *opGate) arm(prefix string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prefix = prefix
	g.held, g.release = make(chan struct{}), make(chan struct{})
}

// wait holds the call if it is the first since arm that match, given the
// armed prefix, accepts, until release is closed or ctx ends.
func (g *opGate) wait(ctx context.Context, match func(prefix string) bool) error {
	g.mu.Lock()
	hold := g.prefix != "" && match(g.prefix)
	if hold {
		g.prefix = ""
	}
	held, release := g.held, g.release
	g.mu.Unlock()
	if !hold {
		return nil
	}
	close(held)
	select {
	case <-release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
