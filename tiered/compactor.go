package tiered

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// Stats is the compactor's progress since the Store was made.
type Stats struct {
	Passes       int64 // compaction passes completed (one per shard)
	MovedObjects int64 // objects moved to cold and deleted from hot
	MovedBytes   int64
	// Conflicts counts moves abandoned because the user overwrote or deleted
	// the object meanwhile; the copy made for them was removed from cold.
	Conflicts int64
	// Busy counts objects skipped because a conditional write or delete held
	// them; the next pass moves them.
	Busy   int64
	Errors int64 // moves that failed; the object stays in hot for the next pass
	// Lag is how much older than After the oldest object that the last pass
	// failed to move (or found busy) was: how far compaction is behind.
	Lag time.Duration
	// Recovered counts move markers examined by recovery: moves that failed
	// or whose process crashed, finished by a later pass.
	Recovered int64
	// Packs counts packs written (by moves and rewrites), Rewrites packs
	// rewritten without their dead entries, and Tombstones the tombstones
	// written (by this Store's deletes, moves and maintenance; the calls in
	// flight at once share one).
	Packs, Rewrites, Tombstones int64
	// Retired counts hot replica copies a pack move deleted (hot is a
	// quorum); Unretired the retirements left for recovery to finish (a
	// replica did not answer); StaleHot the answers of hot that reads,
	// Stats and listings set aside as older than the pack log's (copies a
	// retirement had not removed yet).
	Retired, Unretired, StaleHot int64
	// Graves counts the graves this Store's Deletes wrote in hot over
	// versions a move may have been taking, GravesRetired those its
	// compactor removed with what they shadowed.
	Graves, GravesRetired int64
	// MissesChecked counts reads and Stats that missed in both tiers and
	// asked both again before reporting NotFound (see NewRangeReader).
	MissesChecked int64
	// DeletesOfWritten counts Deletes of a version this Store wrote that
	// took one write (a grave on condition of the generation written, with
	// no Stat first); WrittenChanged those that found the version changed
	// and looked at hot as any Delete does.
	DeletesOfWritten, WrittenChanged int64
	// IndexLoads counts pack indexes read from cold (each pack's once when
	// the catalog first lists it, and again when the index cache had let it
	// go); IndexCacheBytes and IndexesCached are what the cache holds now.
	IndexLoads      int64
	IndexCacheBytes int64
	IndexesCached   int
	// Damaged names the objects of the pack log that do not parse or
	// verify (packs, tombstones): skipped by the catalog, which serves every
	// other, while reads of the keys they may hold fail with ErrCorrupt
	// naming them. Foreign counts objects under the log's prefix whose
	// names are not the log's, skipped.
	Damaged []string
	Foreign int64
	// CorruptReads counts packed reads (and rewrites) that met bytes not
	// matching their entry's length or checksum, and failed with ErrCorrupt.
	CorruptReads int64
	LastPass     time.Time
	LastPassTook time.Duration
	LastError    string
	// Lease is what this Store knows of the compactor lease: who holds it,
	// since when, and whether this Store does.
	Lease LeaseStats
}

type statsCounters struct {
	passes, moved, bytes, conflicts, busy, errs, recovered atomic.Int64
	packs, rewrites, tombstones, indexLoads                atomic.Int64
	retired, unretired, staleHot, missesChecked            atomic.Int64
	graves, gravesRetired, corruptReads                    atomic.Int64
	writtenDeleted, writtenMissed                          atomic.Int64
	mu                                                     sync.Mutex
	lag                                                    map[int]time.Duration // by shard
	lastPass                                               time.Time
	lastTook                                               time.Duration
	lastErr                                                string
	lastLogged                                             time.Time
	errsLogged                                             int64
}

