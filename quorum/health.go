package quorum

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

const window = 128

// health tracks one replica's recent latencies and failures.
type health struct {
	mu       sync.Mutex
	lat      [window]time.Duration
	n, pos   int
	p50, p95 time.Duration
	stale    bool
	errRun   int
	down     bool
	ops      int64
	errs     int64
}

// answered reports whether err means the replica worked: it answered, even if
// the answer was NotFound or a failed precondition.
func answered(err error) bool {
	return err == nil || errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrExists) ||
		errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrInvalidArgument) || errors.Is(err, blob.ErrInvalidKey)
}

// observe records a call of duration d. A call we cancelled ourselves (a hedge
// that lost) still says the replica took at least d, which keeps a slow
// replica's latency honest even though it rarely finishes first.
func (s *Store) observe(r *replica, d time.Duration, err error, ourCancel bool) {
	h := &r.h
	h.mu.Lock()
	back, down := false, false
	defer func() {
		h.mu.Unlock()
		if back {
			// What it missed while down is found by listing every replica.
			s.stats.cameBack.Add(1)
			s.rq.kickAntiEntropy()
			s.opts.Logger.Info("quorum: replica answers again", "replica", r.idx)
		}
		if down {
			s.opts.Logger.Warn("quorum: replica marked down", "replica", r.idx, "failures", s.opts.FailureThreshold, "error", err)
		}
	}()
	h.lat[h.pos] = d
	h.pos = (h.pos + 1) % window
	h.n = min(h.n+1, window)
	h.stale = true
	h.ops++
	switch {
	case ourCancel || answered(err):
		h.errRun = 0
		if h.down && answered(err) {
			h.down, back = false, true
		}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The caller gave up: says nothing about the replica.
	default:
		h.errs++
		h.errRun++
		if h.errRun >= s.opts.FailureThreshold && !h.down {
			h.down, down = true, true
			s.stats.markedDown.Add(1)
		}
	}
}

func (h *health) quantiles() (p50, p95 time.Duration, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stale {
		xs := slices.Clone(h.lat[:h.n])
		slices.Sort(xs)
		if len(xs) > 0 {
			h.p50 = xs[len(xs)/2]
			h.p95 = xs[len(xs)*95/100]
		}
		h.stale = false
	}
	return h.p50, h.p95, h.n
}

func (h *health) isDown() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// order returns the replicas fastest first: healthy ones by p50 (ones with too
// few samples first, to learn them), then those in an error run, then down ones.
func (s *Store) order() []*replica {
	type ranked struct {
		r     *replica
		class int
		p50   time.Duration
	}
	rs := make([]ranked, len(s.reps))
	for i, r := range s.reps {
		p50, _, n := r.h.quantiles()
		r.h.mu.Lock()
		class := 0
		switch {
		case r.h.down:
			class = 3
		case r.h.errRun > 0:
			class = 2
		case n < 8:
			p50 = 0
		}
		r.h.mu.Unlock()
		rs[i] = ranked{r, class, p50}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if a.class != b.class {
			return a.class - b.class
		}
		return int(a.p50 - b.p50)
	})
	out := make([]*replica, len(rs))
	for i, x := range rs {
		out[i] = x.r
	}
	return out
}

// hedgeDelay is how long to wait on r before asking the next replica: the
// p95 a healthy replica shows (the lowest p95 among replicas with enough
// samples). Using r's own p95 would wait longest exactly when r turned slow.
func (s *Store) hedgeDelay(r *replica) time.Duration {
	if s.opts.HedgeDelay != 0 {
		return s.opts.HedgeDelay
	}
	best := time.Duration(-1)
	for _, x := range s.reps {
		if _, p95, n := x.h.quantiles(); n >= 8 && !x.h.isDown() && (best < 0 || p95 < best) {
			best = p95
		}
	}
	if best < 0 {
		best = 10 * time.Millisecond
	}
	return min(max(best, s.opts.MinHedgeDelay), s.opts.MaxHedgeDelay)
}

// upReplicas returns the replicas a write should go to: all that are not down,
// or all of them when fewer than need are up (health may be out of date).
func (s *Store) upReplicas(need int) []*replica {
	var up []*replica
	for _, r := range s.reps {
		if !r.h.isDown() {
			up = append(up, r)
		}
	}
	if len(up) < need {
		return s.reps
	}
	return up
}

