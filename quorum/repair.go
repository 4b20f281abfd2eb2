package quorum

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// repairQueue holds keys whose replicas may disagree, each with the time its
// next repair attempt is due.
type repairQueue struct {
	mu      sync.Mutex
	due     map[string]time.Time
	active  int // keys takeDue returned whose repair has not ended
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

// owed counts the keys due now and those being repaired: work this process
// owes at once, where len also counts collections scheduled for later.
func (q *repairQueue) owed() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	n := q.active
	for _, t := range q.due {
		if !t.After(now) {
			n++
		}
	}
	return n
}

// retry schedules key, taken by takeDue, again with a doubling backoff;
// sooner if it was queued again meanwhile.
func (q *repairQueue) retry(key string, first time.Duration) {
	q.mu.Lock()
	q.active--
	b := q.backoff[key]
	b = min(max(2*b, first), 5*time.Second)
	q.backoff[key] = b
	if t, ok := q.due[key]; !ok || t.After(time.Now().Add(b)) {
		q.due[key] = time.Now().Add(b)
	}
	q.mu.Unlock()
}

// repaired ends the backoff of key, taken by takeDue and repaired. It
// leaves the key queued if it was queued again meanwhile: a write that
// landed during the repair, which the repair's survey may have missed.
func (q *repairQueue) repaired(key string) {
	q.mu.Lock()
	q.active--
	delete(q.backoff, key)
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
	q.active += len(keys)
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
			ctx, cancel := s.boundedFrom(s.bg, min(s.opts.StragglerTimeout, 10*time.Second), 0)
			ok := s.traceRepair(ctx, k)
			cancel()
			if ok {
				s.rq.repaired(k)
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

// repairKey makes the replicas of key agree on its chosen version and
// reports whether they now do. It runs in named phases: survey every
// replica; decide the version to repair toward, which must be chosen (held
// by a majority at one ballot; a version on fewer is first settled by the
// consensus a majority read runs, never copied as it is); propagate it onto
// the replicas that accepted less, each on condition of its generation and
// only where no higher ballot was promised; and, once every replica holds
// the same tombstone (or nothing) for longer than TombstoneGrace, collect it.
func (s *Store) repairKey(ctx context.Context, key string) bool {
	xs, complete := s.surveyAll(ctx, key)
	cur, ok := s.decideTarget(xs)
	if !ok {
		if _, _, err := s.settle(ctx, "repair", key); err == nil {
			s.rq.add(key) // settled: the next pass propagates it
		}
		return false
	}
	if !s.propagate(ctx, key, xs, cur) || !complete {
		return false
	}
	s.clearFloor(key, cur.acc)
	if cur.gone() {
		return s.collect(ctx, key, xs)
	}
	return true
}

// surveyAll stats key on every replica; complete reports that all answered.
func (s *Store) surveyAll(ctx context.Context, key string) (xs []rstate, complete bool) {
	ch := make(chan rstate, len(s.reps))
	for _, r := range s.reps {
		go func() { ch <- s.statReplica(ctx, r, key) }()
	}
	complete = true
	for range s.reps {
		x := <-ch
		complete = complete && x.ok()
		xs = append(xs, x)
	}
	return xs, complete
}

// decideTarget returns the version repair moves the replicas toward: the
// one accepted at the highest ballot, if a majority holds it.
func (s *Store) decideTarget(xs []rstate) (*rstate, bool) {
	cur := highest(xs)
	if cur == nil {
		return nil, false
	}
	return cur, cur.acc == "" || countAcc(xs, cur.acc) >= s.maj
}

// propagate copies the chosen version cur onto the replicas in xs that
// accepted an older one, each write on condition of the generation just
// read and skipped where a higher ballot was promised (its proposer carries
// the key forward). It reports whether every answering replica holds cur.
func (s *Store) propagate(ctx context.Context, key string, xs []rstate, cur *rstate) bool {
	if cur.acc == "" {
		return true // nothing was ever accepted: nothing to copy
	}
	var v *value
	done := true
	for i := range xs {
		x := &xs[i]
		prom := cur.acc
		switch {
		case x.damaged || x.ok() && s.isCorrupt(key, x.r):
			// Damaged: rewritten in place, on condition of its
			// generation. A promise it may have made is kept where it
			// parses; where it does not, every round that relied on it
			// finds the replica changed and tries again.
			if !x.damaged {
				prom = max(x.prom, cur.acc)
			}
		case !x.ok():
			done = false
			continue
		case x.acc == cur.acc:
			continue
		case x.acc > cur.acc || x.prom > cur.acc:
			done = false
			continue
		}
		if v == nil {
			var err error
			if v, err = s.readVerified(ctx, key, xs, cur); err != nil {
				return false
			}
		}
		if err := s.writeReplica(ctx, key, x, v, cur.acc, prom); err != nil {
			done = false
			continue
		}
		s.stats.repairs.Add(1)
		if x.damaged || s.isCorrupt(key, x.r) {
			s.clearCorrupt(key, x.r)
			s.stats.rewritten.Add(1)
		}
	}
	return done
}

// readVerified reads cur's value from a replica that holds it and whose
// bytes verify, trying each holder in turn.
func (s *Store) readVerified(ctx context.Context, key string, xs []rstate, cur *rstate) (*value, error) {
	err := error(errChanged)
	for i := range xs {
		x := &xs[i]
		if !x.ok() || x.acc != cur.acc || x.kind != cur.kind || s.isCorrupt(key, x.r) {
			continue
		}
		var v *value
		if v, err = s.readValue(ctx, key, x); err == nil {
			return v, nil
		}
	}
	return nil, err
}

// collect removes the tombstones and placeholders of key once every replica
// holds nothing else and the newest ballot any of them saw is older than
// TombstoneGrace. Each is deleted on condition of its generation, so a write
// that arrived meanwhile stays. It reports whether the key is gone everywhere.
func (s *Store) collect(ctx context.Context, key string, xs []rstate) bool {
	top := ""
	for _, x := range xs {
		if !x.ok() || x.kind == live {
			return false
		}
		top = max(top, x.top())
	}
	if age := time.Since(time.Unix(0, tokenTime(top))); top != "" && age < s.opts.TombstoneGrace {
		s.rq.addAt(key, time.Now().Add(s.opts.TombstoneGrace-age))
		return true
	}
	gone := true
	for _, x := range xs {
		if x.kind == absent {
			continue
		}
		err := x.r.s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(x.attrs.Generation)})
		switch {
		case err == nil:
			s.stats.collected.Add(1)
		case errors.Is(err, blob.ErrNotFound):
		default:
			gone = false
		}
	}
	return gone
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
		s.traceAntiEntropy(s.bg)
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
		hidden bool // looks like a tombstone or placeholder old enough to collect
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
			if maybeHidden(obj) && time.Since(obj.ModTime) >= s.opts.TombstoneGrace {
				k.hidden = true
			}
		}
		if ok {
			listed++
		}
	}
	queued := 0
	for key, k := range keys {
		if (k.n < listed || k.differ || k.hidden) && !k.young {
			s.rq.add(key)
			queued++
		}
	}
	// Keys this process wrote that some replica may still lack are looked
	// at again even when the listings agree.
	s.mu.Lock()
	tracked := make([]string, 0, len(s.floors))
	for key := range s.floors {
		tracked = append(tracked, key)
	}
	s.mu.Unlock()
	for _, key := range tracked {
		s.rq.add(key)
		queued++
	}
	s.stats.antiEntropy.Add(1)
	return queued, firstErr
}
