// Package pool is a loading queue: a FIFO of ready items that background
// loaders keep filled, at about the rate callers drain it.
//
// It exists for one job: creating an object on a GCS Rapid bucket costs a
// metadata round trip (~40-80 ms), while writing to an object that is already
// open and flushed costs one data round trip (~1-3 ms). A pool of such objects,
// created ahead of need, takes the metadata operation off the critical path.
//
// Behaviour:
//
//   - Get returns the oldest ready item. An item is ready only when Load has
//     returned it (for gcsrapid: after the Flush that makes the object exist).
//   - No item older than MaxItemAge is ever handed out, its age counted from
//     when its Load was called (so a slow Load ages the item it makes): stale
//     items are given to Discard, as is every item that is never handed out
//     (shutdown, overflow, a Get that gave up after Close), so nothing leaks.
//     A caller whose own load returns an item already too old gets ErrStale.
//   - Loaders refill at about the drain rate: the pool measures how fast Get
//     is called and how long Load takes, and keeps MinIdle spares plus enough
//     for four load latencies of demand (Little's law), capped so that spares
//     do not age out at a steady rate, and at Capacity. It does not keep
//     loaders spinning, and does not create items only to throw them away.
//   - A miss (no ready item) starts an inline load and is served by whichever
//     finishes first, that load or one already in flight, so a cold pool is
//     never slower than no pool. LoadConcurrency bounds background loads; each
//     waiting caller adds at most its own inline load.
//   - Close starts no more loads and discards everything the pool holds.
//     Loads in flight are not cancelled: each runs to its end and what it
//     made is discarded. A load cancelled midway could not know whether its
//     item exists (a create the store has received may still land after the
//     load gave up, and after its undo), so it could leave one behind.
//     Close waits for those loads and for every discard; if its context ends
//     first, it cancels the loads still running and returns the context's
//     error, and an item one of them was making may be left for the store's
//     own cleanup.
//
// The pool is generic and knows nothing of storage: Load and Discard do the I/O.
package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("pool: closed")

// ErrStale is returned by Get to a caller whose own load took MaxItemAge or
// longer: the item it made was too old to hand out and was discarded.
var ErrStale = errors.New("pool: load took longer than MaxItemAge")

// DiscardReason says why an item was discarded.
type DiscardReason string

// Discard reasons.
const (
	DiscardAged     DiscardReason = "aged"     // older than MaxItemAge
	DiscardShutdown DiscardReason = "shutdown" // the pool was closed
	DiscardOverflow DiscardReason = "overflow" // loaded for a caller who was served already, with the pool full
)

// Options configure a Pool. Load, MaxItemAge and Capacity are required.
type Options[T any] struct {
	// Load makes one item. Its context ends only when a Close gives up
	// waiting for the loads in flight (Close's context ended).
	Load func(ctx context.Context) (T, error)
	// Discard disposes of an item that will never be handed out (for
	// gcsrapid: close the writer and delete the empty object). It runs in
	// the background; Close waits for it.
	Discard func(ctx context.Context, item T, reason DiscardReason)
	// MaxItemAge: items older than this, counted from when their Load was
	// called, are discarded, never handed out.
	MaxItemAge time.Duration
	// Capacity bounds the items held, ready plus loading in the background.
	Capacity int
	// MinIdle spares are kept ready even when nothing drains the pool.
	// Default 1.
	MinIdle int
	// LoadConcurrency bounds background loads at once. Default 4.
	LoadConcurrency int
	// InitialLoadLatency is the guess of Load's duration until measured.
	// Default 100ms.
	InitialLoadLatency time.Duration
	// RateWindow is the span over which the drain rate is measured. Default 10s.
	RateWindow time.Duration
}

// Pool is a loading queue of T. It is safe for concurrent use.
type Pool[T any] struct {
	opts Options[T]

	ctx    context.Context // the loads'; canceled once Close stops waiting for them
	cancel context.CancelFunc
	bg     sync.WaitGroup // loads, discards and the sweeper
	done   chan struct{}

	mu       sync.Mutex
	closed   bool
	ready    []entry[T] // oldest first
	waiters  []*waiter[T]
	loading  int // background loads in flight
	inline   int // inline loads in flight
	backoff  time.Duration
	retryAt  time.Time
	rate     rateMeter
	loadLat  time.Duration // EWMA of successful load durations
	stats    Stats
	ageHist  Histogram
	waitHist Histogram
}

