package parallel_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zonalblob/zonalblob/internal/parallel"
)

// Every index is called once, and never more than limit at a time.
func TestDoBoundsAndCovers(t *testing.T) {
	for _, limit := range []int{0, 1, 3, 100} {
		var running, peak atomic.Int64
		var mu sync.Mutex
		seen := map[int]int{}
		release := make(chan struct{})
		go func() {
			// Let the calls pile up against the bound before any returns.
			for running.Load() < int64(min(max(limit, 1), 20)) {
				runtime.Gosched()
			}
			close(release)
		}()
		parallel.Do(20, limit, func(i int) {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			<-release
			mu.Lock()
			seen[i]++
			mu.Unlock()
			running.Add(-1)
		})
		if len(seen) != 20 {
			t.Errorf("limit %d: %d indices called, want 20", limit, len(seen))
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("limit %d: index %d called %d times", limit, i, n)
			}
		}
		if want := int64(min(max(limit, 1), 20)); peak.Load() != want {
			t.Errorf("limit %d: %d calls at once, want %d", limit, peak.Load(), want)
		}
		if running.Load() != 0 {
			t.Errorf("limit %d: Do returned with %d calls running", limit, running.Load())
		}
	}
}

// Once the context is done Range takes no more values, and it returns only
// after the calls it started have.
func TestRangeStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var taken, finished atomic.Int64
	seq := func(yield func(int) bool) {
		for i := range 1000 {
			taken.Add(1)
			if !yield(i) {
				return
			}
		}
	}
	all := parallel.Range(ctx, seq, 2, func(i int) {
		if i == 5 {
			cancel()
		}
		finished.Add(1)
	})
	if all {
		t.Error("Range reported every value taken after its context ended")
	}
	if taken.Load() >= 1000 {
		t.Errorf("Range took %d values after its context ended", taken.Load())
	}
	if finished.Load() != taken.Load()-1 && finished.Load() != taken.Load() {
		t.Errorf("%d calls finished of %d values taken", finished.Load(), taken.Load())
	}
	if !parallel.Range(context.Background(), seq, 4, func(int) {}) {
		t.Error("Range over a live context did not take every value")
	}
}
