package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// This file is the consensus of conditional operations: one round of
// CASPaxos (Rystsov, "CASPaxos: Replicated State Machines without Logs",
// 2018) per operation, whose acceptors are the replicas' objects. A promise
// rewrites a replica's object with the higher ballot in PromiseKey, on
// condition of the replica generation just read; an accept writes the new
// version on condition of the generation that promise left. A replica that
// changed in between (another promise, an accept, a repair) refuses, which
// is stricter than a Paxos acceptor and so keeps its safety.

// decision computes an operation's next version from the current one.
// It returns nil and nil to keep the current version (a read), or nil and an
// error to refuse (the current version is made durable first, so the refusal
// is linearizable). The new version's token and chain are filled in by the
// round.
type decision func(cur *rstate) (*value, error)

// keep is the decision of a read: the current version stays.
func keep(*rstate) (*value, error) { return nil, nil }

// roundAttempts bounds the rounds one operation runs (its retry window
// bounds their time): enough that a handful of writers racing on one key
// on a slow machine all get through.
const roundAttempts = 64

// errOutbid: a replica had seen a higher ballot than the round's.
var errOutbid = errors.New("outbid by a higher ballot")

type outbidError struct{ top string }

func (e *outbidError) Error() string { return fmt.Sprintf("%v (ballot %s)", errOutbid, e.top) }
func (e *outbidError) Unwrap() error { return errOutbid }

type promised struct {
	x   rstate // the replica after the promise
	top string // for errOutbid, the highest ballot seen
	err error
}

// consensus runs rounds until one decides. mine lists versions an earlier
// attempt of the same operation may have left on some replicas (their
// accepts failed short of a quorum): a round that finds one of them in the
// current version's chain knows the operation took effect and only makes
// that durable, and one that does not decides afresh, after which those
// versions can never be chosen. A failure after accepts went out is
// reported with ErrUncertain.
func (s *Store) consensus(ctx context.Context, op, key string, decide decision, mine ...string) (*rstate, error) {
	cur, _, err := s.decideKey(ctx, op, key, decide, false, mine)
	return cur, err
}

// consensusWrote is consensus for a write: it returns the version the
// operation made current (its Generation), or "" when that is not known to
// be current (an earlier attempt's accepts took effect and a later version
// has since replaced them).
func (s *Store) consensusWrote(ctx context.Context, op, key string, decide decision) (string, error) {
	_, wrote, err := s.decideKey(ctx, op, key, decide, false, nil)
	return wrote, err
}

// decideKey is consensus; with restate, a round that keeps the current
// version accepts it again at its own ballot on a majority even when a
// majority already holds it (see Resolve).
func (s *Store) decideKey(ctx context.Context, op, key string, decide decision, restate bool, mine []string) (_ *rstate, wrote string, err error) {
	defer func() { s.noteUncertain(err) }()
	// Bounded, so that no promise or accept of this operation can land
	// after TombstoneGrace (see collect).
	ctx, done := s.bounded(ctx, 0)
	defer done()
	floor := ""
	for attempt := 0; ; attempt++ {
		s.stats.rounds.Add(1)
		r := s.round(ctx, op, key, floor, decide, restate, mine)
		if r.landed != "" {
			mine = append(mine, r.landed)
		}
		if !r.retry {
			return r.cur, r.wrote, r.err
		}
		var oe *outbidError
		if errors.As(r.err, &oe) {
			floor = max(floor, oe.top)
		}
		size := boundSize(ctx)
		if ctx.Err() != nil || attempt == roundAttempts-1 || s.roundsOver(mine, size) {
			if ctx.Err() != nil {
				return nil, "", doneError(ctx, op, key, len(mine) > 0, r.err)
			}
			if s.roundsOver(mine, size) {
				return nil, "", blob.Errorf(op, key, nil, "%w (%w): no round may begin %v after its first accept went out; last: %v", ErrNoQuorum, ErrUncertain, s.retryWindow(size), r.err)
			}
			if len(mine) > 0 {
				return nil, "", blob.Errorf(op, key, nil, "%w (%w): %v", ErrNoQuorum, ErrUncertain, r.err)
			}
			return nil, "", wrapOp(op, key, r.err)
		}
		s.stats.contended.Add(1)
		// Lost a race: let the winner finish before the next round (a
		// round whose accepts went out and failed was outbid too).
		pause := time.Duration(rand.Int64N(int64(500*time.Microsecond) * int64(min(attempt+1, 8))))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
	}
}