type entry[T any] struct {
	item T
	born time.Time // when the Load that made item was called
}

type waiter[T any] struct {
	ch chan result[T] // buffered 1; written once under Pool.mu
}

type result[T any] struct {
	item T
	born time.Time
	err  error
}

// New validates opts and starts the pool's loaders.
func New[T any](opts Options[T]) (*Pool[T], error) {
	switch {
	case opts.Load == nil:
		return nil, fmt.Errorf("pool: Load is required")
	case opts.MaxItemAge <= 0:
		return nil, fmt.Errorf("pool: MaxItemAge must be positive, got %v", opts.MaxItemAge)
	case opts.Capacity <= 0:
		return nil, fmt.Errorf("pool: Capacity must be positive, got %d", opts.Capacity)
	case opts.MinIdle < 0 || opts.LoadConcurrency < 0:
		return nil, fmt.Errorf("pool: MinIdle and LoadConcurrency must not be negative")
	}
	if opts.MinIdle == 0 {
		opts.MinIdle = 1
	}
	if opts.MinIdle > opts.Capacity {
		return nil, fmt.Errorf("pool: MinIdle %d exceeds Capacity %d", opts.MinIdle, opts.Capacity)
	}
	if opts.LoadConcurrency == 0 {
		opts.LoadConcurrency = 4
	}
	if opts.InitialLoadLatency <= 0 {
		opts.InitialLoadLatency = 100 * time.Millisecond
	}
	if opts.RateWindow <= 0 {
		opts.RateWindow = 10 * time.Second
	}
	if opts.Discard == nil {
		opts.Discard = func(context.Context, T, DiscardReason) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[T]{
		opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		loadLat: opts.InitialLoadLatency,
		rate:    newRateMeter(opts.RateWindow, time.Now()),
		stats:   Stats{Discards: map[DiscardReason]int64{}},
	}
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
	p.bg.Add(1)
	go p.sweep()
	return p, nil
}

// Get returns the oldest fresh item, or waits for one (see the package doc).
// The caller owns the item: the pool never touches it again.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	start := time.Now()
	var zero T
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return zero, ErrClosed
	}
	p.rate.add(start)
	p.expireLocked(start)
	if len(p.ready) > 0 {
		e := p.ready[0]
		p.ready[0] = entry[T]{}
		p.ready = p.ready[1:]
		p.stats.Hits++
		p.ageHist.Add(start.Sub(e.born))
		p.waitHist.Add(0)
		p.fillLocked()
		p.mu.Unlock()
		return e.item, nil
	}
	p.stats.Misses++
	w := &waiter[T]{ch: make(chan result[T], 1)}
	p.waiters = append(p.waiters, w)
	p.inline++
	p.bg.Add(1)
	go p.load(w)
	p.fillLocked()
	p.mu.Unlock()

	select {
	case r := <-w.ch:
		p.mu.Lock()
		if r.err == nil {
			p.ageHist.Add(time.Now().Sub(r.born))
		}
		p.waitHist.Add(time.Now().Sub(start))
		p.mu.Unlock()
		return r.item, r.err
	case <-ctx.Done():
		p.giveUp(w)
		return zero, ctx.Err()
	}
}

// giveUp withdraws a waiter whose caller stopped waiting. An item that reached
// it meanwhile is kept for the next caller, or discarded if the pool has
// closed or the item has aged.
func (p *Pool[T]) giveUp(w *waiter[T]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case r := <-w.ch:
		if r.err == nil {
			p.keepLocked(r.item, r.born, time.Now())
		}
	default:
		p.removeWaiterLocked(w)
	}
}

