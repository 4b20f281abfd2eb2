package tiered

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

func (s *Store) run(ctx context.Context) {
	defer close(s.done)
	var wg sync.WaitGroup
	for _, l := range s.leases {
		wg.Go(func() { s.runShard(ctx, l) })
	}
	wg.Wait()
}

// runShard runs the passes of l's shard while this Store holds its lease.
func (s *Store) runShard(ctx context.Context, l *lease) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		// Only the lease's holder runs passes; the keeper takes the lease
		// when it is free, and gives it up once no pass runs under it
		// when another process asked for the shard.
		if pctx, done, ok := l.passContext(ctx); ok && !l.isLeaving() {
			s.tracePass(pctx)
			done()
			if l.isLeaving() {
				l.releaseIfIdle(context.WithoutCancel(ctx))
			}
		} else {
			if ok {
				done()
			}
			l.skipped.Add(1)
			if len(s.leases) > 1 {
				// Another process's shard now: its lag is for it to say.
				s.stats.mu.Lock()
				delete(s.stats.lag, l.shard)
				s.stats.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PassResult reports one compaction pass.
type PassResult struct {
	Moved, Bytes, Conflicts, Busy, Failed int
	// Err is the first failure (listing or a move), nil if none.
	Err error
}

// CompactOnce runs one compaction pass now: every hot object older than After
// is moved to cold, at most Concurrency at a time and within the rate limits.
// It runs only under the compactor lease: if another process holds it, the
// pass is not run and Err says who holds it. With several shards, it runs
// a pass of each shard whose lease this Store holds or can take, at once,
// and Err says which shards another process holds (unless a pass failed).
// It is safe to call while the background compactor runs (a key being moved
// by one is skipped by the other).
func (s *Store) CompactOnce(ctx context.Context) PassResult {
	if s.life.Closed() {
		return PassResult{Err: driver.ClosedError("compact", "")}
	}
	if shard, inPass := passShard(ctx); inPass {
		return s.compactShard(ctx, shard)
	}
	hold := func(l *lease) (func() PassResult, error) {
		pctx, done, err := s.holdLease(ctx, l)
		if err != nil {
			l.skipped.Add(1)
			return nil, err
		}
		return func() PassResult {
			defer done()
			return s.compactShard(pctx, l.shard)
		}, nil
	}
	run, err := hold(s.leases[0])
	if len(s.leases) == 1 || errors.Is(err, errLayout) {
		if err != nil {
			return PassResult{Err: err}
		}
		return run()
	}
	// Shard 0's lease is taken first, as it names the layout that the
	// others' check (see the lease); the passes run at once.
	results := make([]PassResult, len(s.leases))
	var wg sync.WaitGroup
	for i, l := range s.leases {
		run, err := run, err
		wg.Go(func() {
			if i > 0 {
				run, err = hold(l)
			}
			if err != nil {
				results[i].Err = err
				return
			}
			results[i] = run()
		})
	}
	wg.Wait()
	var res PassResult
	var skipped error
	for _, r := range results {
		res.Moved, res.Bytes, res.Conflicts, res.Busy, res.Failed = res.Moved+r.Moved, res.Bytes+r.Bytes, res.Conflicts+r.Conflicts, res.Busy+r.Busy, res.Failed+r.Failed
		switch {
		case r.Err == nil:
		case errors.Is(r.Err, errNotHolder) && r.Moved+r.Failed == 0:
			skipped = cmpErr(skipped, r.Err)
		default:
			res.Err = cmpErr(res.Err, r.Err)
		}
	}
	res.Err = cmp.Or(res.Err, skipped)
	return res
}

// compactShard runs one pass of shard, under its lease (ctx).
func (s *Store) compactShard(ctx context.Context, shard int) PassResult {
	start := time.Now()
	var res PassResult
	var mu sync.Mutex
	note := func(o moveOutcome, size int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch o {
		case moved:
			res.Moved++
			res.Bytes += int(size)
		case conflict:
			res.Conflicts++
		case busy:
			res.Busy++
		}
		if err != nil {
			res.Failed++
			if res.Err == nil {
				res.Err = err
			}
		}
	}
	s.recoverMarkers(ctx, shard)
	s.compactPacks(ctx, shard, note)
	if cause := context.Cause(ctx); res.Err == nil && errors.Is(cause, errNotHolder) {
		// Cut short by the lease's loss: the moves it skipped were not
		// failures, but the pass did not finish.
		res.Err = cause
	}
	s.stats.passes.Add(1)
	s.stats.mu.Lock()
	s.stats.lastPass, s.stats.lastTook = start, time.Now().Sub(start)
	s.stats.mu.Unlock()
	return res
}

// compactPacks moves the objects of shard older than After in packs of at
// most PackMaxObjects and about PackMaxBytes, one pack at a time (a pack's
// bytes are held in memory), and each object larger than PackMaxBytes in
// a pack of its own, streamed, Concurrency of those at a time; then, in
// shard 0's pass, it maintains the packs.
func (s *Store) compactPacks(ctx context.Context, shard int, note func(moveOutcome, int64, error)) {
	var mu sync.Mutex // guards oldest
	var oldest time.Time
	move := func(objs []blob.ListObject) {
		n, err := s.movePack(ctx, objs)
		if err != nil && ctx.Err() == nil {
			s.fail(err)
			note(none, 0, err)
		}
		// The pass's result is note's alone to change (streamed packs
		// end concurrently): the bytes go with the first object.
		size := n.size
		for range n.moved {
			note(moved, size, nil)
			size = 0
		}
		for range n.conflicts {
			note(conflict, 0, nil)
		}
		for range n.busy {
			note(busy, 0, nil)
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil && ctx.Err() == nil || n.busy > 0 {
			if oldest.IsZero() || objs[0].ModTime.Before(oldest) {
				oldest = objs[0].ModTime
			}
		}
	}
	var batch []blob.ListObject
	var batchBytes int64
	flush := func() {
		if len(batch) > 0 {
			move(batch)
		}
		batch, batchBytes = nil, 0
	}
	// Objects a pack can hold are batched and moved here, one pack at a
	// time; the larger ones are yielded, each to a streamed pack of its
	// own, Concurrency at a time.
	large := func(yield func(blob.ListObject) bool) {
		defer flush()
		for obj := range s.eligible(ctx, shard, note) {
			if obj.Size > s.opts.PackMaxBytes {
				if !yield(obj) {
					return
				}
				continue
			}
			if batchBytes+obj.Size > s.opts.PackMaxBytes {
				flush()
			}
			batch = append(batch, obj)
			batchBytes += obj.Size
			if len(batch) >= s.opts.PackMaxObjects {
				flush()
			}
		}
	}
	parallel.Range(ctx, large, s.opts.Concurrency, func(obj blob.ListObject) { move([]blob.ListObject{obj}) })
	// The pack log's maintenance (rewrites, the removal of tombstones, the
	// inventory) is shard 0's: the only pass that removes log objects,
	// and the one writer of the inventory, whatever the shards (see
	// maintainPacks).
	if ctx.Err() == nil && shard == 0 {
		if err := s.maintainPacks(ctx); err != nil && ctx.Err() == nil {
			s.fail(err)
			note(none, 0, err)
		}
	}
	s.setLag(shard, oldest)
}

// eligible yields the hot objects a pass of shard moves (of the shard,
// older than After, not markers), each once the rate limits allow it; a
// failed listing is noted and ends the pass's walk. Each shard's pass
// lists all of hot: a shard is a set of keys, not a range.
func (s *Store) eligible(ctx context.Context, shard int, note func(moveOutcome, int64, error)) iter.Seq[blob.ListObject] {
	return func(yield func(blob.ListObject) bool) {
		// Graves old enough are retired together after the walk: one
		// tombstone carries all their kills.
		var graves []graveAt
		defer func() {
			if err := s.retireGraves(ctx, graves); err != nil && ctx.Err() == nil {
				s.fail(err)
				note(none, 0, err)
			}
		}()
		for obj, err := range blob.All(ctx, s.hot, nil) {
			if err != nil {
				if ctx.Err() == nil {
					s.fail(err)
					note(none, 0, err)
				}
				return
			}
			if obj.IsDir || isMarker(obj.Key) || !s.inShard(obj.Key, shard) || time.Now().Sub(obj.ModTime) < s.opts.After {
				continue
			}
			if obj.Size == 0 {
				// A grave (one of the empty objects) is retired, not moved.
				a, err := s.hot.Stat(ctx, obj.Key)
				if err == nil && isGrave(a) {
					if time.Now().Sub(a.ModTime) >= s.graveHold() {
						graves = append(graves, graveAt{obj.Key, a})
					}
					continue
				}
			}
			if s.limiter.wait(ctx, obj.Size) != nil || !yield(obj) {
				return
			}
		}
	}
}

func (s *Store) setLag(shard int, oldest time.Time) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	if s.stats.lag == nil {
		s.stats.lag = map[int]time.Duration{}
	}
	s.stats.lag[shard] = 0
	if !oldest.IsZero() {
		s.stats.lag[shard] = max(time.Now().Sub(oldest)-s.opts.After, 0)
	}
}

type moveOutcome int

const (
	none moveOutcome = iota
	moved
	conflict
	busy
)

// pacer spaces moves so that neither objects/s nor bytes/s exceeds its limits.
type pacer struct {
	objs, bytes float64
	mu          sync.Mutex
	next        time.Time
}

func newPacer(objs, bytes float64) *pacer { return &pacer{objs: objs, bytes: bytes} }

func (p *pacer) wait(ctx context.Context, size int64) error {
	if p.objs <= 0 && p.bytes <= 0 {
		return ctx.Err()
	}
	var cost time.Duration
	if p.objs > 0 {
		cost = max(cost, time.Duration(float64(time.Second)/p.objs))
	}
	if p.bytes > 0 {
		cost = max(cost, time.Duration(float64(size)*float64(time.Second)/p.bytes))
	}
	p.mu.Lock()
	now := time.Now()
	at := now
	if p.next.After(now) {
		at = p.next
	}
	p.next = at.Add(cost)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
