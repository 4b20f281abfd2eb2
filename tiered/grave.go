package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// graveKey is the metadata key that makes a hot object a grave, holding the
// generation it deleted.
//
// A Delete of a version g that a move may be taking (g is old enough to
// move) does not remove g from hot: it replaces g there with a grave, on
// condition of g's generation. A move's removal of g from hot is
// conditional on g too, so exactly one of them takes g: the Delete, and
// every copy the move made (a cold object, a pack entry) is shadowed by the
// grave, as any older version is by a newer one in hot; or the move, and
// the Delete finds g gone from hot and deletes it where it went, as a
// version in cold only. Without the grave a Delete that found g gone could
// not tell whether a move took it (and the copy is g) or another Delete
// did, and a reader could find the copy after the Delete returned.
//
// A grave reads as no object: reads and Stats that find one in hot report
// NotFound without asking cold, listings leave out its key in every tier,
// and a write replaces it (IfNotExist writes on condition of its
// generation). The compactor retires a grave once no move that began
// before it can still be running (see retireGraves): it kills the versions
// of the key that packs hold, removes the cold object, and then the grave.
const graveKey = "zonalblob-tiered-grave"

func isGrave(a *blob.Attributes) bool { return a != nil && a.Metadata[graveKey] != "" }

func notFound(op, key string) error {
	return &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound}
}

// writeGrave replaces generation g of key in hot with a grave.
func (s *Store) writeGrave(ctx context.Context, key, g string) error {
	return s.putGrave(ctx, key, blob.IfGenerationMatch(g), g)
}

// putGrave writes a grave to hot under cond, naming what it deletes.
func (s *Store) putGrave(ctx context.Context, key string, cond blob.Condition, deleted string) error {
	err := blob.Put(ctx, s.hot, key, nil, &blob.WriterOptions{
		If:          cond,
		ContentType: "application/octet-stream",
		Metadata:    map[string]string{graveKey: deleted},
	})
	if err == nil {
		s.stats.graves.Add(1)
	}
	return err
}

// graveHold is how old a grave must be before it is retired: any move that
// read the version it deleted, on a clock within MaxClockSkew of ours,
// ended (MoveTimeout) and its last removal from hot was seen by readers.
func (s *Store) graveHold() time.Duration { return GraveHold(s.opts.MoveTimeout, s.opts.MaxClockSkew) }

// GraveHold is how old a grave must be before the compactor of a Store
// with MoveTimeout moveTimeout and MaxClockSkew skew retires it.
func GraveHold(moveTimeout, skew time.Duration) time.Duration {
	if moveTimeout <= 0 {
		moveTimeout = DefaultMoveTimeout
	}
	if skew <= 0 {
		skew = DefaultMaxClockSkew
	}
	return moveTimeout + 2*skew + HotDeleteDelay(moveTimeout)
}

// graveAt is a grave found in hot: its key and attributes.
type graveAt struct {
	key   string
	attrs *blob.Attributes
}