type roundResult struct {
	cur    *rstate // the version decided on
	err    error
	retry  bool   // another round may follow
	landed string // the version this round's accepts may have left behind
	wrote  string // the operation's version, when it is the one decided on
}

// round is one CASPaxos round: prepare, decide, accept.
func (s *Store) round(ctx context.Context, op, key, floor string, decide decision, restate bool, mine []string) roundResult {
	b := s.newToken(floor)
	pr, err := s.prepare(ctx, key, b)
	if err != nil {
		return roundResult{err: err, retry: true}
	}
	defer pr.stop()
	proms := pr.proms
	cur := highest(proms)
	var next *value
	var derr error
	took, unknown := tookEffect(cur, mine)
	switch {
	case unknown:
		return roundResult{err: blob.Errorf(op, key, nil, "%w (%w): too many versions since this operation's partial write", ErrNoQuorum, ErrUncertain)}
	case !took:
		next, derr = decide(cur)
	}
	var wrote string
	if took && slices.Contains(mine, cur.ver) {
		wrote = cur.ver
	}
	if next == nil {
		// A read, a refusal, or an operation that already took effect: the
		// current version must be chosen (on a majority at one ballot)
		// before that is reported. And when an earlier attempt of this
		// operation left versions at higher ballots on some replicas, the
		// current version is accepted again at this round's ballot on a
		// majority, above them, so that none of them can ever be chosen.
		if !restate && countAcc(proms, cur.acc) >= s.maj && (len(mine) == 0 || cur.acc >= slices.Max(mine)) {
			s.chosen(key, cur, proms)
			return roundResult{cur: cur, err: derr, wrote: wrote}
		}
		v, err := s.readValue(ctx, key, cur)
		if err != nil {
			return roundResult{err: fmt.Errorf("%w: reading the current version: %v", ErrNoQuorum, err), retry: true}
		}
		if cur.kind == absent || cur.kind == empty {
			// No version (never written, collected, or retired): a
			// placeholder carries no ballot, so only a version can stand
			// above the earlier attempts' (a tombstone, which reads as no
			// object). Accepting the absence itself left them the highest
			// ballot, and a later read finished an operation that had
			// been refused.
			v = &value{kind: tomb, ver: b, chain: chainAfter(b, cur)}
		}
		if _, err := s.accept(ctx, key, pr, v, b, s.maj); err != nil {
			return roundResult{err: err, retry: true}
		}
		return roundResult{cur: cur, err: derr, wrote: wrote}
	}
	nv := *next
	nv.ver = b
	nv.chain = chainAfter(b, cur)
	landed, err := s.accept(ctx, key, pr, &nv, b, s.w)
	switch {
	case err == nil:
		return roundResult{cur: cur, wrote: b}
	case landed:
		return roundResult{err: err, retry: true, landed: b}
	}
	return roundResult{err: err, retry: true}
}

// chosen notes that this process learnt cur is key's chosen version from
// proms without writing it: an operation acknowledged on that (an earlier
// attempt's accepts took effect, or a refusal) moves the process's floor
// like one whose accepts this round made, so its later fastest reads are
// never older, until every replica holds it.
func (s *Store) chosen(key string, cur *rstate, proms []rstate) {
	if cur.acc == "" || countAcc(proms, cur.acc) == len(s.reps) {
		return
	}
	s.setFloor(key, cur.acc)
	s.rq.add(key)
}

// prepared is what prepare returns: the states the promises it waited for
// left, and the promises still under way (left of them, sent on late), which
// the accept writes to as they come, until stop.
type prepared struct {
	proms []rstate
	late  <-chan promised
	left  int
	stop  context.CancelFunc
}