// Stats returns the compactor's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	st := Stats{
		Passes: c.passes.Load(), MovedObjects: c.moved.Load(), MovedBytes: c.bytes.Load(),
		Conflicts: c.conflicts.Load(), Busy: c.busy.Load(), Errors: c.errs.Load(),
		Recovered: c.recovered.Load(),
		Packs:     c.packs.Load(), Rewrites: c.rewrites.Load(), Tombstones: c.tombstones.Load(),
		Retired: c.retired.Load(), Unretired: c.unretired.Load(), StaleHot: c.staleHot.Load(),
		MissesChecked: c.missesChecked.Load(),
		IndexLoads:    c.indexLoads.Load(),
		Graves:        c.graves.Load(), GravesRetired: c.gravesRetired.Load(),
		DeletesOfWritten: c.writtenDeleted.Load(), WrittenChanged: c.writtenMissed.Load(),
	}
	st.IndexCacheBytes, st.IndexesCached = s.cat.cache.size()
	st.Lease = s.leaseStats()
	st.Damaged, st.Foreign, st.CorruptReads = s.cat.damagedNames(), s.cat.foreign.Load(), c.corruptReads.Load()
	c.mu.Lock()
	for _, lag := range c.lag {
		st.Lag = max(st.Lag, lag)
	}
	st.LastPass, st.LastPassTook, st.LastError = c.lastPass, c.lastTook, c.lastErr
	c.mu.Unlock()
	return st
}

// failLogEvery spaces the warnings of a failing compactor.
const failLogEvery = time.Minute