// probeKey is a key no one writes; a Stat of it costs one metadata read.
const probeKey = "zonalblob-quorum-probe/none"

// prober probes every replica each ProbeInterval: a down replica that answers
// is up again and gets an anti-entropy pass so that repair fills what it missed.
func (s *Store) prober() {
	defer s.workers.Done()
	t := time.NewTicker(s.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, r := range s.reps {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(s.bg, max(s.opts.ProbeInterval, time.Second))
				defer cancel()
				start := time.Now()
				_, err := r.s.Stat(ctx, probeKey)
				if s.bg.Err() != nil {
					return
				}
				s.observe(r, time.Since(start), err, false)
			})
		}
		wg.Wait()
	}
}

// ReplicaStats describes one replica's health.
type ReplicaStats struct {
	Down     bool
	P50, P95 time.Duration
	Ops      int64
	Errors   int64
}

// Stats describes the store's work so far.
type Stats struct {
	Replicas      []ReplicaStats
	Writes        int64 // acknowledged writes
	FailedWrites  int64
	Hedges        int64 // reads that asked a second replica after a delay
	Repairs       int64 // copies written or removed by repair
	RepairPending int   // keys queued for repair
	// Background is the work this process owes now: stragglers and
	// cleanups of finished operations still running, and repairs due or
	// running (not the collections of tombstones scheduled for later,
	// which RepairPending counts).
	Background  int
	MarkedDown  int64
	CameBack    int64
	AntiEntropy int64 // completed anti-entropy passes
	TrackedKeys int   // keys this process wrote that some replica may still lack
	Rounds      int64 // consensus rounds run (conditional operations, settling reads)
	Contended   int64 // rounds retried after losing to a concurrent one
	ReadRepairs int64 // reads that found the newest version on fewer than a majority
	Collected   int64 // tombstones and placeholders collected
	Retired     int64 // replica objects deleted by Retire
	// Damaged counts replica objects found damaged: bytes that do not match
	// their checksum, or an acceptor state that does not parse. Each is
	// rewritten by repair from the version a majority holds.
	Damaged int64
	// Rewritten counts damaged replica objects repair rewrote.
	Rewritten int64
	// Uncertain counts operations that failed with ErrUncertain (their
	// writes may have landed), counted where the quorum gave up, even if
	// the caller's context ended and the caller saw its error instead.
	Uncertain int64
}

type atomicInt = atomic.Int64

type statsCounters struct {
	writes, failedWrites, readRepairs, hedges, repairs, markedDown, cameBack, antiEntropy atomicInt
	rounds, contended, collected, retired, damaged, rewritten, uncertain                  atomicInt
}

// Stats returns a snapshot of the store's counters and replica health.
func (s *Store) Stats() Stats {
	st := Stats{
		Writes: s.stats.writes.Load(), FailedWrites: s.stats.failedWrites.Load(), Hedges: s.stats.hedges.Load(),
		Repairs: s.stats.repairs.Load(), MarkedDown: s.stats.markedDown.Load(), CameBack: s.stats.cameBack.Load(),
		AntiEntropy: s.stats.antiEntropy.Load(), RepairPending: s.rq.len(), Background: s.tasks.Running() + s.rq.owed(),
		Rounds: s.stats.rounds.Load(), Contended: s.stats.contended.Load(), ReadRepairs: s.stats.readRepairs.Load(),
		Collected: s.stats.collected.Load(), Retired: s.stats.retired.Load(),
		Damaged: s.stats.damaged.Load(), Rewritten: s.stats.rewritten.Load(), Uncertain: s.stats.uncertain.Load(),
	}
	s.mu.Lock()
	st.TrackedKeys = len(s.floors)
	s.mu.Unlock()
	for _, r := range s.reps {
		p50, p95, _ := r.h.quantiles()
		r.h.mu.Lock()
		st.Replicas = append(st.Replicas, ReplicaStats{Down: r.h.down, P50: p50, P95: p95, Ops: r.h.ops, Errors: r.h.errs})
		r.h.mu.Unlock()
	}
	return st
}

// lateGrace is how long an operation that has the answers it needs, after
// elapsed, waits for the other replicas: a quarter as long again (healthy
// replicas answer together), at least 200µs, at most a hedge delay.
func (s *Store) lateGrace(elapsed time.Duration) time.Duration {
	return min(max(elapsed/4, 200*time.Microsecond), s.hedgeDelay(s.reps[0]))
}
