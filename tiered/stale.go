package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// A retirer (blob.Retirer: a quorum, whose Delete is a consensus round
// writing a tombstone on every replica, two writes each, where Retire
// deletes each replica's copy on condition of its generation, for free) is
// a hot store that can remove a version it no longer needs to keep without
// a write of its own. A pack move retires what it packed.
//
// A retirement is not atomic: until every replica's copy is gone, the
// quorum may show the retired version (or an older one) again, or not. So
// a Store over a retirer never serves a hot version at or below one its
// pack log knows (staleHot): that version was packed, and the log says
// what became of it. Over a retirer, the catalog keeps that knowledge for
// as long as a copy may remain: a pack move's marker stays until a later
// retirement of its objects, begun InFlightBound after the last one ended
// (an operation in flight meanwhile, a read settling the version, may
// write a copy back), finds no copy on any replica (recoverBatch), and
// while a marker names a version the tombstone killing it is kept
// (maintainPacks).

// mayBePacked reports whether hot's version gen may have been packed (and
// so retired): a move packs only objects older than After, whose version
// was issued, on a clock within MaxClockSkew of ours, at least After less
// twice the skew and a move's duration ago. Younger versions are served
// without looking at the pack log.
func (s *Store) mayBePacked(gen string) bool {
	t, ok := s.retirer.GenerationTime(gen)
	if !ok {
		return true
	}
	return time.Now().Sub(t) >= s.opts.After-2*s.opts.MaxClockSkew-s.opts.MoveTimeout
}

// staleHot reports whether hot's version gen of key is one a pack move
// retired (or an older one), which hot may still show: the pack log knows
// a version at or above it. since is as for coldStat: settled() after the
// hot answer, the present for a check made before hot is asked.
func (s *Store) staleHot(ctx context.Context, key, gen string, since time.Time) (bool, error) {
	if s.retirer == nil || gen == "" || !s.mayBePacked(gen) {
		return false, nil
	}
	p, err := s.packedSince(ctx, key, gen, since)
	return p.Stale(), err
}

// packedSince is what packs committed before since hold of key relative to
// generation gen.
func (s *Store) packedSince(ctx context.Context, key, gen string, since time.Time) (packlog.PackedAs, error) {
	if err := s.catalog.Sync(ctx, since); err != nil {
		return packlog.PackedAs{}, err
	}
	return s.catalog.PackedAs(ctx, key, gen)
}

// hotStat is hot's Stat, with a stale version reported as NotFound.
func (s *Store) hotStat(ctx context.Context, key string) (*blob.Attributes, error) {
	a, _, err := s.hotStatStale(ctx, key)
	return a, err
}

// hotStatStale is hotStat that also returns the generation of the stale
// version it set aside, if any.
func (s *Store) hotStatStale(ctx context.Context, key string) (*blob.Attributes, string, error) {
	a, err := s.hot.Stat(ctx, key)
	if err != nil {
		return nil, "", err
	}
	stale, err := s.staleHot(ctx, key, a.Generation, s.settled())
	if err != nil {
		return nil, "", err
	}
	if stale {
		s.stats.staleHot.Add(1)
		return nil, a.Generation, &blob.Error{Op: driver.OpStat, Key: key, Kind: blob.ErrNotFound}
	}
	return a, "", nil
}

// putHot writes a version to hot on condition that hot has none to show
// (IfNotExist): the caller checked cold. Over a retirer hot may still hold
// a copy of a version the caller's check saw as gone (killed, or older than
// one packs hold) or, with accept, as generation accept (the version a
// conditional write's check found in a pack): that copy is replaced on
// condition of its own generation.
func (s *Store) putHot(ctx context.Context, key string, data []byte, opts blob.WriterOptions, accept string) error {
	for range 4 {
		err := s.putHotRecorded(ctx, key, data, &opts)
		if !errors.Is(err, blob.ErrExists) {
			return err
		}
		a, serr := s.hot.Stat(ctx, key)
		switch {
		case errors.Is(serr, blob.ErrNotFound):
			continue // retired meanwhile
		case serr != nil:
			return serr
		case isGrave(a) && accept != "":
			return err // a version was written and deleted since the check
		case isGrave(a):
			// A deleted key: the caller's check of cold is stale if the
			// grave was retired since, so it checks again.
			return s.replaceGrave(ctx, key, data, opts, a)
		case s.retirer == nil:
			return err
		}
		dead := a.Generation == accept
		if !dead && a.Generation != "" {
			p, serr := s.packedSince(ctx, key, a.Generation, s.settled())
			if serr != nil {
				return serr
			}
			dead = p.Dead()
		}
		if !dead {
			return err
		}
		o := opts
		o.If = blob.IfGenerationMatch(a.Generation)
		err = s.putHotRecorded(ctx, key, data, &o)
		if !errors.Is(err, blob.ErrPrecondition) && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	return blob.Errorf(driver.OpWrite, key, nil, "tiered: a stale version in hot kept changing")
}

// filterStale removes from a page of hot's listing the keys whose version
// there is stale. Only keys a pack may hold are asked about (their Bloom
// filters say so), one Stat each. A directory (a listing with a delimiter)
// is no version and stays: its name can be in a pack's range and pass its
// filter, and dropped here it would be listed from the packs' page alone,
// without the check of hot's directories (dirLive) that leaves out one
// holding only graves.
func (s *Store) filterStale(ctx context.Context, objs []blob.ListObject) ([]blob.ListObject, error) {
	if s.retirer == nil {
		return objs, nil
	}
	out := objs[:0:0]
	for _, o := range objs {
		if o.IsDir || isMarker(o.Key) || !s.catalog.MayHold(o.Key) {
			out = append(out, o)
			continue
		}
		a, err := s.hotStat(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		o.Generation = a.Generation
		out = append(out, o)
	}
	return out, nil
}
