package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how load is generated.
type Mode string

const (
	// ModeOpen starts operations at a fixed rate whatever the backend does,
	// as independent clients would, and measures each from its intended
	// start: a stall shows in every operation scheduled behind it.
	ModeOpen Mode = "open"
	// ModeClosed runs a fixed number of workers, each starting its next
	// operation when the previous one ends: it finds the throughput a given
	// concurrency reaches, but a stall slows the load instead of showing.
	ModeClosed Mode = "closed"
)

// ParseMode parses "open" or "closed".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeOpen, ModeClosed:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown load mode %q (want open or closed)", s)
}

// Load is how each row is driven.
type Load struct {
	Mode Mode
	// Rate is the offered operations per second in open loop.
	Rate float64
	// Bandwidth caps the offered bytes per second in open loop, so that
	// large objects are offered at a rate the emulators on a small machine
	// can carry (else the table measures the machine, not the profile).
	Bandwidth float64
	// Duration is the measured time per row; Warmup runs the same load
	// before it, unmeasured (connections, sessions, the pool's measure of
	// demand).
	Duration, Warmup time.Duration
	// Concurrency is the number of workers in closed loop, and the most
	// operations in flight in open loop (a client's connection limit: an
	// operation waiting for a slot is late, and its wait is measured).
	Concurrency int
	// MaxOps caps the measured operations per row (0: no cap).
	MaxOps int
	// OpTimeout bounds each operation, so a lost request cannot hang a run.
	OpTimeout time.Duration
}

// DefaultLoad is the load of a default run: three seconds a row, sixteen
// rows, under a minute.
func DefaultLoad() Load {
	return Load{
		Mode:        ModeOpen,
		Rate:        200,
		Bandwidth:   32 << 20,
		Duration:    2 * time.Second,
		Warmup:      time.Second,
		Concurrency: 64,
		OpTimeout:   30 * time.Second,
	}
}

// Validate reports a load that cannot run.
func (l Load) Validate() error {
	switch {
	case l.Mode != ModeOpen && l.Mode != ModeClosed:
		return fmt.Errorf("unknown load mode %q", l.Mode)
	case l.Mode == ModeOpen && l.Rate <= 0:
		return fmt.Errorf("rate %g: must be positive in open loop", l.Rate)
	case l.Duration <= 0:
		return fmt.Errorf("duration %v: must be positive", l.Duration)
	case l.Warmup < 0:
		return fmt.Errorf("warmup %v: must not be negative", l.Warmup)
	case l.Concurrency <= 0:
		return fmt.Errorf("concurrency %d: must be positive", l.Concurrency)
	case l.MaxOps < 0:
		return fmt.Errorf("ops %d: must not be negative", l.MaxOps)
	case l.OpTimeout <= 0:
		return fmt.Errorf("timeout %v: must be positive", l.OpTimeout)
	}
	return nil
}

// rateFor is the open-loop rate for objects of size bytes.
func (l Load) rateFor(size int) float64 {
	if l.Bandwidth > 0 && size > 0 {
		return min(l.Rate, l.Bandwidth/float64(size))
	}
	return l.Rate
}

// run drives op for d under l at rate (open loop) and returns the latencies
// of the operations that succeeded, the failures and the first error.
func (l Load) run(ctx context.Context, rate float64, d time.Duration, op func(ctx context.Context, i int) error) (lat []time.Duration, errs int, first error, elapsed time.Duration) {
	bounded := func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, l.OpTimeout)
		defer cancel()
		return op(ctx, i)
	}
	start := time.Now()
	var o outcome
	if l.Mode == ModeClosed {
		o = closedLoop(ctx, l.Concurrency, d, l.MaxOps, bounded)
	} else {
		n := max(1, int(rate*d.Seconds()+0.5))
		if l.MaxOps > 0 {
			n = min(n, l.MaxOps)
		}
		o = openLoop(ctx, rate, n, l.Concurrency, bounded)
	}
	return o.lat, o.errs, o.first, time.Since(start)
}

type outcome struct {
	lat   []time.Duration
	errs  int
	first error
}

// OpenLoop calls op n times at a fixed rate, each call in its own goroutine,
// and returns the latencies of the calls that succeeded, each measured from
// its intended start, so that a stall delays every call scheduled behind it
// instead of hiding (coordinated omission), and the number that failed.
func OpenLoop(ctx context.Context, rate float64, n int, op func(ctx context.Context, i int) error) (lat []time.Duration, errs int) {
	return OpenLoopLimit(ctx, rate, n, 0, op)
}

// OpenLoopLimit is OpenLoop with at most limit calls in flight (0: no
// limit), as a client with a connection limit: a call waiting for a slot is
// late, and its wait is part of its latency.
func OpenLoopLimit(ctx context.Context, rate float64, n, limit int, op func(ctx context.Context, i int) error) (lat []time.Duration, errs int) {
	o := openLoop(ctx, rate, n, limit, op)
	return o.lat, o.errs
}

func openLoop(ctx context.Context, rate float64, n, limit int, op func(ctx context.Context, i int) error) outcome {
	lat := make([]time.Duration, n)
	failed := make([]error, n)
	var slots chan struct{}
	if limit > 0 {
		slots = make(chan struct{}, limit)
	}
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var wg sync.WaitGroup
	sent := 0
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		wg.Go(func() {
			if slots != nil {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-ctx.Done():
					failed[i] = ctx.Err()
					return
				}
			}
			failed[i] = op(ctx, i)
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	var o outcome
	for i := range sent {
		if failed[i] != nil {
			o.errs++
			if o.first == nil {
				o.first = failed[i]
			}
			continue
		}
		o.lat = append(o.lat, lat[i])
	}
	return o
}

// closedLoop runs workers goroutines that call op back to back for d (or
// until maxOps calls have started, if maxOps > 0), each latency measured
// from the call's actual start.
func closedLoop(ctx context.Context, workers int, d time.Duration, maxOps int, op func(ctx context.Context, i int) error) outcome {
	deadline := time.Now().Add(d)
	var started atomic.Int64 // numbers the calls, and counts them against maxOps
	var mu sync.Mutex
	var o outcome
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var lat []time.Duration
			var errs int
			var first error
			for ctx.Err() == nil && time.Now().Before(deadline) {
				n := started.Add(1)
				if maxOps > 0 && n > int64(maxOps) {
					break
				}
				t0 := time.Now()
				if err := op(ctx, int(n-1)); err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			o.lat = append(o.lat, lat...)
			o.errs += errs
			if o.first == nil {
				o.first = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return o
}

// ClosedLoop runs workers goroutines that call op back to back for d (or
// until maxOps calls have started, if maxOps > 0) and returns the latencies
// of the calls that succeeded, each from its actual start, and the number
// that failed.
func ClosedLoop(ctx context.Context, workers int, d time.Duration, maxOps int, op func(ctx context.Context, i int) error) (lat []time.Duration, errs int) {
	o := closedLoop(ctx, workers, d, maxOps, op)
	return o.lat, o.errs
}
