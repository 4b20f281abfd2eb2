package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

func blobErrIs(err, kind error) bool { return errors.Is(err, kind) }

// Delete implements blob.Store. It is acknowledged when W replicas no longer
// hold the object; replicas that missed it are cleaned by the repairer.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	var g string
	if opts != nil {
		g = opts.IfGenerationMatch
	}
	tok := s.newToken(g)
	started := 0
	s.update(key, func(st *keyState) {
		st.starting()
		st.deleting++
		started = st.seq
	})
	defer func() {
		contended := false
		s.update(key, func(st *keyState) {
			st.flying--
			st.deleting--
			contended = st.contended
		})
		if contended {
			s.rq.add(key)
		}
	}()
	st := s.snapshot(key)
	rs := s.upReplicas(s.w)
	type plan struct {
		r   *replica
		gen string // replica generation to match, or "" for unconditional
	}
	var plans []plan
	matched, refused := 0, 0
	if g == "" {
		for _, r := range rs {
			plans = append(plans, plan{r: r})
		}
	} else {
		for _, a := range s.statAll(ctx, key, rs) {
			switch {
			case errors.Is(a.err, blob.ErrNotFound):
				// Already gone here: it counts toward W, not as a match.
				plans = append(plans, plan{r: a.r, gen: "-"})
			case a.err != nil:
			case tokenOf(a.attrs) == g:
				matched++
				plans = append(plans, plan{r: a.r, gen: a.attrs.Generation})
			case tokenOf(a.attrs) < g || st.failedTok(tokenOf(a.attrs)):
				plans = append(plans, plan{r: a.r, gen: a.attrs.Generation})
			default:
				refused++
			}
		}
		if matched == 0 || refused > len(s.reps)-s.w {
			return blob.Errorf("delete", key, blob.ErrPrecondition, "quorum version is not %s", g)
		}
	}
	type outcome struct {
		i   int
		err error
	}
	ch := make(chan outcome, len(plans))
	for _, p := range plans {
		go func() {
			if p.gen == "-" {
				ch <- outcome{p.r.idx, blob.ErrNotFound}
				return
			}
			var o *blob.DeleteOptions
			if p.gen != "" {
				o = &blob.DeleteOptions{IfGenerationMatch: p.gen}
			}
			start := time.Now()
			err := p.r.s.Delete(ctx, key, o)
			s.observe(p.r, time.Since(start), err, false)
			ch <- outcome{p.r.idx, err}
		}()
	}
	var gone uint64
	deleted, nf, failed := 0, 0, len(s.reps)-len(plans)
	var errs []error
	for range plans {
		o := <-ch
		if !errors.Is(o.err, blob.ErrNotFound) {
			s.changed(key, tok, true, o.i, o.err == nil)
		}
		switch {
		case o.err == nil:
			deleted++
			gone |= 1 << o.i
		case errors.Is(o.err, blob.ErrNotFound):
			nf++
			gone |= 1 << o.i
		default:
			failed++
			errs = append(errs, fmt.Errorf("replica %d: %w", o.i, o.err))
		}
	}
	if deleted+nf < len(s.reps) {
		s.rq.add(key)
	}
	switch {
	case deleted > 0 && deleted+nf >= s.w:
		s.acked(key, tok, true, gone, started)
		return nil
	case deleted == 0 && nf >= s.nf && st.acceptNotFound():
		s.acked(key, tok, true, gone, started)
		return &blob.Error{Op: "delete", Key: key, Kind: blob.ErrNotFound}
	}
	if err := ctx.Err(); err != nil {
		return driver.WrapError("delete", key, err, nil)
	}
	if failed > len(s.reps)-s.w && g != "" && errorsAll(errs, blob.ErrPrecondition) {
		return blob.Errorf("delete", key, blob.ErrPrecondition, "object changed on the replicas")
	}
	return blob.Errorf("delete", key, nil, "%w: %d of %d replicas deleted, %d needed: %v", ErrNoQuorum, deleted+nf, len(s.reps), s.w, errors.Join(errs...))
}

func errorsAll(errs []error, kind error) bool {
	for _, e := range errs {
		if !errors.Is(e, kind) {
			return false
		}
	}
	return len(errs) > 0
}
