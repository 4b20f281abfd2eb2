package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeObjects is a Load/Discard pair that records what it made and threw
// away. Each item is the time it was loaded.
type fakeObjects struct {
	delay     time.Duration
	mu        sync.Mutex
	loads     int
	inFlight  int
	maxFlight int
	discarded map[DiscardReason]int
	fail      atomic.Bool
}

func (f *fakeObjects) load(ctx context.Context) (time.Time, error) {
	f.mu.Lock()
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	if f.fail.Load() {
		return time.Time{}, errors.New("create failed")
	}
	f.mu.Lock()
	f.loads++
	f.mu.Unlock()
	return time.Now(), nil
}

func (f *fakeObjects) discard(_ context.Context, _ time.Time, r DiscardReason) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.discarded == nil {
		f.discarded = map[DiscardReason]int{}
	}
	f.discarded[r]++
}

func newTestPool(t *testing.T, f *fakeObjects, o Options[time.Time]) *Pool[time.Time] {
	t.Helper()
	o.Load, o.Discard = f.load, f.discard
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOptionsValidated(t *testing.T) {
	load := func(context.Context) (int, error) { return 0, nil }
	for _, o := range []Options[int]{
		{MaxItemAge: time.Second, Capacity: 1},
		{Load: load, Capacity: 1},
		{Load: load, MaxItemAge: time.Second},
		{Load: load, MaxItemAge: time.Second, Capacity: 2, MinIdle: 3},
		{Load: load, MaxItemAge: time.Second, Capacity: 2, LoadConcurrency: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestNeverHandsOutAgedItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 50 * time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: 10 * time.Second, Capacity: 8, MinIdle: 3})
		defer p.Close(context.Background())
		ctx := context.Background()
		for step := range 200 {
			// Irregular gaps, some longer than MaxItemAge.
			time.Sleep(time.Duration(step%7) * 1700 * time.Millisecond)
			item, err := p.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The bubble's clock: the item was loaded less than
			// MaxItemAge before it was handed out.
			if now := time.Now(); !item.After(now.Add(-10 * time.Second)) {
				t.Fatalf("step %d: handed out at %v an item loaded at %v", step, now, item)
			}
		}
		synctest.Wait()
		if s := p.Stats(); s.Discards[DiscardAged] == 0 || f.discarded[DiscardAged] != int(s.Discards[DiscardAged]) {
			t.Errorf("aged discards: stats %d, Discard called %d times; want equal and > 0", s.Discards[DiscardAged], f.discarded[DiscardAged])
		}
	})
}

func TestBackgroundLoadsBoundedByLoadConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 80 * time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 20, MinIdle: 20, LoadConcurrency: 3})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if f.maxFlight != 3 {
			t.Errorf("max loads in flight %d, want exactly LoadConcurrency 3", f.maxFlight)
		}
		if s := p.Stats(); s.Ready != 20 {
			t.Errorf("ready %d, want the 20 MinIdle spares", s.Ready)
		}
		// Backpressure: a full pool loads nothing more.
		loads := f.loads
		time.Sleep(10 * time.Second)
		if f.loads != loads {
			t.Errorf("a full, idle pool loaded %d more items", f.loads-loads)
		}
		p.Close(context.Background())
		if f.discarded[DiscardShutdown] != 20 {
			t.Errorf("shutdown discarded %d, want 20", f.discarded[DiscardShutdown])
		}
	})
}

func TestColdMissNoSlowerThanOneLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 80 * time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 4, MinIdle: 1})
		defer p.Close(context.Background())
		// A background load started at New; 30ms into it, a caller misses.
		time.Sleep(30 * time.Millisecond)
		start := time.Now()
		if _, err := p.Get(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The in-flight load finishes first (50ms left), ahead of the
		// caller's own inline load (80ms).
		// The bubble's clock stands still while goroutines run: the miss
		// ended exactly when the load in flight did.
		if end := time.Now(); !end.Equal(start.Add(50 * time.Millisecond)) {
			t.Errorf("miss ended %v after it began, want the 50ms left of the load in flight", end.Sub(start))
		}
		// The inline load's item is not thrown away: it becomes a spare.
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Ready < 1 || s.Discards[DiscardOverflow] != 0 {
			t.Errorf("after the miss: ready %d, overflow discards %d", s.Ready, s.Discards[DiscardOverflow])
		}
	})
}

