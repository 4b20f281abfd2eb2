package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// nopClose lets several tiered stores (a compactor that "crashes" and the one
// that replaces it, or two "processes") share the same tiers.
type nopClose struct{ blob.Store }

// quorumHot is a quorum a test keeps open itself: it still retires.
type quorumHot struct{ *quorum.Store }

func (quorumHot) Close() error { return nil }

// keepOpen returns s with a Close that does nothing (a quorum stays one).
func keepOpen(s blob.Store) blob.Store {
	switch s := s.(type) {
	case quorumHot, *hooked, *countedQuorum, testkit.Aged, testkit.AgedRetirer: // their Close does nothing
		return s
	}
	return nopClose{s}
}

func (nopClose) Close() error { return nil }

// hooked calls at(step, key) around the calls a move makes, so a test can act
// (as another process would) at an exact point of a move. Steps are
// "stat", "read", "write", "delete" before the call and "committed" after a
// writer's Close succeeded, each prefixed by the tier's name and a colon.
type hooked struct {
	blob.Store
	name string
	at   func(step, key string)
}

func (h *hooked) call(step, key string) {
	if h.at != nil {
		h.at(h.name+":"+step, key)
	}
}

func (h *hooked) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	h.call("stat", key)
	return h.Store.Stat(ctx, key)
}

func (h *hooked) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	h.call("read", key)
	return h.Store.NewRangeReader(ctx, key, off, n)
}

func (h *hooked) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	h.call("write", key)
	w, err := h.Store.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &hookedWriter{Writer: w, h: h, key: key}, nil
}

func (h *hooked) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	h.call("delete", key)
	return h.Store.Delete(ctx, key, opts)
}

func (h *hooked) Close() error { return nil }

// Resolve passes a quorum's Resolve through (recovery resolves a key
// before it judges a failed move by a Stat); other stores have nothing to
// resolve.
func (h *hooked) Resolve(ctx context.Context, key string) error {
	if r, ok := h.Store.(interface {
		Resolve(context.Context, string) error
	}); ok {
		return r.Resolve(ctx, key)
	}
	return nil
}

type hookedWriter struct {
	blob.Writer
	h   *hooked
	key string
}

func (w *hookedWriter) Close() error {
	err := w.Writer.Close()
	if err == nil {
		w.h.call("committed", w.key)
	}
	return err
}

func memPair(t *testing.T) (hot, cold blob.Store) {
	t.Helper()
	return testkit.Mem(t), testkit.Mem(t)
}

// manual returns a tiered store over hot and cold whose compactor runs only
// when asked, one move at a time, moving everything (manualWith: unless
// its options set After), each object larger than a byte in a pack of its
// own (alone). Its Owner is the same for every store a test makes, so a
// store made after a "crash" finishes the moves of the one before at once,
// as a restarted process with a stable name would. (Stores that only serve
// users never run passes, so they may share it.)
func manual(t *testing.T, hot, cold blob.Store) *tiered.Store {
	t.Helper()
	return manualWith(t, hot, cold, aloneOpts)
}

// aloneOpts are the options of manual's stores: each object moved alone
// (see alone), and a MoveTimeout short enough for a compactor to retire a
// grave within a test (every store over the same tiers must share it) and
// long enough for a move whose every call a test hooks.
var aloneOpts = tiered.Options{PackMaxObjects: alone, MoveTimeout: 2 * time.Second, MaxClockSkew: time.Millisecond}

// logPrefix and batchPrefix start the names of the pack log's objects and
// of the pack moves' markers in cold.
const (
	logPrefix   = "\U0010FFFD\U0010FFFDlog/"
	batchPrefix = "\U0010FFFD\U0010FFFDbatch/"
)

