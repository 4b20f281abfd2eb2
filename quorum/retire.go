package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// This file is how a caller that keeps a key's version elsewhere removes it
// from the replicas without a consensus round (package tiered, once a
// version is in a regional pack). A Delete writes a tombstone on every
// replica, two writes each; a retirement deletes each replica's object on
// condition of its generation, and deletes are free on every cloud.
//
// The price is the register's memory: a replica whose object was deleted
// reads as one that never held the key, so until every replica's copy is
// gone a majority read may find the retired version on a minority and
// settle it back, or find it gone on a majority and report NotFound. The
// caller must hold the version elsewhere, and must from then on treat any
// version the quorum shows at or below the retired one as stale (tiered
// does: a version at or below one its pack log knows is never served).
// Versions above it are untouched: Retire deletes only objects whose
// version is at or below it, each on condition of the generation it
// stat'ed, and a round that promised on a replica before its object was
// deleted has its accept there refused (accepts are conditional on the
// generation the promise left), so nothing newer is lost or undone.
//
// A retirement also deletes the chain of versions the replicas keep, from
// which an operation retrying after a partial accept learns whether it took
// effect (see consensus): retire only versions issued more than
// InFlightBound ago (GenerationTime), when no operation that wrote them, or
// an older version, can still be retrying; otherwise it would write its
// value again.
//
// While a retirement runs, an operation that surveyed the key before some
// copies were deleted may write the version back onto a replica whose copy
// was (a read settling it, a repair): it lands within InFlightBound of the
// operation's start. So a caller confirms a retirement with a second Retire
// begun that long after the first ended: one that deletes nothing and hears
// from every replica (Retired.Complete, Deleted 0) proves no copy is left,
// and none can come back.

// Holding is what each replica held of a key when Survey stat'ed it.
type Holding struct {
	key    string
	cur    *rstate
	states []rstate
	s      *Store
}

// Attributes returns the attributes of the key's chosen version, or nil if
// it has none (deleted, or never written).
func (h *Holding) Attributes() *blob.Attributes {
	if h.cur == nil || h.cur.gone() {
		return nil
	}
	return publicAttrs(h.cur)
}

// OlderLeft reports whether a replica may hold a version older than the
// chosen one: one that does not answer, or holds an older version (a write
// it missed) or an older round's promise (whose accept may still land).
// Once the chosen version's copies are retired, a majority read that hears
// such a replica settles its version back. Each replica the survey did not
// hear from is stat'ed now (one Stat each).
func (h *Holding) OlderLeft(ctx context.Context) bool {
	xs := slices.Clip(h.states)
	for _, r := range h.s.reps {
		if !slices.ContainsFunc(h.states, func(x rstate) bool { return x.r == r }) {
			xs = append(xs, h.s.statReplica(ctx, r, h.key))
		}
	}
	for _, x := range xs {
		switch {
		case !x.ok():
			return true
		case x.kind == absent:
		case x.kind == empty:
			if x.prom < h.cur.acc {
				return true
			}
		case x.acc < h.cur.acc:
			return true
		}
	}
	return false
}

// Survey stats key on every replica that answers within a moment of a
// majority (one Stat each) and returns the chosen version with each
// replica's object, as Retire and ReadHeld use them. A version found on
// fewer than a majority is settled first, as a majority read settles it.
func (s *Store) Survey(ctx context.Context, key string) (blob.Holding, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		xs, err := s.survey(ctx, key, s.maj)
		if err != nil {
			return nil, wrapOp("survey", key, err)
		}
		cur := highest(xs)
		if countAcc(xs, cur.acc) >= s.maj || cur.acc == "" {
			return &Holding{key: key, cur: cur, states: xs, s: s}, nil
		}
		if attempt == roundAttempts-1 {
			return nil, blob.Errorf("survey", key, nil, "%w: the key's replicas keep changing", ErrNoQuorum)
		}
		if _, _, err := s.settle(ctx, "survey", key); err != nil {
			return nil, err
		}
	}
}

// ReadHeld reads the value of the version h found, from one replica that
// holds it (one read). It fails with blob.ErrPrecondition if that replica's
// object changed since the survey, and blob.ErrNotFound if h found none.
func (s *Store) ReadHeld(ctx context.Context, bh blob.Holding) ([]byte, error) {
	h, err := holdingOf(driver.OpRead, bh)
	if err != nil {
		return nil, err
	}
	if err := s.check(driver.OpRead, h.key); err != nil {
		return nil, err
	}
	if h.cur == nil || h.cur.gone() {
		return nil, &blob.Error{Op: driver.OpRead, Key: h.key, Kind: blob.ErrNotFound}
	}
	v, err := s.readValue(ctx, h.key, h.cur)
	switch {
	case errors.Is(err, errChanged), errors.Is(err, blob.ErrNotFound):
		return nil, &blob.Error{Op: driver.OpRead, Key: h.key, Kind: blob.ErrPrecondition, Err: err}
	case err != nil:
		return nil, wrapOp(driver.OpRead, h.key, err)
	}
	return v.body.bytes()
}