// TestSteadyDrain drains at 500 per second for 30 seconds of (virtual) time
// with 80ms loads: the pool must not run dry, and must not create items only
// to discard them.
func TestSteadyDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 80 * time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{
			MaxItemAge: 30 * time.Second, Capacity: 256, MinIdle: 2, LoadConcurrency: 64,
		})
		ctx := context.Background()
		const rate, seconds = 500, 30
		warm := 0
		for i := range rate * seconds {
			if i == rate { // first second: the pool learns the rate
				s := p.Stats()
				warm = int(s.Misses)
			}
			time.Sleep(time.Second / rate)
			if _, err := p.Get(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s := p.Stats()
		steadyMisses := int(s.Misses) - warm
		total := rate * (seconds - 1)
		t.Logf("steady drain: %d gets, %d misses after warm-up (%d during), loads %d, discards %v, target %d, rate %.0f/s, age %v",
			total, steadyMisses, warm, s.Loads, s.Discards, s.Target, s.DrainRate, s.HandOutAge)
		if steadyMisses*1000 > total {
			t.Errorf("misses %d of %d gets after warm-up, want at most 0.1%%", steadyMisses, total)
		}
		p.Close(ctx)
		synctest.Wait()
		if waste := f.discarded[DiscardAged] + f.discarded[DiscardOverflow]; waste*100 > int(s.Loads) {
			t.Errorf("discarded %d of %d loaded while running, want at most 1%%", waste, s.Loads)
		}
		if f.discarded[DiscardShutdown] > s.Target+64 {
			t.Errorf("shutdown discarded %d, more than the target %d plus loads in flight", f.discarded[DiscardShutdown], s.Target)
		}
	})
}

func TestLoadErrorsReachTheMissingCallerAndBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 10 * time.Millisecond}
		f.fail.Store(true)
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 4, MinIdle: 2})
		defer p.Close(context.Background())
		time.Sleep(time.Millisecond)
		if _, err := p.Get(context.Background()); err == nil {
			t.Fatal("Get succeeded while every load fails")
		}
		time.Sleep(5 * time.Second)
		if s := p.Stats(); s.LoadErrors > 40 {
			t.Errorf("%d load errors in 5s: the pool does not back off", s.LoadErrors)
		}
		f.fail.Store(false)
		time.Sleep(2 * time.Second)
		if _, err := p.Get(context.Background()); err != nil {
			t.Errorf("pool did not recover after loads succeed again: %v", err)
		}
	})
}

func TestGetCanceledKeepsTheItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: time.Second}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 4, MinIdle: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := p.Get(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get = %v, want deadline exceeded", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		// The caller's inline load and the background one both finished
		// after it gave up: both must be kept as spares, none wasted.
		s := p.Stats()
		if s.Ready < 2 || int64(s.Ready) != s.Loads || len(f.discarded) != 0 {
			t.Errorf("ready %d of %d loaded, discards %v: the loads of a caller who gave up must become spares", s.Ready, s.Loads, f.discarded)
		}
		p.Close(context.Background())
		if _, err := p.Get(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close = %v", err)
		}
		synctest.Wait()
		if f.discarded[DiscardShutdown] != s.Ready {
			t.Errorf("shutdown discarded %d, want the %d ready", f.discarded[DiscardShutdown], s.Ready)
		}
	})
}

func TestCloseFailsWaitersAndDiscardsLoadsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: time.Second}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 4, MinIdle: 1})
		errc := make(chan error)
		go func() {
			_, err := p.Get(context.Background())
			errc <- err
		}()
		time.Sleep(10 * time.Millisecond)
		p.Close(context.Background())
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Errorf("waiting Get = %v, want ErrClosed", err)
		}
		s := p.Stats()
		if s.Hits+s.Misses != 1 {
			t.Errorf("stats %+v", s)
		}
		// The loads in flight at Close (the waiting caller's and a spare)
		// ran to their end, uncancelled, and what they made was discarded
		// before Close returned.
		if s.LoadErrors != 0 || s.Loads != 2 || f.loads != 2 || f.discarded[DiscardShutdown] != 2 {
			t.Errorf("load errors %d, loads %d (made %d), shutdown discards %d: want the 2 loads in flight finished and discarded",
				s.LoadErrors, s.Loads, f.loads, f.discarded[DiscardShutdown])
		}
	})
}