// load runs one Load. With w set it is the inline load of a missing caller.
func (p *Pool[T]) load(w *waiter[T]) {
	defer p.bg.Done()
	start := time.Now()
	item, err := p.opts.Load(p.ctx)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if w != nil {
		p.inline--
	} else {
		p.loading--
	}
	if err != nil {
		p.stats.LoadErrors++
		p.backoff = min(max(2*p.backoff, 10*time.Millisecond), time.Second)
		// Jittered, so that pools that failed together do not retry together.
		p.retryAt = now.Add(p.backoff/2 + rand.N(p.backoff/2+1))
		if w != nil && p.removeWaiterLocked(w) {
			w.ch <- result[T]{err: err}
		}
		return
	}
	p.stats.Loads++
	p.backoff = 0
	p.loadLat = ewma(p.loadLat, now.Sub(start))
	switch {
	case p.closed:
		p.discardLocked(item, DiscardShutdown)
		return
	case now.Sub(start) >= p.opts.MaxItemAge:
		// Too old before anyone could use it. The caller who started this
		// load learns so instead of waiting for loads that may all be as slow.
		p.discardLocked(item, DiscardAged)
		if w != nil && p.removeWaiterLocked(w) {
			w.ch <- result[T]{err: fmt.Errorf("%w: %v >= %v", ErrStale, now.Sub(start), p.opts.MaxItemAge)}
		}
	case len(p.waiters) > 0:
		next := p.waiters[0]
		p.waiters = p.waiters[1:]
		next.ch <- result[T]{item: item, born: start}
	case w != nil && len(p.ready)+p.loading >= p.opts.Capacity:
		p.discardLocked(item, DiscardOverflow)
	default:
		p.readyLocked(item, start)
	}
	p.fillLocked()
}

// readyLocked queues item, keeping the queue ordered by birth: loads finish
// out of order, and the head must be the oldest for expireLocked.
func (p *Pool[T]) readyLocked(item T, born time.Time) {
	i := len(p.ready)
	for i > 0 && p.ready[i-1].born.After(born) {
		i--
	}
	p.ready = append(p.ready, entry[T]{})
	copy(p.ready[i+1:], p.ready[i:])
	p.ready[i] = entry[T]{item: item, born: born}
}

// keepLocked takes back an item that a caller was served but did not take.
func (p *Pool[T]) keepLocked(item T, born, now time.Time) {
	switch {
	case p.closed:
		p.discardLocked(item, DiscardShutdown)
	case now.Sub(born) >= p.opts.MaxItemAge:
		p.discardLocked(item, DiscardAged)
	default:
		p.readyLocked(item, born)
	}
}

func (p *Pool[T]) removeWaiterLocked(w *waiter[T]) bool {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return true
		}
	}
	return false
}

// expireLocked discards ready items that are too old to hand out. The queue is
// oldest first, so only its head needs looking at.
func (p *Pool[T]) expireLocked(now time.Time) {
	for len(p.ready) > 0 && now.Sub(p.ready[0].born) >= p.opts.MaxItemAge {
		e := p.ready[0]
		p.ready[0] = entry[T]{}
		p.ready = p.ready[1:]
		p.discardLocked(e.item, DiscardAged)
	}
}

func (p *Pool[T]) discardLocked(item T, reason DiscardReason) {
	p.stats.Discards[reason]++
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		// Discards must finish even during Close, so they get their own context.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.opts.Discard(ctx, item, reason)
	}()
}

// loadHeadroom is how many load latencies of demand the pool holds.
const loadHeadroom = 4

// target is how many items (ready plus loading) the pool aims to hold.
func (p *Pool[T]) targetLocked(now time.Time) int {
	rate := p.rate.perSecond(now)
	// Little's law: rate x latency items are consumed while one load runs.
	// loadHeadroom times that absorbs bursts, and load times in the tail of
	// their distribution (a metadata operation's p99 is well above its mean).
	want := float64(p.opts.MinIdle) + math.Ceil(loadHeadroom*rate*p.loadLat.Seconds())
	// Spares beyond what the drain uses within half an item's life would
	// age out and be thrown away: cap there.
	if ageCap := float64(p.opts.MinIdle) + math.Floor(rate*p.opts.MaxItemAge.Seconds()/2); want > ageCap {
		want = ageCap
	}
	return min(int(want), p.opts.Capacity)
}

