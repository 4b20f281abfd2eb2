package quorum

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// repairQueue holds keys whose replicas may disagree, each with the time its
// next repair attempt is due.
type repairQueue struct {
	mu      sync.Mutex
	due     map[string]time.Time
	backoff map[string]time.Duration
	wake    chan struct{}
	ae      chan struct{}
}

func (q *repairQueue) init() {
	q.due = map[string]time.Time{}
	q.backoff = map[string]time.Duration{}
	q.wake = make(chan struct{}, 1)
	q.ae = make(chan struct{}, 1)
}

func (q *repairQueue) add(key string) { q.addAt(key, time.Now()) }

func (q *repairQueue) addAt(key string, t time.Time) {
	q.mu.Lock()
	if old, ok := q.due[key]; !ok || t.Before(old) {
		q.due[key] = t
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *repairQueue) remove(key string) {
	q.mu.Lock()
	delete(q.due, key)
	delete(q.backoff, key)
	q.mu.Unlock()
}

func (q *repairQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.due)
}

// retry schedules key again with a doubling backoff.
func (q *repairQueue) retry(key string, first time.Duration) {
	q.mu.Lock()
	b := q.backoff[key]
	b = min(max(2*b, first), 5*time.Second)
	q.backoff[key] = b
	q.due[key] = time.Now().Add(b)
	q.mu.Unlock()
}

// soon makes every queued key due now (a replica came back).
func (q *repairQueue) soon() {
	q.mu.Lock()
	now := time.Now()
	for k := range q.due {
		q.due[k] = now
		delete(q.backoff, k)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *repairQueue) kickAntiEntropy() {
	q.soon()
	select {
	case q.ae <- struct{}{}:
	default:
	}
}

// takeDue removes and returns the keys due now, and when the next one is due.
func (q *repairQueue) takeDue() ([]string, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var keys []string
	next := time.Hour
	for k, t := range q.due {
		if !t.After(now) {
			keys = append(keys, k)
			delete(q.due, k)
		} else {
			next = min(next, t.Sub(now))
		}
	}
	return keys, next
}

// drain tries every queued key once, due or not (Close).
func (q *repairQueue) drain(ctx context.Context, fn func(context.Context, string) bool) {
	q.mu.Lock()
	keys := make([]string, 0, len(q.due))
	for k := range q.due {
		keys = append(keys, k)
	}
	q.mu.Unlock()
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		if fn(ctx, k) {
			q.remove(k)
		}
	}
}

func (s *Store) repairer() {
	defer s.workers.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		keys, next := s.rq.takeDue()
		for _, k := range keys {
			if s.bg.Err() != nil {
				return
			}
			ctx, cancel := context.WithTimeout(s.bg, min(s.opts.StragglerTimeout, 10*time.Second))
			ok := s.repairKey(ctx, k)
			cancel()
			if ok {
				s.rq.remove(k)
			} else {
				s.rq.retry(k, s.opts.RepairRetry)
			}
		}
		if len(keys) > 0 {
			continue
		}
		t.Reset(next)
		select {
		case <-s.bg.Done():
			return
		case <-s.rq.wake:
		case <-t.C:
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
	}
}

// repairKey makes the replicas of key agree and reports whether they now do.
// The target is what this process last acknowledged (a delete included), or
// else the newest version any replica holds that is not a failed write. A
// replica is changed only on condition of the replica generation just read,
// so repair never overwrites a copy written meanwhile, and never replaces a
// version with an older one. With nothing but failed copies left, they are
// deleted, once every replica has answered.
func (s *Store) repairKey(ctx context.Context, key string) bool {
	done, _ := s.repair(ctx, key)
	return done
}