// A Close whose context ends before the loads in flight do stops waiting,
// cancels them and says so.
func TestCloseCancelsLoadsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: time.Hour}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: 2 * time.Hour, Capacity: 4, MinIdle: 1})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want the deadline exceeded", err)
		}
		synctest.Wait()
		if s := p.Stats(); s.Loads != 0 || s.LoadErrors != 1 || s.Loading != 0 {
			t.Errorf("loads %d, load errors %d, loading %d: want the one load in flight cancelled", s.Loads, s.LoadErrors, s.Loading)
		}
	})
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := range 100 {
		h.Add(time.Duration(i+1) * time.Millisecond)
	}
	if q := h.Quantile(0.5); q != 50*time.Millisecond {
		t.Errorf("p50 bucket %v, want 50ms", q)
	}
	if q := h.Quantile(0.99); q != 100*time.Millisecond {
		t.Errorf("p99 bucket %v, want 100ms", q)
	}
	if h.Mean() != 50500*time.Microsecond {
		t.Errorf("mean %v", h.Mean())
	}
}

// Loads slower than MaxItemAge make items too old to hand out: the age of an
// item counts from the start of its load, so none is ever handed out, and the
// caller learns why instead of waiting forever.
func TestSlowLoadsNeverHandOutAgedItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: 400 * time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: 100 * time.Millisecond, Capacity: 4, MinIdle: 2})
		for range 5 {
			start := time.Now()
			item, err := p.Get(context.Background())
			if !errors.Is(err, ErrStale) {
				t.Fatalf("Get = %v (item loaded %v after the Get began), want ErrStale", err, item.Sub(start))
			}
		}
		p.Close(context.Background())
		synctest.Wait()
		s := p.Stats()
		if s.Hits != 0 || s.HandOutAge.N != 0 {
			t.Errorf("%d hits, %d hand-outs: an item older than MaxItemAge was handed out", s.Hits, s.HandOutAge.N)
		}
		if got := f.discarded[DiscardAged] + f.discarded[DiscardShutdown]; got != f.loads {
			t.Errorf("%d of %d loaded items discarded", got, f.loads)
		}
	})
}

// A caller that gives up just as an item reaches it, with the pool closed in
// between, must not put the item back into the closed pool.
func TestGiveUpAfterCloseDiscardsTheItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeObjects{delay: time.Millisecond}
		p := newTestPool(t, f, Options[time.Time]{MaxItemAge: time.Minute, Capacity: 4, MinIdle: 1})
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		w := &waiter[time.Time]{ch: make(chan result[time.Time], 1)}
		w.ch <- result[time.Time]{item: time.Now(), born: time.Now()}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.giveUp(w)
		synctest.Wait()
		if s := p.Stats(); s.Ready != 0 {
			t.Errorf("%d items ready in a closed pool", s.Ready)
		}
		// One spare from before Close, and the item the caller gave up.
		if f.discarded[DiscardShutdown] != 2 {
			t.Errorf("shutdown discards %d, want 2", f.discarded[DiscardShutdown])
		}
	})
}

// Loads that finish out of order are queued by when they started, so the
// head of the queue is always the oldest item.
func TestReadyQueueOrderedByBirth(t *testing.T) {
	p := &Pool[int]{}
	base := time.Unix(0, 0)
	for _, ms := range []int{30, 10, 20, 40, 5} {
		p.readyLocked(ms, base.Add(time.Duration(ms)*time.Millisecond))
	}
	var got []int
	for _, e := range p.ready {
		got = append(got, e.item)
	}
	if want := []int{5, 10, 20, 30, 40}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queue %v, want %v", got, want)
	}
}