// markersIn returns the pack moves' markers cold holds.
func markersIn(t *testing.T, cold blob.Store) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(ctxT(t), cold, &blob.ListOptions{Prefix: batchPrefix}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// alone, as PackMaxObjects in these tests, stands for a store that moves
// every object larger than a byte in a pack of its own, its bytes streamed
// from hot to cold (PackMaxBytes of one byte; see bound).
const alone = -1

// bound returns o with its PackMaxObjects of alone made the bounds it
// stands for.
func bound(o tiered.Options) tiered.Options {
	if o.PackMaxObjects == alone {
		o.PackMaxObjects, o.PackMaxBytes = 0, 1
	}
	return o
}

func manualWith(t *testing.T, hot, cold blob.Store, o tiered.Options) *tiered.Store {
	t.Helper()
	if o.After == 0 {
		o.After = time.Nanosecond
	}
	o.Manual, o.Concurrency = true, 1
	if o.LeaseStore == nil {
		// Tests that count or fail cold's calls one by one see only the
		// pass's: the lease of the stores over one cold store lives in a
		// store of its own (tests that set it to cold see it there).
		o.LeaseStore = leaseStoreFor(t, cold)
	}
	if o.Owner == "" {
		o.Owner = "test-compactor"
	}
	s, err := tiered.New(keepOpen(hot), nopClose{cold}, bound(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s blob.Store, key, val string) {
	t.Helper()
	if err := blob.Put(ctxT(t), s, key, []byte(val), nil); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// checkModel fails t for every key whose content through s is not model's,
// and for every key of gone that s still returns.
func checkModel(t *testing.T, s blob.Store, model map[string]string, gone []string) {
	t.Helper()
	for k, v := range model {
		got, err := blob.ReadAll(ctxT(t), s, k)
		if err != nil || !bytes.Equal(got, []byte(v)) {
			t.Errorf("%s: read %q, %v; want %q", k, got, err, v)
		}
	}
	for _, k := range gone {
		if _, err := s.Stat(ctxT(t), k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s: deleted, but Stat gives %v", k, err)
		}
	}
}

// listKeys lists every key of s.
func listKeys(t *testing.T, s blob.Store) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(ctxT(t), s, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// quorumInFlight is the InFlightBound of the quorums newQuorum makes: half
// their TombstoneGrace and their StragglerTimeout.
const quorumInFlight = 4500 * time.Millisecond

// newQuorum returns a quorum store over replicas with its background work
// (probes, anti-entropy) slowed out of a test's way. Its reads are majority
// reads, the quorum's linearizable mode: a tiered store's reads are as
// linearizable as its hot store's.
func newQuorum(t *testing.T, replicas []blob.Store, tune ...func(*quorum.Options)) blob.Store {
	t.Helper()
	o := quorum.Options{Consistency: quorum.ReadMajority, ProbeInterval: time.Hour, AntiEntropyInterval: -1, CloseTimeout: time.Second,
		// Short, so that retirements are confirmed within a test (InFlightBound).
		StragglerTimeout: 2 * time.Second}
	for _, f := range tune {
		f(&o)
	}
	if o.TombstoneGrace == 0 {
		// As short as it may be, with the straggler timeout, so that the
		// rounds' retry window, and so InFlightBound, is too.
		o.TombstoneGrace = o.StragglerTimeout * 5 / 2
	}
	return quorumHot{testkit.Quorum(t, replicas, o)}
}

// retireGraves runs a pass, with options o, of a compactor whose clock is
// past the time the graves in hot are held: it retires them (and what they
// shadow), as a later pass would.
func retireGraves(t *testing.T, hot, cold blob.Store, o tiered.Options) {
	t.Helper()
	s := manualWith(t, testkit.AgedBy(hot, tiered.GraveHold(o.MoveTimeout, o.MaxClockSkew)+time.Minute), cold, o)
	if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
		t.Fatalf("pass retiring the graves: %+v (%s)", res, s.Stats().LastError)
	}
}

var leaseStores sync.Map // cold store -> the mem store of its compactor lease

// leaseStoreFor returns the store that holds the compactor lease of the
// tiered stores over cold that manualWith makes.
func leaseStoreFor(t *testing.T, cold blob.Store) blob.Store {
	if s, ok := leaseStores.Load(cold); ok {
		return s.(blob.Store)
	}
	m, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	s, loaded := leaseStores.LoadOrStore(cold, m)
	if loaded {
		m.Close()
	}
	return s.(blob.Store)
}