// repair is repairKey that also reports whether it had to promote a failed
// write: when the failed version overwrote every copy of the one before it
// (its commits had landed on W replicas though they reported errors), keeping
// it is better than leaving nothing, and the write did take effect.
func (s *Store) repair(ctx context.Context, key string) (done, promoted bool) {
	// A repair counts as an operation in flight, so that a write or delete
	// overlapping it leaves the key contended and is checked again after.
	var st *keyState
	busy, s0 := false, 0
	s.update(key, func(cur *keyState) {
		if busy = cur.flying > 0; busy {
			return
		}
		c := *cur
		c.failed = maps.Clone(cur.failed)
		c.writing = maps.Clone(cur.writing)
		c.refuse = maps.Clone(cur.refuse)
		c.undo = nil
		st = &c
		cur.starting()
		s0 = cur.starts
	})
	if busy {
		return false, false
	}
	defer s.update(key, func(cur *keyState) { cur.flying-- })
	if st.latest == "" && len(st.failed) == 0 && !st.contended {
		st = nil // nothing known beyond the replicas
	}
	ans := s.statAll(ctx, key, s.reps)
	all := true
	// The target is never a version reads here reject: besides failed
	// writes, that is one older than the write acknowledged last, left on a
	// replica that missed it. When the replicas holding the latest do not
	// answer, copying such a version (say, to undo a failed write that
	// overwrote the latest on another replica) would put back what this store
	// already replaced, on a replica have may still count as holding latest.
	var newest, stale *statAnswer
	for i := range ans {
		a := &ans[i]
		switch {
		case a.err == nil:
			t := tokenOf(a.attrs)
			if st.failedTok(t) {
				continue
			}
			if !st.acceptFound(t) {
				if stale == nil || t > tokenOf(stale.attrs) {
					stale = a
				}
				continue
			}
			if newest == nil || t > tokenOf(newest.attrs) {
				newest = a
			}
		case errors.Is(a.err, blob.ErrNotFound):
		default:
			all = false
		}
	}
	// An operation that started since the snapshot may have left copies
	// the snapshot cannot judge (an IfNotExist racer's, say): copying one
	// over another's could undo an acknowledged write. The next pass decides.
	overlapped := false
	s.update(key, func(cur *keyState) { overlapped = cur.starts != s0 })
	if overlapped {
		return false, false
	}
	if st != nil && st.latest == "" && newest != nil {
		// No version is tracked (the replicas agreed when the entry was
		// dropped), so the version the failed writes replaced is the one
		// left here: it becomes the floor, acknowledged as far as this Store
		// knows. Reads then reject older copies, and should the failed
		// writes overwrite it everywhere, NotFound is not served nor the key
		// emptied.
		t := tokenOf(newest.attrs)
		s.update(key, func(cur *keyState) {
			if cur.latest == "" {
				cur.latest, cur.deleted, cur.have = t, false, 0
				cur.concurrent, cur.concDelete, cur.acks = maps.Clone(cur.writing), cur.deleting > 0, nil
			}
		})
		st.latest, st.deleted = t, false
	}
	deleteTo := "" // remove versions up to this token
	switch {
	case st != nil && st.deleted && (newest == nil || tokenOf(newest.attrs) <= st.latest):
		deleteTo, newest = st.latest, nil
	case newest == nil && !all:
		return false, false
	case newest == nil:
		// Only failed copies. On fewer than W replicas they were never a
		// quorum: remove them. On W or more, promote the newest. Older
		// versions alongside are removed only where NotFound is a version
		// reads here may serve (a delete overlapped latest); otherwise the
		// key waits rather than go back to one.
		count := map[string]int{}
		var top *statAnswer
		for i := range ans {
			if a := &ans[i]; a.err == nil {
				t := tokenOf(a.attrs)
				if count[t]++; count[t] >= s.w && (top == nil || t > tokenOf(top.attrs)) {
					top = a
				}
			}
		}
		if top == nil || !st.failedTok(tokenOf(top.attrs)) {
			top = nil
			held := true // every replica holds a copy
			for _, a := range ans {
				held = held && a.err == nil
			}
			if !st.acceptNotFound() && stale != nil {
				return false, false
			}
			if !st.acceptNotFound() || st != nil && st.latest == "" && held {
				// The floor is on no replica, or no version is tracked and
				// failed writes cover every replica: they overwrote what was
				// there (acknowledged, as far as this Store knows) everywhere.
				// Removing them would leave NotFound where a version may have
				// been acknowledged, so the newest that may have taken effect
				// (not an IfNotExist loser's) is kept instead.
				for i := range ans {
					if a := &ans[i]; a.err == nil && st.failedTok(tokenOf(a.attrs)) && !st.refuse[tokenOf(a.attrs)] && (top == nil || tokenOf(a.attrs) > tokenOf(top.attrs)) {
						top = a
					}
				}
			}
			if top == nil {
				deleteTo = "\xff"
				break
			}
		}
		newest, promoted = top, true
		t := tokenOf(top.attrs)
		st.failed = maps.Clone(st.failed)
		delete(st.failed, t)
		s.update(key, func(cur *keyState) {
			delete(cur.failed, t)
			if _, ok := cur.undo[t]; ok {
				cur.undo[t] = true
			}
		})
		s.stats.promoted.Add(1)
	}
	done = all
	var data []byte
	for _, a := range ans {
		if a.err != nil && !errors.Is(a.err, blob.ErrNotFound) {
			continue
		}
		if newest == nil {
			if a.err == nil && (tokenOf(a.attrs) <= deleteTo || st.failedTok(tokenOf(a.attrs))) {
				err := a.r.s.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: a.attrs.Generation})
				if err != nil && !errors.Is(err, blob.ErrNotFound) {
					if !refusal(err) {
						s.changed(key, deleteTo, true, a.r.idx, false)
					}
					done = false
					continue
				}
				s.stats.repairs.Add(1)
				s.changed(key, deleteTo, true, a.r.idx, true)
			} else if a.err == nil {
				done = false // a newer version appeared; the next pass decides
			} else {
				s.changed(key, deleteTo, true, a.r.idx, true)
			}
			continue
		}
		if a.err == nil && tokenOf(a.attrs) == tokenOf(newest.attrs) {
			s.landed(key, tokenOf(newest.attrs), a.r.idx)
			continue
		}
		if data == nil {
			b, err := blob.ReadAll(ctx, newest.r.s, key)
			if err != nil || int64(len(b)) != newest.attrs.Size {
				return false, promoted
			}
			data = b
		}
		o := blob.WriterOptionsFrom(newest.attrs)
		if a.err == nil {
			o.If = blob.IfGenerationMatch(a.attrs.Generation)
		} else {
			o.If = blob.IfNotExist()
		}
		if err := blob.Put(ctx, a.r.s, key, data, &o); err != nil {
			if errors.Is(err, blob.ErrUnsupported) && o.If.GenerationMatch() != "" {
				// A replica without generation preconditions: the version was
				// checked just above, which is the best it allows.
				o.If = blob.Condition{}
				err = blob.Put(ctx, a.r.s, key, data, &o)
			}
			if err != nil {
				if !refusal(err) {
					s.changed(key, tokenOf(newest.attrs), false, a.r.idx, false)
				}
				done = false
				continue
			}
		}
		s.stats.repairs.Add(1)
		s.landed(key, tokenOf(newest.attrs), a.r.idx)
	}
	if done {
		s.update(key, func(cur *keyState) {
			if st == nil || cur.starts != s0 {
				return // something overlapped: the next pass decides
			}
			for t := range st.failed {
				delete(cur.failed, t)
				delete(cur.refuse, t)
			}
			if cur.latest == st.latest {
				cur.have = s.all()
			}
			cur.contended = false
		})
	}
	return done, promoted
}