// prepare makes every replica that is up promise ballot b and returns the
// replicas' states after their promises, once a write quorum promised (and
// the others had a moment more). The promises still under way go on until
// the returned stop: a round needs every acceptor it can get, since one that
// promised may still never accept.
func (s *Store) prepare(ctx context.Context, key, b string) (prepared, error) {
	rs := s.upReplicas(s.w)
	start := time.Now()
	ch := make(chan promised, len(rs))
	pctx, cancel := context.WithCancel(ctx)
	for _, r := range rs {
		go func() { ch <- s.promise(pctx, key, r, b) }()
	}
	var proms []rstate
	var errs []error
	top := ""
	got := 0
	for got < len(rs) {
		p := <-ch
		got++
		switch {
		case p.err == nil:
			proms = append(proms, p.x)
		case errors.Is(p.err, errOutbid):
			top = max(top, p.top)
			errs = append(errs, p.err)
		default:
			errs = append(errs, p.err)
		}
		if len(proms) >= s.w && got < len(rs) {
			// The others may still promise in a moment; their states are
			// then part of the decision too, and repair has less to do.
			t := time.NewTimer(s.lateGrace(time.Since(start)))
		wait:
			for got < len(rs) {
				select {
				case p := <-ch:
					got++
					if p.err == nil {
						proms = append(proms, p.x)
					}
				case <-t.C:
					break wait
				}
			}
			t.Stop()
			break
		}
		if len(errs) > len(rs)-s.w {
			break
		}
	}
	if len(proms) >= s.w {
		return prepared{proms: proms, late: ch, left: len(rs) - got, stop: cancel}, nil
	}
	cancel()
	if top != "" {
		return prepared{}, &outbidError{top}
	}
	if err := ctx.Err(); err != nil {
		return prepared{}, err
	}
	return prepared{}, fmt.Errorf("%w: %d of %d replicas promised: %v", ErrNoQuorum, len(proms), len(s.reps), errors.Join(errs...))
}

// promise makes replica r promise ballot b for key: it reads the replica's
// object and rewrites it unchanged but for PromiseKey, on condition of the
// generation it read, then reads the state the promise left.
func (s *Store) promise(ctx context.Context, key string, r *replica, b string) promised {
	for try := 0; try < 4; try++ {
		x, v, err := s.readState(ctx, key, r)
		switch {
		case errors.Is(err, errChanged) || errors.Is(err, blob.ErrNotFound):
			continue
		case err != nil:
			return promised{err: err}
		case x.top() >= b:
			return promised{top: x.top(), err: errOutbid}
		}
		if x.kind == absent {
			v.kind = empty
		}
		if err := s.writeReplica(ctx, key, &x, v, x.acc, b); err != nil {
			if refusal(err) {
				continue
			}
			return promised{err: err}
		}
		y := s.statReplica(ctx, r, key)
		switch {
		case !y.ok():
			return promised{err: y.err}
		case y.prom == b:
			return promised{x: y}
		case y.top() > b:
			return promised{top: y.top(), err: errOutbid}
		}
	}
	return promised{err: fmt.Errorf("replica %d kept changing", r.idx)}
}

// highest returns the state accepted at the highest ballot.
func highest(xs []rstate) *rstate {
	var h *rstate
	for i := range xs {
		if x := &xs[i]; x.ok() && (h == nil || x.acc > h.acc || x.acc == h.acc && h.kind == empty && x.kind != empty) {
			h = x
		}
	}
	return h
}

func countAcc(xs []rstate, acc string) int {
	n := 0
	for _, x := range xs {
		if x.ok() && x.acc == acc && (acc != "" || x.kind != live) {
			n++
		}
	}
	return n
}

