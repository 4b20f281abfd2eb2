package tiered_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/tiered"
)

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	good := "tiered://?" + url.Values{"hot": {"mem://"}, "cold": {"mem://"}, "after": {"5m"}, "concurrency": {"2"}, "manual": {"true"}}.Encode()
	s, err := blob.Open(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*tiered.Store); !ok {
		t.Errorf("Open returned %T", s)
	}
	mustPut(t, s, "k", "v")
	checkModel(t, s, map[string]string{"k": "v"}, nil)
	s.Close()

	b, err := gcblob.OpenBucket(ctx, good)
	if err != nil {
		t.Fatalf("gocloud's DefaultURLMux: %v", err)
	}
	if err := b.WriteAll(ctx, "g", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	b.Close()

	for name, u := range map[string]string{
		"unknown parameter": "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&bogus=1",
		"no cold":           "tiered://?hot=mem%3A%2F%2F",
		"bad duration":      "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&after=soon",
		"host":              "tiered://somewhere?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F",
		"bad inner param":   "tiered://?hot=mem%3A%2F%2F%3Fnope%3D1&cold=mem%3A%2F%2F",
		"negative interval": "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&interval=-1s",
	} {
		if s, err := blob.Open(ctx, u); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: Open(%s) = %v, want ErrInvalidArgument", name, u, err)
			if s != nil {
				s.Close()
			}
		}
	}
}

// finalizing records the keys finalized, as gcsrapid's Finalize would seal them.
type finalizing struct {
	blob.Store
	mu        sync.Mutex
	finalized []string
}

func (f *finalizing) Finalize(ctx context.Context, key string) error {
	if _, err := f.Stat(ctx, key); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finalized = append(f.finalized, key)
	return nil
}

func TestFinalizesBeforeMoving(t *testing.T) {
	hot, cold := memPair(t)
	f := &finalizing{Store: hot}
	var order []string
	coldH := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if step == "cold:write" {
			f.mu.Lock()
			order = append(order, "copy after "+string(rune('0'+len(f.finalized)))+" finalized")
			f.mu.Unlock()
		}
	}}
	// Not through manual(): nopClose would hide Finalize.
	s, err := tiered.New(f, coldH, tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, "a", "1")
	mustPut(t, s, "b", "2")
	if res := s.CompactOnce(ctxT(t)); res.Moved != 2 {
		t.Fatalf("pass %+v", res)
	}
	if len(f.finalized) != 2 || order[0] != "copy after 1 finalized" || order[1] != "copy after 2 finalized" {
		t.Errorf("finalized %q, copies %q: each object must be finalized before its copy", f.finalized, order)
	}
}