// fillLocked starts background loads until the target is met, within
// LoadConcurrency, and not while backing off after a load error.
func (p *Pool[T]) fillLocked() {
	if p.closed {
		return
	}
	now := time.Now()
	if now.Before(p.retryAt) {
		return
	}
	target := p.targetLocked(now)
	// Callers already waiting are owed an item each by their own inline loads.
	for len(p.ready)+p.loading < target && p.loading < p.opts.LoadConcurrency {
		p.loading++
		p.bg.Add(1)
		go p.load(nil)
	}
}

// sweep discards aged items and refills on a timer, so that an idle pool still
// expires its items and recovers from load errors.
func (p *Pool[T]) sweep() {
	defer p.bg.Done()
	interval := min(p.opts.MaxItemAge/4, time.Second)
	for {
		select {
		case <-p.done:
			return
		case <-time.After(interval):
		}
		p.mu.Lock()
		p.expireLocked(time.Now())
		p.fillLocked()
		p.mu.Unlock()
	}
}

// Close stops the loaders and discards every item the pool holds; loads in
// flight run to their end and their items are discarded. It waits for those
// loads and for every discard, or until ctx ends: then it cancels the loads
// still running and returns ctx's error. Waiting callers get ErrClosed at once.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for _, e := range p.ready {
		p.discardLocked(e.item, DiscardShutdown)
	}
	p.ready = nil
	for _, w := range p.waiters {
		w.ch <- result[T]{err: ErrClosed}
	}
	p.waiters = nil
	p.mu.Unlock()
	// Loads are not cancelled here: see the package doc.
	defer p.cancel()
	finished := make(chan struct{})
	go func() { p.bg.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool: close: %w", ctx.Err())
	}
}

// Stats is a snapshot of the pool's counters.
type Stats struct {
	Hits, Misses      int64
	Loads, LoadErrors int64
	Discards          map[DiscardReason]int64
	Ready, Loading    int
	Waiting           int
	DrainRate         float64       // Gets per second over RateWindow
	LoadLatency       time.Duration // smoothed duration of Load
	Target            int           // items the pool currently aims to hold
	HandOutAge        Histogram     // age of items when handed out, from the start of their Load
	GetLatency        Histogram     // time spent in Get
}

// Stats returns a snapshot of the counters.
func (p *Pool[T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	s := p.stats
	s.Discards = make(map[DiscardReason]int64, len(p.stats.Discards))
	for k, v := range p.stats.Discards {
		s.Discards[k] = v
	}
	s.Ready, s.Loading, s.Waiting = len(p.ready), p.loading+p.inline, len(p.waiters)
	s.DrainRate = p.rate.perSecond(now)
	s.LoadLatency = p.loadLat
	s.Target = p.targetLocked(now)
	s.HandOutAge = p.ageHist
	s.GetLatency = p.waitHist
	return s
}

func ewma(old, sample time.Duration) time.Duration {
	const alpha = 0.2
	return time.Duration((1-alpha)*float64(old) + alpha*float64(sample))
}

// rateMeter counts events in a ring of buckets spanning a window.
type rateMeter struct {
	width   time.Duration
	buckets [10]int64
	start   time.Time // start of the bucket at head
	head    int
	created time.Time
}

func newRateMeter(window time.Duration, now time.Time) rateMeter {
	return rateMeter{width: window / 10, start: now, created: now}
}

func (r *rateMeter) advance(now time.Time) {
	for steps := 0; now.Sub(r.start) >= r.width && steps <= len(r.buckets); steps++ {
		r.head = (r.head + 1) % len(r.buckets)
		r.buckets[r.head] = 0
		r.start = r.start.Add(r.width)
	}
	if now.Sub(r.start) >= r.width {
		// Idle for longer than the window: everything has expired.
		r.start = now
	}
}

func (r *rateMeter) add(now time.Time) {
	r.advance(now)
	r.buckets[r.head]++
}

func (r *rateMeter) perSecond(now time.Time) float64 {
	r.advance(now)
	var n int64
	for _, b := range r.buckets {
		n += b
	}
	// The head bucket is partly filled: count the window as the full
	// buckets plus the elapsed part of the head, and never as longer than
	// the meter has existed (a young pool would underestimate its rate).
	span := min(time.Duration(len(r.buckets)-1)*r.width+now.Sub(r.start), now.Sub(r.created))
	if span < r.width/10 {
		return 0
	}
	return float64(n) / span.Seconds()
}