// accept writes v accepted at ballot b onto every replica that promised b,
// each on condition of the state its promise left: those in pr.proms at
// once, and a replica whose promise was still under way once it promises,
// if one of the first accepts is still running then (a replica that promised
// late is an acceptor like the others, so that one first promiser that
// never answers its accept does not hold the round up until its bound; once
// the first accepts have all answered, a round short of need fails at once,
// as before, rather than wait on a promise that may never come). It returns
// once need accepted. The rest finish in the background within
// StragglerTimeout. landed reports whether, on failure, any accept may have
// taken effect.
func (s *Store) accept(ctx context.Context, key string, pr prepared, v *value, b string, need int) (landed bool, err error) {
	proms := pr.proms
	var running, took atomic.Int64
	running.Store(int64(len(proms)))
	answered := make(chan struct{}) // closed when the first accepts all returned
	f := s.fanOut(ctx, key, len(proms)+pr.left, v.size(), func(ctx context.Context, i int) error {
		if i < len(proms) {
			defer func() {
				if running.Add(-1) == 0 {
					close(answered)
				}
			}()
			err := s.acceptOn(ctx, key, &proms[i], v, b)
			if err == nil {
				took.Add(1)
			}
			return err
		}
		select {
		case p := <-pr.late:
			if p.err != nil {
				return &notAsked{p.err}
			}
			select {
			case <-answered:
				// A promise and the first accepts' end can be ready
				// together: send only if the round can still reach need
				// (otherwise the fan has given up, and an accept sent now
				// would count as one that may have landed).
				if int(took.Load())+pr.left < need {
					return &notAsked{errors.New("the round's first accepts failed")}
				}
			default:
			}
			return s.acceptOn(ctx, key, &p.x, v, b)
		case <-answered:
			return &notAsked{errors.New("promised after the round's first accepts answered")}
		case <-ctx.Done():
			return &notAsked{context.Cause(ctx)}
		}
	})
	return f.wait(need, b)
}

// acceptOn writes v at ballot b onto the replica of x; its error names the
// replica (the fan numbers its calls in the order the promises came).
func (s *Store) acceptOn(ctx context.Context, key string, x *rstate, v *value, b string) error {
	if err := s.writeReplica(ctx, key, x, v, b, b); err != nil {
		return fmt.Errorf("replica %d: %w", x.r.idx, err)
	}
	return nil
}

// readState reads what replica r holds for key, state and value, with the
// stat and the read in parallel (one round trip); when the reader cannot
// show it opened the version the stat describes, the value is read again
// and checked.
func (s *Store) readState(ctx context.Context, key string, r *replica) (rstate, *value, error) {
	type read struct {
		b  *body
		ra *blob.Attributes
	}
	ch := make(chan read, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		rd, err := r.s.NewRangeReader(rctx, key, 0, -1)
		if err != nil {
			ch <- read{}
			return
		}
		b, err := readBody(rd)
		ra := rd.Attributes()
		rd.Close()
		if err != nil {
			ch <- read{}
			return
		}
		ch <- read{b, ra}
	}()
	x := s.statReplica(ctx, r, key)
	if !x.ok() {
		return x, nil, x.err
	}
	if x.kind != live {
		v, err := s.readValue(ctx, key, &x)
		return x, v, err
	}
	rd := <-ch
	if rd.ra != nil && sameObject(rd.ra, x.attrs) && rd.b.size == x.attrs.Size && (x.sum == "" || rd.b.checksum() == x.sum) {
		return x, &value{body: rd.b, opts: userOptions(x.attrs), kind: live, ver: x.ver, chain: x.chain}, nil
	}
	v, err := s.readValue(ctx, key, &x)
	return x, v, err
}

// Resolve makes key's current version chosen at a ballot of its own on a
// majority of the replicas (a key with no version gets a tombstone), so
// that no write partly accepted before it can take effect after it returns:
// one whose operation failed (ErrNoQuorum, ErrUncertain, a cancelled
// context) after its accepts reached fewer than a majority.
//
// A read does not do that. It serves what a majority holds, and a later
// read that meets a failed operation's accept at a higher ballot, on a
// replica the first read did not hear, finishes that operation: it takes
// effect late, which is linearizable (it never returned) but not what a
// caller who judged the failed operation by a read expects. A caller that
// must know whether its failed write took effect (a compactor deciding
// about a move whose conditional delete failed) resolves the key, then
// reads it. It costs one round: a promise and an accept on each replica.
func (s *Store) Resolve(ctx context.Context, key string) error {
	if err := s.check(driver.OpWrite, key); err != nil {
		return err
	}
	// A round that keeps the current version accepts a tombstone where
	// the key has none (see round).
	_, _, err := s.decideKey(ctx, "resolve", key, keep, true, nil)
	if err != nil && ctx.Err() != nil {
		return driver.WrapError("resolve", key, ctx.Err(), nil)
	}
	return err
}