// The background compactor moves objects once they are older than After,
// not before; it reports progress; Close stops it and waits.
func TestBackgroundCompactor(t *testing.T) {
	hot, cold := memPair(t)
	s, err := tiered.New(nopClose{hot}, nopClose{cold}, tiered.Options{After: 200 * time.Millisecond, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		mustPut(t, s, k, k+k)
	}
	time.Sleep(50 * time.Millisecond)
	if st := s.Stats(); st.MovedObjects != 0 || st.Passes == 0 {
		t.Errorf("stats %+v: want passes and nothing moved before After", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().MovedObjects < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := s.Stats()
	if st.MovedObjects != 3 || st.MovedBytes != 6 || st.Errors != 0 {
		t.Errorf("stats %+v: want 3 objects, 6 bytes moved", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	passes := s.Stats().Passes
	time.Sleep(50 * time.Millisecond)
	if s.Stats().Passes != passes {
		t.Error("the compactor ran after Close returned")
	}
	if err := s.Close(); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
}

// Lag reports how far behind compaction is; failed moves are counted and
// the last error kept.
func TestLagAndErrors(t *testing.T) {
	hot, cold := memPair(t)
	coldF := fault.Wrap(cold, fault.Options{Seed: 1})
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, err := tiered.New(nopClose{hot}, nopClose{coldF}, tiered.Options{After: time.Minute, Manual: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, "k", "v")
	mu.Lock()
	now = now.Add(time.Minute + 30*time.Second)
	mu.Unlock()
	coldF.FailFrom(fault.OpCommit, 1, 0, nil)
	res := s.CompactOnce(ctxT(t))
	st := s.Stats()
	if res.Failed != 1 || st.Errors != 1 || st.LastError == "" {
		t.Errorf("pass %+v stats %+v: want one failed move", res, st)
	}
	if st.Lag < 29*time.Second || st.Lag > 31*time.Second {
		t.Errorf("lag %v, want about 30s (90s old, After 1m)", st.Lag)
	}
	coldF.Reset()
	s.CompactOnce(ctxT(t))
	if st := s.Stats(); st.Lag != 0 || st.MovedObjects != 1 {
		t.Errorf("after a good pass: %+v", st)
	}
}

// inFlight counts concurrent cold writes.
type inFlight struct {
	blob.Store
	now, peak atomic.Int64
}

func (c *inFlight) NewWriter(ctx context.Context, key string, o *blob.WriterOptions) (blob.Writer, error) {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	w, err := c.Store.NewWriter(ctx, key, o)
	if err != nil {
		c.now.Add(-1)
		return nil, err
	}
	return &countedWriter{Writer: w, c: c}, nil
}

type countedWriter struct {
	blob.Writer
	c *inFlight
}

func (w *countedWriter) Close() error { defer w.c.now.Add(-1); return w.Writer.Close() }

func TestConcurrencyAndRateBounds(t *testing.T) {
	hot, cold := memPair(t)
	coldF := fault.Wrap(cold, fault.Options{Seed: 1})
	// Longer than the 5 ms between starts, so the bound is what limits.
	coldF.AddLatency(fault.OpCommit, latency.Fixed(20*time.Millisecond))
	c := &inFlight{Store: coldF}
	s, err := tiered.New(nopClose{hot}, nopClose{c}, tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 3, MaxObjectsPerSecond: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	for i := range n {
		mustPut(t, s, "k"+string(rune('A'+i)), "v")
	}
	start := time.Now()
	res := s.CompactOnce(ctxT(t))
	took := time.Since(start)
	if res.Moved != n {
		t.Fatalf("pass %+v", res)
	}
	if p := c.peak.Load(); p != 3 {
		t.Errorf("peak concurrent moves %d, want the bound, 3", p)
	}
	// 40 objects at 200/s take at least 195 ms (the first goes at once).
	if took < 190*time.Millisecond {
		t.Errorf("40 moves at 200/s took %v", took)
	}
}

// After a move, a read of the key asks both tiers at once and still prefers
// a newer version written to hot.
func TestRememberedKeysReadBothTiers(t *testing.T) {
	hot, cold := memPair(t)
	hotF := fault.Wrap(hot, fault.Options{Seed: 1})
	s := manual(t, hotF, cold)
	mustPut(t, s, "k", "v1")
	s.CompactOnce(ctxT(t))
	hotF.AddLatency(fault.OpRead, latency.Fixed(30*time.Millisecond))
	start := time.Now()
	checkModel(t, s, map[string]string{"k": "v1"}, nil)
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("read took %v: hot was not asked", took)
	}
	mustPut(t, s, "k", "v2")
	checkModel(t, s, map[string]string{"k": "v2"}, nil)
}

// Markers are invisible: a listing made while a move holds one shows only
// users' keys, with any page size, and users cannot name a marker.
func TestMarkersAreHidden(t *testing.T) {
	hot, cold := memPair(t)
	user := manual(t, hot, cold)
	for _, k := range []string{"a", "b", "c"} {
		mustPut(t, user, k, k)
	}
	listed := false
	at := func(step, key string) {
		if step != "cold:write" || listed {
			return
		}
		listed = true
		for _, size := range []int{1, 2, 1000} {
			var got []string
			for o, err := range blob.All(ctxT(t), user, &blob.ListOptions{PageSize: size}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, o.Key)
			}
			if !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Errorf("page size %d: listed %q mid-move", size, got)
			}
		}
	}
	s := manual(t, hot, &hooked{Store: cold, name: "cold", at: at})
	s.CompactOnce(ctxT(t))
	if !listed {
		t.Fatal("no move reached its copy")
	}
	reserved := "\U0010FFFD\U0010FFFDmine"
	if err := blob.Put(ctxT(t), user, reserved, []byte("x"), nil); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("write of a marker name: %v, want ErrInvalidKey", err)
	}
	if _, err := user.Stat(ctxT(t), reserved); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("stat of a marker name: %v, want ErrInvalidKey", err)
	}
}