// retireGraves removes the graves gs (each older than graveHold) and what
// they shadow: the versions of their keys packs hold are killed, in one
// tombstone, then each key's cold object is removed, and then its grave,
// on condition of the grave's generation (a write that replaced it stays).
// A grave whose key this process is moving or deleting is left for the
// next pass.
func (s *Store) retireGraves(ctx context.Context, gs []graveAt) error {
	if len(gs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()
	var held []graveAt
	var kills []packlog.Version
	// One listing of the pack log for all of them (each grave is older than
	// any pack that can hold a version it shadows).
	if err := s.catalog.Sync(ctx, time.Now()); err != nil {
		return err
	}
	for _, g := range gs {
		unlock, ok := s.locks.tryLock(g.key)
		if !ok {
			s.stats.busy.Add(1)
			continue
		}
		defer unlock()
		ks, err := s.catalog.Live(ctx, g.key)
		if err != nil {
			return err
		}
		kills = append(kills, ks...)
		held = append(held, g)
	}
	if err := s.writeTombstone(ctx, kills); err != nil {
		return err
	}
	if len(kills) > 0 {
		// writeTombstone waited hotDeleteDelay; Deletes that bury packed
		// versions count on buryWindow (see buryPacked).
		select {
		case <-time.After(s.buryWindow() - s.hotDeleteDelay()):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var first error
	for _, g := range held {
		if err := s.retireGrave(ctx, g); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// retireGrave removes the cold object of g's key, then g, once the
// versions packs hold of the key are dead.
func (s *Store) retireGrave(ctx context.Context, g graveAt) error {
	// Every cold object of the key is older than the grave: a newer
	// version would have replaced the grave in hot before any move of it.
	for range 4 {
		ca, err := s.cold.Stat(ctx, g.key)
		if errors.Is(err, blob.ErrNotFound) {
			break
		} else if err != nil {
			return err
		}
		if err := s.fence(ctx); err != nil {
			return err
		}
		err = s.cold.Delete(ctx, g.key, &blob.DeleteOptions{If: ifKnownGeneration(ca.Generation)})
		if errors.Is(err, blob.ErrUnsupported) {
			err = s.cold.Delete(ctx, g.key, nil)
		}
		if err == nil || errors.Is(err, blob.ErrNotFound) {
			break
		} else if !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
	}
	if s.retirer != nil {
		// Over a quorum, a grave's conditional Delete would be a consensus
		// round; a retirement deletes each replica's copy, for free, and
		// never a newer version. A copy of the grave it leaves, or one a
		// read settles back, is harmless: it reads as no object, which is
		// what the key is, and once a newer version is packed it is at or
		// below it (staleHot sets it aside). Not so the version the grave
		// deleted, on a replica that missed the grave: nothing but the
		// grave says it is dead, so once the grave's copies are gone a
		// majority read that hears that replica settles it back. The
		// grave is retired only when no replica may hold an older version;
		// until repair brings it to such a replica, a later pass retries.
		h, err := s.retirer.Survey(ctx, g.key)
		if err != nil {
			return err
		}
		if h.OlderLeft(ctx) {
			return nil
		}
		if err := s.fence(ctx); err != nil {
			return err
		}
		if _, err := s.retirer.Retire(ctx, h, g.attrs.Generation); err != nil {
			return err
		}
		s.stats.gravesRetired.Add(1)
		return nil
	}
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.hot.Delete(ctx, g.key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g.attrs.Generation)})
	switch {
	case err == nil:
		s.stats.gravesRetired.Add(1)
		return nil
	case errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound):
		return nil // replaced by a write, or retired by another pass
	}
	return err
}

// replaceGrave writes data over the grave a of key in hot, for a write
// whose condition (IfNotExist) the grave meets: on condition of the
// grave's generation, so that a version written meanwhile is not replaced.
func (s *Store) replaceGrave(ctx context.Context, key string, data []byte, opts blob.WriterOptions, a *blob.Attributes) error {
	o := opts
	o.If = blob.IfGenerationMatch(a.Generation)
	err := s.putHotRecorded(ctx, key, data, &o)
	if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
		return errGraveMoved
	}
	return err
}

// errGraveMoved reports that the grave a write meant to replace changed
// meanwhile: the caller checks the key again.
var errGraveMoved = errors.New("tiered: the grave changed")

// gravesIn returns the keys of a page of hot's listing whose objects are
// graves: of the empty objects, one Stat each.
func (s *Store) gravesIn(ctx context.Context, objs []blob.ListObject) (map[string]bool, error) {
	var graves map[string]bool
	for _, o := range objs {
		if o.Size != 0 || o.IsDir || isMarker(o.Key) {
			continue
		}
		a, err := s.hot.Stat(ctx, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		if isGrave(a) {
			if graves == nil {
				graves = map[string]bool{}
			}
			graves[o.Key] = true
		}
	}
	return graves, nil
}

// readsGrave reports whether a hot reader with attributes a opened a
// grave. Readers of some stores carry no metadata: an empty object is
// asked about with a Stat (of the same generation, where the reader gives
// one).
func (s *Store) readsGrave(ctx context.Context, key string, a *blob.Attributes) (bool, error) {
	if a == nil || a.Size != 0 {
		return false, nil
	}
	if len(a.Metadata) > 0 {
		return isGrave(a), nil
	}
	sa, err := s.hot.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return isGrave(sa) && (a.Generation == "" || a.Generation == sa.Generation), nil
}

// dirLive reports whether a listing with a delimiter shows the directory
// prefix, which hot's listing has: whether a key under it is not a grave
// (nor shadowed by one). A non-empty object in hot settles it in one call;
// otherwise the tiers are listed under prefix.
func (s *Store) dirLive(ctx context.Context, prefix string) (bool, error) {
	if s.retirer == nil {
		hp, err := s.hot.List(ctx, &blob.ListOptions{Prefix: prefix, PageSize: 10})
		if err != nil {
			return false, err
		}
		for _, o := range hp.Objects {
			if o.Size > 0 && !isMarker(o.Key) {
				return true, nil
			}
		}
	}
	page, err := s.List(ctx, &blob.ListOptions{Prefix: prefix, PageSize: 1})
	if err != nil {
		return false, err
	}
	return len(page.Objects) > 0, nil
}