func (s *Store) fail(err error) {
	n := s.stats.errs.Add(1)
	s.stats.mu.Lock()
	s.stats.lastErr = err.Error()
	now := time.Now()
	logNow := s.stats.lastLogged.IsZero() || now.Sub(s.stats.lastLogged) >= failLogEvery
	since := n - s.stats.errsLogged
	if logNow {
		s.stats.lastLogged, s.stats.errsLogged = now, n
	}
	s.stats.mu.Unlock()
	if logNow {
		// A compactor that cannot move leaves data in hot, where it costs
		// more, without any caller seeing an error: say so, rate-limited.
		s.opts.Logger.Warn("tiered: compaction failing; objects stay in hot", "failures", since, "total", n, "error", err)
	}
}

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
	if s.packing() {
		s.compactPacks(ctx, shard, &res, note)
	} else {
		s.compactEach(ctx, shard, note)
	}
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
// most PackMaxObjects and about PackMaxBytes, each object larger than
// PackMaxBytes on its own, then, in shard 0's pass, maintains the packs.
func (s *Store) compactPacks(ctx context.Context, shard int, res *PassResult, note func(moveOutcome, int64, error)) {
	var batch []blob.ListObject
	var batchBytes int64
	var oldest time.Time
	flush := func() {
		if len(batch) == 0 {
			return
		}
		n, size, err := s.movePack(ctx, batch)
		if err != nil && ctx.Err() == nil {
			s.fail(err)
			note(none, 0, err)
			if oldest.IsZero() || batch[0].ModTime.Before(oldest) {
				oldest = batch[0].ModTime
			}
		}
		for range n {
			note(moved, 0, nil)
		}
		res.Bytes += int(size)
		batch, batchBytes = batch[:0], 0
	}
	for obj := range s.eligible(ctx, shard, note) {
		if obj.Size > s.opts.PackMaxBytes {
			o, size, err := s.moveKey(ctx, obj.Key)
			if err != nil && ctx.Err() == nil {
				s.fail(err)
			} else if err != nil {
				err = nil
			}
			note(o, size, err)
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
	flush()
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

// compactEach moves the objects of shard older than After one by one, at
// most Concurrency at a time.
func (s *Store) compactEach(ctx context.Context, shard int, note func(moveOutcome, int64, error)) {
	var mu sync.Mutex
	var oldest time.Time
	parallel.Range(ctx, s.eligible(ctx, shard, note), s.opts.Concurrency, func(obj blob.ListObject) {
		o, size, err := s.moveKey(ctx, obj.Key)
		if err != nil && ctx.Err() == nil {
			s.fail(err)
		} else if err != nil {
			err = nil // cancelled by Close: not a failure of the move
		}
		note(o, size, err)
		if o == busy || err != nil {
			mu.Lock()
			if oldest.IsZero() || obj.ModTime.Before(oldest) {
				oldest = obj.ModTime
			}
			mu.Unlock()
		}
	})
	s.setLag(shard, oldest)
}

type moveOutcome int

const (
	none moveOutcome = iota
	moved
	conflict
	busy
)

// moveKey moves key from hot to cold. The steps, and what a crash or a
// concurrent user does between them, are described in the package doc.
func (s *Store) moveKey(ctx context.Context, key string) (moveOutcome, int64, error) {
	unlock, ok := s.locks.tryLock(key)
	if !ok {
		s.stats.busy.Add(1)
		return busy, 0, nil
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()

	// 1. Finalize, where the hot store needs it.
	if blob.CapabilitiesOf(s.hot).Finalize {
		if err := blob.Finalize(ctx, s.hot, key); errors.Is(err, blob.ErrNotFound) {
			return none, 0, nil
		} else if err != nil {
			return none, 0, fmt.Errorf("tiered: finalize %q: %w", key, err)
		}
	}
	// 2. Stat hot: the generation g1 is what we move and what the hot delete
	// is conditional on.
	a, err := s.hot.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return none, 0, nil
	} else if err != nil {
		return none, 0, err
	}
	if time.Now().Sub(a.ModTime) < s.opts.After || isGrave(a) {
		return none, 0, nil // overwritten or deleted since it was listed
	}
	g1 := a.Generation
	if g1 == "" {
		return none, 0, fmt.Errorf("tiered: hot store gives no generation for %q: cannot move it safely", key)
	}
	// 3. The marker, then hot again: a user who deletes g1 from now on finds
	// the marker; one who deleted it before is seen here.
	mgen, err := s.writeMarker(ctx, key, g1)
	if errors.Is(err, blob.ErrExists) {
		s.stats.busy.Add(1)
		return busy, 0, nil
	} else if err != nil {
		return none, 0, err
	}
	// Until the copy may have landed, the marker can simply go.
	abandon := func(o moveOutcome, err error) (moveOutcome, int64, error) {
		rerr := s.removeMarker(ctx, key, mgen)
		if errors.Is(rerr, blob.ErrPrecondition) {
			// A user deleted g1 and marked the marker; no copy of ours is in
			// cold, so there is nothing left for the mark to do.
			rerr = s.dropMarker(ctx, key)
		}
		if rerr != nil && err == nil {
			err = rerr
		}
		if o == conflict {
			s.stats.conflicts.Add(1)
		}
		return o, 0, err
	}
	if a2, err := s.hot.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) || (err == nil && a2.Generation != g1) {
		return abandon(conflict, nil)
	} else if err != nil {
		return abandon(none, err)
	}
	// 4. Copy to cold, recording g1.
	if err := s.copyToCold(ctx, key, a); errors.Is(err, errGenerationChanged) {
		return abandon(conflict, nil)
	} else if err != nil {
		// The commit may have happened though it failed: the marker stays,
		// and recovery decides about the copy.
		return none, 0, err
	}
	// 5. Verify the cold copy and learn its generation c1.
	ca, err := s.cold.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		// Only a delete removes a cold copy, and a delete removes hot too.
		return abandon(conflict, nil)
	} else if err != nil {
		return none, 0, fmt.Errorf("tiered: verify %q: %w", key, err)
	}
	c1 := ca.Generation
	if ca.Size != a.Size || ca.Metadata[generationKey] != g1 || (len(a.MD5) > 0 && len(ca.MD5) > 0 && !bytes.Equal(a.MD5, ca.MD5)) {
		// Not ours, or not intact: hot still has the object, so removing the
		// copy loses nothing.
		if err := s.removeCopy(ctx, key, c1); err != nil {
			return none, 0, err
		}
		return abandon(none, fmt.Errorf("tiered: verify %q: cold copy differs (size %d vs %d)", key, ca.Size, a.Size))
	}
	// Reads prefer what packs serve to cold's own object: older versions of
	// key in packs die before hot's goes (writeTombstone waits
	// hotDeleteDelay).
	if _, err := s.killPacked(ctx, key); err != nil {
		return none, 0, err
	}
	if err := s.fence(ctx); err != nil {
		return none, 0, err
	}
	// 6. Delete hot, only if it is still generation g1.
	err = s.hot.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: g1})
	switch {
	case err == nil:
		// 7. Remove the marker. If a user deleted g1 meanwhile (after step 6
		// their hot delete found nothing, but their cold delete may have run
		// before the copy landed), they marked it: the copy goes.
		if rerr := s.removeMarker(ctx, key, mgen); errors.Is(rerr, blob.ErrPrecondition) {
			if err := s.removeCopy(ctx, key, c1); err != nil {
				return none, 0, err
			}
			s.stats.conflicts.Add(1)
			return conflict, 0, s.dropMarker(ctx, key)
		} else if rerr != nil {
			return none, 0, rerr // recovery will find hot gone and keep the copy
		}
		s.stats.moved.Add(1)
		s.stats.bytes.Add(a.Size)
		return moved, a.Size, nil
	case errors.Is(err, blob.ErrPrecondition), errors.Is(err, blob.ErrNotFound):
		// Overwritten (hot's newer version shadows the copy) or deleted by a
		// user who could not see the copy: either way it goes.
		if err := s.removeCopy(ctx, key, c1); err != nil {
			return none, 0, err
		}
		s.stats.conflicts.Add(1)
		return conflict, 0, s.dropMarker(ctx, key)
	default:
		// Ambiguous (the delete may have happened): the marker stays and
		// recovery, seeing whether hot still has g1, decides.
		return none, 0, err
	}
}