// Retired is what a Retire did.
type Retired = blob.Retired

// Retire deletes, from every replica, the key's object if it holds a
// version at or below version (a value or a tombstone; a placeholder whose
// promise is at or below it too), each on condition of the replica
// generation h found (a replica h did not hear from, or whose object
// changed since, is stat'ed again first). It never touches a newer version.
// See the top of this file for what the caller must guarantee. An error
// reports replicas that could not be reached or kept changing; what was
// deleted stays deleted, and Retire may be called again.
func (s *Store) Retire(ctx context.Context, bh blob.Holding, version string) (Retired, error) {
	var out Retired
	h, err := holdingOf(driver.OpDelete, bh)
	if err != nil {
		return out, err
	}
	if err := s.check(driver.OpDelete, h.key); err != nil {
		return out, err
	}
	if version == "" {
		return out, blob.Errorf(driver.OpDelete, h.key, blob.ErrInvalidArgument, "retire needs a version")
	}
	seen := make(map[*replica]rstate, len(h.states))
	for _, x := range h.states {
		if x.ok() {
			seen[x.r] = x
		}
	}
	type result struct {
		deleted int
		newer   bool
		err     error
	}
	ch := make(chan result, len(s.reps))
	for _, r := range s.reps {
		x, ok := seen[r]
		go func() {
			var res result
		tries:
			for try := 0; try < 4; try++ {
				res.err = nil
				if !ok || try > 0 {
					x = s.statReplica(ctx, r, h.key)
				}
				if !x.ok() {
					res.err = fmt.Errorf("replica %d: %w", r.idx, x.err)
					break tries
				}
				switch {
				case x.kind == absent:
					ch <- res
					return
				case x.kind == empty && x.prom > version:
					// A round under way since: it holds no version.
					ch <- res
					return
				case x.kind != empty && (x.ver == "" || x.ver > version):
					res.newer = x.kind == live
					ch <- res
					return
				}
				start := time.Now()
				err := r.s.Delete(ctx, h.key, &blob.DeleteOptions{If: blob.IfGenerationMatch(x.attrs.Generation)})
				s.observe(r, time.Since(start), err, ctx.Err() != nil)
				switch {
				case err == nil:
					res.deleted++
					ch <- res
					return
				case refusal(err):
					res.err = fmt.Errorf("replica %d changed: %w", r.idx, err)
					continue
				default:
					res.err = fmt.Errorf("replica %d: %w", r.idx, err)
					break tries
				}
			}
			ch <- res
		}()
	}
	var errs []error
	for range s.reps {
		res := <-ch
		out.Deleted += res.deleted
		out.Newer = out.Newer || res.newer
		if res.err != nil {
			errs = append(errs, res.err)
		}
	}
	s.stats.retired.Add(int64(out.Deleted))
	if len(errs) > 0 {
		return out, blob.Errorf(driver.OpDelete, h.key, nil, "%w: retire: %v", ErrNoQuorum, errors.Join(errs...))
	}
	out.Complete = true
	return out, nil
}

// InFlightBound bounds how long after an operation starts its replica
// writes can land: the rounds that may find its own earlier accepts begin
// within its retry window of them (at most maxRetryWindow), a read's
// settling within StragglerTimeout of its survey, and the promise of such a
// round, whose accept is conditional on what the promise left, lands within
// StragglerTimeout more. Writes that land later are conditional on the
// replica generation their round's promise left, so a late one lands only
// on a replica nothing touched since, and a retirement touches it.
func (s *Store) InFlightBound() time.Duration {
	return s.maxRetryWindow() + s.opts.StragglerTimeout
}

// holdingOf returns the survey a blob.Holding stands for: only this
// package's Survey makes them.
func holdingOf(op string, h blob.Holding) (*Holding, error) {
	qh, ok := h.(*Holding)
	if !ok || qh == nil {
		return nil, blob.Errorf(op, "", blob.ErrInvalidArgument, "quorum: %T is not a survey of a quorum", h)
	}
	return qh, nil
}

// GenerationTime implements blob.Retirer with the package's GenerationTime.
func (s *Store) GenerationTime(gen string) (time.Time, bool) { return GenerationTime(gen) }

// GenerationTime returns when the version named by generation gen was
// issued, on its writer's clock (never later than the write took effect,
// within clock skew). A key's versions that took effect later have greater
// generations, compared as strings.
func GenerationTime(gen string) (time.Time, bool) {
	ns := tokenTime(gen)
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
