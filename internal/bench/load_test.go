package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The load tests run in a synctest bubble: the operations "take" their time
// on the bubble's clock, so every latency the loops measure is exact and
// known in advance, whatever the machine is doing.

// An open loop with one slot in flight and an operation five times slower
// than the interval must report each latency from the operation's intended
// start: the queue behind the slow operation shows, growing by the 40 ms the
// schedule loses per operation.
func TestOpenLoopMeasuresFromIntendedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			interval = 10 * time.Millisecond
			slow     = 50 * time.Millisecond
			n        = 8
		)
		lat, errs := OpenLoopLimit(context.Background(), float64(time.Second/interval), n, 1, func(ctx context.Context, _ int) error {
			time.Sleep(slow)
			return nil
		})
		if errs != 0 || len(lat) != n {
			t.Fatalf("%d latencies, %d errors", len(lat), errs)
		}
		Summarize(&Result{}, lat)
		// Operation i is due at i*interval and, queued behind the i before
		// it, ends at (i+1)*slow.
		for i, got := range lat {
			if want := time.Duration(i+1)*slow - time.Duration(i)*interval; got != want {
				t.Errorf("latency %d is %v, want %v (the wait for the slot included)", i, got, want)
			}
		}
	})
}

// Without a limit on operations in flight, a slow operation delays nothing
// else: each latency is the operation's own.
func TestOpenLoopUnlimitedDoesNotQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow = 50 * time.Millisecond
		lat, errs := OpenLoop(context.Background(), 100, 8, func(ctx context.Context, _ int) error {
			time.Sleep(slow)
			return nil
		})
		if errs != 0 || len(lat) != 8 {
			t.Fatalf("%d latencies, %d errors", len(lat), errs)
		}
		for i, got := range lat {
			if got != slow {
				t.Errorf("latency %d is %v, want the operation's own %v: operations queued without a limit", i, got, slow)
			}
		}
	})
}

func TestOpenLoopCountsErrorsAndStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	lat, errs := OpenLoop(ctx, 1000, 1000, func(ctx context.Context, _ int) error {
		if calls.Add(1) == 5 {
			cancel()
		}
		if calls.Load()%2 == 0 {
			return context.Canceled
		}
		return nil
	})
	if got := int(calls.Load()); got >= 1000 || len(lat)+errs != got || errs == 0 {
		t.Errorf("calls %d, latencies %d, errors %d", got, len(lat), errs)
	}
}

// Closed loop runs the workers back to back, each latency from the
// operation's actual start, so a slow operation's latency is its own.
func TestClosedLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const op = 10 * time.Millisecond
		var inFlight, most atomic.Int64
		lat, errs := ClosedLoop(context.Background(), 3, 100*time.Millisecond, 0, func(ctx context.Context, _ int) error {
			n := inFlight.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(op)
			inFlight.Add(-1)
			return nil
		})
		// Three workers, each starting an operation every 10 ms for 100 ms.
		if errs != 0 || len(lat) != 30 {
			t.Errorf("%d latencies, %d errors; want 30 and none", len(lat), errs)
		}
		if most.Load() != 3 {
			t.Errorf("%d operations in flight at most, want 3", most.Load())
		}
		for i, got := range lat {
			if got != op {
				t.Errorf("latency %d is %v, want the operation's own %v: closed loop latency must not include waiting for a worker", i, got, op)
			}
		}
		lat, _ = ClosedLoop(context.Background(), 4, time.Second, 10, func(ctx context.Context, _ int) error { return nil })
		if len(lat) != 10 {
			t.Errorf("maxOps 10: %d operations", len(lat))
		}
	})
}

func TestLoadValidate(t *testing.T) {
	ok := DefaultLoad()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Load){
		"mode":        func(l *Load) { l.Mode = "half" },
		"rate":        func(l *Load) { l.Rate = 0 },
		"duration":    func(l *Load) { l.Duration = 0 },
		"warmup":      func(l *Load) { l.Warmup = -1 },
		"concurrency": func(l *Load) { l.Concurrency = 0 },
		"ops":         func(l *Load) { l.MaxOps = -1 },
		"timeout":     func(l *Load) { l.OpTimeout = 0 },
	} {
		l := DefaultLoad()
		mutate(&l)
		if l.Validate() == nil {
			t.Errorf("%s: invalid load accepted", name)
		}
	}
	closed := DefaultLoad()
	closed.Mode, closed.Rate = ModeClosed, 0
	if err := closed.Validate(); err != nil {
		t.Errorf("closed loop needs no rate: %v", err)
	}
}