var errGenerationChanged = errors.New("tiered: hot object changed during the copy")

func (s *Store) copyToCold(ctx context.Context, key string, a *blob.Attributes) error {
	r, err := s.hot.NewRangeReader(ctx, key, 0, -1)
	if errors.Is(err, blob.ErrNotFound) {
		return errGenerationChanged
	} else if err != nil {
		return err
	}
	defer r.Close()
	if g := r.Attributes().Generation; g != "" && g != a.Generation {
		return errGenerationChanged
	}
	wo := blob.WriterOptionsFrom(a)
	wo.Metadata = maps.Clone(a.Metadata)
	if wo.Metadata == nil {
		wo.Metadata = map[string]string{}
	}
	wo.Metadata[generationKey] = a.Generation
	if err := s.fence(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.cold.NewWriter(wctx, key, &wo)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		w.Close()
		if errors.Is(err, blob.ErrNotFound) {
			return errGenerationChanged
		}
		return err
	}
	err = w.Close()
	if errors.Is(err, blob.ErrPrecondition) {
		// The copy carries hot's MD5 from the Stat; bytes that do not match it
		// are a newer generation read after the Stat.
		return errGenerationChanged
	}
	return err
}

// removeCopy deletes the cold copy of generation c1 that a move made,
// conditional on c1 so that a newer copy is never touched. On failure the
// move's marker stays, so recovery removes the copy later.
func (s *Store) removeCopy(ctx context.Context, key, c1 string) error {
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.cold.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: c1})
	if err == nil || errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) {
		return nil
	}
	return err
}

// dropMarker removes key's marker whatever its state, once the move has
// dealt with its copy.
func (s *Store) dropMarker(ctx context.Context, key string) error {
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.hot.Delete(ctx, markerKey(key), nil)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	return err
}

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
