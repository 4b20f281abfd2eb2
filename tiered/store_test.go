package tiered_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/tiered"
)

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	good := "tiered://?" + url.Values{"hot": {"mem://"}, "cold": {"mem://"}, "after": {"5m"}, "concurrency": {"2"}, "manual": {"true"},
		"pack_max_objects": {"500"}, "pack_max_bytes": {"64MiB"}, "pack_min_live_percent": {"40"}, "max_clock_skew": {"30s"}, "index_cache_bytes": {"8MiB"}}.Encode()
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
		"zero pack bound":   "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&pack_max_objects=0",
		"no packs":          "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&pack_max_objects=-1",
		"bad pack size":     "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&pack_max_bytes=lots",
		"live over 100":     "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&pack_min_live_percent=150",
		"live zero":         "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&pack_min_live_percent=0",
		"negative skew":     "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&max_clock_skew=-1s",
		"bad cache size":    "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&index_cache_bytes=-1",
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
		if step == "cold:write" && strings.HasPrefix(key, logPrefix) {
			f.mu.Lock()
			order = append(order, "pack after "+string(rune('0'+len(f.finalized)))+" finalized")
			f.mu.Unlock()
		}
	}}
	// Not through manual(): nopClose would hide Finalize.
	s, err := tiered.New(f, coldH, bound(tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 1, PackMaxObjects: alone, LeaseStore: leaseStoreFor(t, coldH)}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Each a pack of its own (alone).
	mustPut(t, s, "a", "one")
	mustPut(t, s, "b", "two")
	if res := s.CompactOnce(ctxT(t)); res.Moved != 2 {
		t.Fatalf("pass %+v", res)
	}
	if len(f.finalized) != 2 || !slices.Equal(order, []string{"pack after 1 finalized", "pack after 2 finalized"}) {
		t.Errorf("finalized %q, packs %q: each object must be finalized before its pack is written", f.finalized, order)
	}
}

// The background compactor moves objects once they are older than After,
// not before; it reports progress; Close stops it and waits. It runs on
// synctest's clock, so "just before After" is exactly that however busy the
// machine is.
func TestBackgroundCompactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 200 * time.Millisecond
		hot, cold := memPair(t)
		s, err := tiered.New(keepOpen(hot), nopClose{cold}, tiered.Options{After: after, Interval: 10 * time.Millisecond, MoveTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			mustPut(t, s, k, k+k)
		}
		time.Sleep(after - time.Nanosecond)
		synctest.Wait()
		if st := s.Stats(); st.MovedObjects != 0 || st.Passes == 0 {
			t.Errorf("stats %+v: want passes and nothing moved before After", st)
		}
		// The first pass once the objects are After old moves them all: it
		// begins within an Interval and waits MoveTimeout/10 after writing
		// the pack before its hot deletes.
		time.Sleep(10*time.Millisecond + 5*time.Millisecond)
		synctest.Wait()
		st := s.Stats()
		if st.MovedObjects != 3 || st.MovedBytes != 6 || st.Errors != 0 {
			t.Errorf("stats %+v: want 3 objects, 6 bytes moved", st)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		passes := s.Stats().Passes
		time.Sleep(time.Second)
		synctest.Wait()
		if s.Stats().Passes != passes {
			t.Error("the compactor ran after Close returned")
		}
		if err := s.Close(); !errors.Is(err, blob.ErrClosed) {
			t.Errorf("second Close: %v", err)
		}
	})
}