// antiEntropy periodically lists every replica and queues the keys they
// disagree on (present on some and not others, or differing in size or MD5).
func (s *Store) antiEntropy() {
	defer s.workers.Done()
	period := s.opts.AntiEntropyInterval
	var tc <-chan time.Time
	if period > 0 {
		t := time.NewTicker(period)
		defer t.Stop()
		tc = t.C
	}
	for {
		select {
		case <-s.bg.Done():
			return
		case <-tc:
		case <-s.rq.ae:
		}
		s.antiEntropyPass(s.bg)
	}
}

// AntiEntropy runs one anti-entropy pass now and queues what it finds for
// the repairer. It returns the number of keys queued.
func (s *Store) AntiEntropy(ctx context.Context) (int, error) {
	return s.antiEntropyPass(ctx)
}

func (s *Store) antiEntropyPass(ctx context.Context) (int, error) {
	type seen struct {
		n      int
		size   int64
		md5    string
		differ bool
		young  bool
	}
	keys := map[string]*seen{}
	listed := 0
	var firstErr error
	for _, r := range s.reps {
		if r.h.isDown() {
			continue
		}
		ok := true
		for obj, err := range blob.All(ctx, r.s, nil) {
			if err != nil {
				ok, firstErr = false, err
				break
			}
			k := keys[obj.Key]
			if k == nil {
				k = &seen{size: obj.Size, md5: string(obj.MD5)}
				keys[obj.Key] = k
			}
			k.n++
			if k.size != obj.Size || k.md5 != string(obj.MD5) {
				k.differ = true
			}
			if time.Since(obj.ModTime) < s.opts.RepairGrace {
				k.young = true
			}
		}
		if ok {
			listed++
		}
	}
	queued := 0
	for key, k := range keys {
		if (k.n < listed || k.differ) && !k.young {
			s.rq.add(key)
			queued++
		}
	}
	// A key this store still tracks with nothing in flight is looked at
	// again even when the listings agree: its last repair may have ended
	// while an overlapping write kept it contended, and only a repair that
	// reads every replica clears that.
	s.mu.Lock()
	var tracked []string
	for key, st := range s.keys {
		if st.flying == 0 {
			tracked = append(tracked, key)
		}
	}
	s.mu.Unlock()
	for _, key := range tracked {
		s.rq.add(key)
		queued++
	}
	s.stats.antiEntropy.Add(1)
	return queued, firstErr
}