// Lag reports how far behind compaction is; failed moves are counted and
// the last error kept.
func TestLagAndErrors(t *testing.T) {
	hot, cold := memPair(t)
	coldF := fault.Wrap(cold, fault.Options{Seed: 1})
	// The object is 90s old to the compactor: hot shows it aged by 90s
	// more than it is.
	s, err := tiered.New(testkit.AgedBy(keepOpen(hot), 90*time.Second), nopClose{coldF}, tiered.Options{After: time.Minute, Manual: true, LeaseStore: leaseStoreFor(t, coldF)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, "k", "v")
	a, err := hot.Stat(ctxT(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	coldF.FailFrom(fault.OpCommit, 1, 0, nil)
	res := s.CompactOnce(ctxT(t))
	// The lag is the age past After at the end of the pass: 30s, and the
	// time since the put.
	hi := time.Since(a.ModTime) + 30*time.Second
	st := s.Stats()
	if res.Failed != 1 || st.Errors != 1 || st.LastError == "" {
		t.Errorf("pass %+v stats %+v: want one failed move", res, st)
	}
	if lo := 30 * time.Second; st.Lag < lo || st.Lag > hi {
		t.Errorf("lag %v, want from %v to %v (90s old, After 1m)", st.Lag, lo, hi)
	}
	coldF.Reset()
	s.CompactOnce(ctxT(t))
	if st := s.Stats(); st.Lag != 0 || st.MovedObjects != 1 {
		t.Errorf("after a good pass: %+v", st)
	}
}

// inFlight counts cold writes, started and concurrent.
// inFlight counts the moves started (their markers' writes) and the writes
// in flight, of which a move has one at a time (its marker, then its pack).
type inFlight struct {
	blob.Store
	started, now, peak atomic.Int64
}

func (c *inFlight) NewWriter(ctx context.Context, key string, o *blob.WriterOptions) (blob.Writer, error) {
	if strings.HasPrefix(key, batchPrefix) {
		c.started.Add(1)
	}
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

// Moves respect both bounds: never more than Concurrency in flight, and no
// faster than MaxObjectsPerSecond. The pass runs on synctest's clock, which
// the test steps by the pacing interval, counting the moves started by then.
func TestConcurrencyAndRateBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hot, cold := memPair(t)
		coldF := fault.Wrap(cold, fault.Options{Seed: 1})
		// Longer than the 5 ms between starts, so the bound is what limits.
		coldF.AddLatency(fault.OpCommit, latency.Fixed(20*time.Millisecond))
		c := &inFlight{Store: coldF}
		s, err := tiered.New(keepOpen(hot), nopClose{c}, bound(tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 3, MaxObjectsPerSecond: 200, PackMaxObjects: alone}))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		const n = 40
		for i := range n {
			mustPut(t, s, "k"+string(rune('A'+i)), "value") // each a pack of its own
		}
		time.Sleep(time.Nanosecond) // the bubble's clock stands still: age the objects past After
		done := make(chan tiered.PassResult, 1)
		go func() { done <- s.CompactOnce(ctxT(t)) }()
		// At 200/s one move may start every 5 ms, the first at once: by
		// step k (5k ms) at most k+1 have started, so 40 take 39 steps.
		const step = 5 * time.Millisecond
		for k := 0; ; k++ {
			synctest.Wait()
			if started := c.started.Load(); started > int64(k+1) {
				t.Fatalf("%d moves started after %v, beyond 200/s", started, time.Duration(k)*step)
			}
			select {
			case res := <-done:
				if res.Moved != n {
					t.Fatalf("pass %+v", res)
				}
				if k < n-1 {
					t.Errorf("40 moves at 200/s done after %d steps of %v, want at least %d", k, step, n-1)
				}
				if p := c.peak.Load(); p != 3 {
					t.Errorf("peak concurrent moves %d, want the bound, 3", p)
				}
				return
			default:
			}
			time.Sleep(step)
		}
	})
}

// A read must never return a version older than one acknowledged before it
// began. Here v1 was moved to cold, v2 was put and acknowledged, and a read
// of the key starts while hot's reads are slow; v2's move (by a compactor in
// another process) completes while the read waits for hot. The read must
// return v2: cold may be asked only after hot's miss, never alongside it. The
// read runs on synctest's clock, so the interleaving is exact; hot is a
// single mem store or a quorum of three.
func TestNoStaleReadWhileAMoveCompletes(t *testing.T) {
	for _, hotKind := range []string{"mem", "quorum"} {
		t.Run(hotKind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const d = 30 * time.Millisecond
				var slow []*fault.Store
				var userHot, compactorHot blob.Store
				switch hotKind {
				case "mem":
					hot, _ := memPair(t)
					f := fault.Wrap(hot, fault.Options{Seed: 1})
					slow = append(slow, f)
					userHot, compactorHot = f, hot
				case "quorum":
					var slowReplicas, replicas []blob.Store
					for i := range 3 {
						m, _ := memPair(t)
						f := fault.Wrap(m, fault.Options{Seed: uint64(i + 1)})
						slow = append(slow, f)
						slowReplicas = append(slowReplicas, nopClose{f})
						replicas = append(replicas, nopClose{m})
					}
					userHot, compactorHot = newQuorum(t, slowReplicas), newQuorum(t, replicas)
				}
				_, cold := memPair(t)
				user := manual(t, userHot, cold)
				compactor := manual(t, compactorHot, cold)
				mustPut(t, user, "k", "v1")
				// The bubble's clock stands still: age k past After and,
				// over a quorum, past the time its write may still be
				// retried (a pack move retires only older versions).
				age := time.Nanosecond + quorumInFlight
				time.Sleep(age)
				// The user's store moves v1 itself: a store that moved a key
				// has the most reason to look in cold first.
				if res := user.CompactOnce(ctxT(t)); res.Moved != 1 {
					t.Fatalf("pass %+v, want v1 moved", res)
				}
				mustPut(t, user, "k", "v2")
				time.Sleep(age)
				for _, f := range slow {
					f.AddLatency(fault.OpRead, latency.Fixed(d))
				}
				type result struct {
					b   []byte
					err error
				}
				done := make(chan result, 1)
				go func() {
					b, err := blob.ReadAll(ctxT(t), user, "k")
					done <- result{b, err}
				}()
				synctest.Wait() // the read waits for hot
				if res := compactor.CompactOnce(ctxT(t)); res.Moved != 1 {
					t.Fatalf("pass %+v, want v2 moved", res)
				}
				// A quorum read may take several slowed rounds (a majority,
				// hedges); the bubble's clock runs until it returns.
				var r result
				for got := false; !got; {
					time.Sleep(d)
					synctest.Wait()
					select {
					case r = <-done:
						got = true
					default:
					}
				}
				if r.err != nil || string(r.b) != "v2" {
					t.Errorf("read %q, %v; want v2 (acknowledged before the read began)", r.b, r.err)
				}
				var delays int64
				for _, f := range slow {
					delays += f.Stats()[fault.OpRead].Delays
				}
				if delays == 0 {
					t.Error("no hot read was slowed: the test does not test")
				}
			})
		})
	}
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
