package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Delete removes key, under the key's lock so that this process's
// compactor is not moving it meanwhile. It takes effect at one instant,
// when the version readers see is replaced:
//
//   - If hot has the key (generation g), a grave replaces g in hot, on
//     condition of its generation (see Graves in the package
//     documentation): a pack move, whose removal of g is conditional too,
//     then leaves it to the grave, and whatever packs or cold hold of older
//     versions stays shadowed until the compactor retires the grave with
//     them (retireGraves). So the Delete waits for no log object and reads
//     no log.
//   - If hot has none, a grave over nothing deletes what cold holds
//     (buryCold, buryPacked).
//   - Either way, a newer version written meanwhile is deleted instead (the
//     loop), and a g moved out of hot meanwhile by a compactor in another
//     process is buried where it went, as a version in cold. A grave in hot
//     is no version: NotFound.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	// want is the generation the Delete is conditional on; "" (which
	// CheckDelete refused as a condition) means none.
	want, _ := cond.Generation()
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpDelete, Key: key, Err: err}
	}
	defer unlock()
	inPacks := s.catalog.MayHold(key)
	if !inPacks {
		// Not packed, as far as this process knows: a version it wrote is
		// most likely still in hot.
		if done, err := s.deleteWritten(ctx, key, want); done {
			return err
		}
	}
	if want == "" && inPacks {
		// Most likely packed, and not in hot: bury it straight away.
		if done, err := s.buryPacked(ctx, key); done {
			return err
		}
	}
	misses := 0
	for range 10 {
		a, stale, err := s.hotStatStale(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			if done, err := s.buryCold(ctx, key, want, stale, &misses); done {
				return err
			}
			continue // hot changed: look again
		} else if err != nil {
			return err
		}
		if isGrave(a) {
			if want != "" {
				return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
			}
			return notFound(driver.OpDelete, key)
		}
		if want != "" && a.Generation != want {
			return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
		}
		err = s.writeGrave(ctx, key, a.Generation)
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
			continue // replaced, or moved or deleted: looked at again
		}
		return err
	}
	return blob.Errorf(driver.OpDelete, key, nil, "tiered: key kept changing")
}

// buryCold deletes the version of key that cold holds, hot having missed
// (or holding only stale, a copy of a version packs killed or superseded),
// by writing a grave in hot on condition of what hot held: nothing, or
// stale. The grave shadows the cold version at once, as any version in hot
// does, and the compactor retires it later with what it shadows
// (retireGraves: a tombstone, hotDeleteDelay, then the cold object and the
// grave). So the Delete writes no log object and waits for none, and two
// operations on one cold version (two Deletes, a Delete and a conditional
// write, which writes hot IfNotExist) meet at hot's condition: one wins,
// the other looks again. done is false when hot changed under it, or after
// a first miss in both tiers (asked again, as reads do: a Delete of a newer
// hot version may have removed the copy the first look would have found).
func (s *Store) buryCold(ctx context.Context, key, want, stale string, misses *int) (done bool, err error) {
	ca, err := s.coldStat(ctx, key, s.settled())
	if errors.Is(err, blob.ErrNotFound) {
		if *misses++; *misses < 2 {
			s.stats.missesChecked.Add(1)
			return false, nil
		}
		if want != "" {
			return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
		}
		return true, notFound(driver.OpDelete, key)
	} else if err != nil {
		return true, err
	}
	if want != "" && ca.Generation != want {
		return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
	}
	cond := blob.IfNotExist()
	if stale != "" {
		cond = blob.IfGenerationMatch(stale)
	}
	err = s.putGrave(ctx, key, cond, ca.Generation)
	if errors.Is(err, blob.ErrExists) || errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	return true, err
}

// buryPacked is buryCold for a key the catalog says packs may hold, with
// no condition on the version deleted: the grave is written first, on
// condition that hot has nothing (done is false if it has something, for
// Delete to look at), and what it shadows is asked after. A version found
// in cold then is the one the grave deleted: the catalog need only include
// the log objects committed buryWindow before the grave, since a
// tombstone that killed that version was followed, that long after, by the
// removal of the grave that deleted it (retireGraves), which the grave's
// condition saw done. Only "nothing there" needs the catalog as of
// hotDeleteDelay before (a version packed since left hot that long after
// its pack's commit): so a packed Delete is one write to hot, and a listing
// of the log at most once per buryWindow. A grave over nothing is retired
// like any other.
func (s *Store) buryPacked(ctx context.Context, key string) (done bool, err error) {
	err = s.putGrave(ctx, key, blob.IfNotExist(), "packed")
	if errors.Is(err, blob.ErrExists) || errors.Is(err, blob.ErrPrecondition) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	buried := time.Now()
	if _, err := s.coldStat(ctx, key, buried.Add(-s.buryWindow())); !errors.Is(err, blob.ErrNotFound) {
		return true, err
	}
	_, err = s.coldStat(ctx, key, buried.Add(-s.hotDeleteDelay()))
	if errors.Is(err, blob.ErrNotFound) {
		return true, notFound(driver.OpDelete, key)
	}
	return true, err
}

func (s *Store) buryWindow() time.Duration { return BuryWindow(s.opts.MoveTimeout) }

// BuryWindow is how long after a tombstone killing what a grave shadows the
// compactor of a Store whose MoveTimeout is moveTimeout (zero:
// DefaultMoveTimeout) removes the grave: moveTimeout/4, at least
// HotDeleteDelay and at most 5s. Deletes of packed objects that begin
// within it of one another share one listing of the pack log.
func BuryWindow(moveTimeout time.Duration) time.Duration {
	if moveTimeout <= 0 {
		moveTimeout = DefaultMoveTimeout
	}
	return max(HotDeleteDelay(moveTimeout), min(moveTimeout/4, 5*time.Second))
}

// ifKnownGeneration is the condition of a delete of a cold object whose
// generation cold reported as gen: gen, so that a version that replaced it
// meanwhile is left alone; or, where cold reported none (see fromCold),
// none: a store that does not name its versions cannot check one, and the
// object must still go. Hot's generations are always known (every
// operation here is conditional on them), so hot deletes name theirs with
// blob.IfGenerationMatch directly.
func ifKnownGeneration(gen string) blob.Condition {
	if gen == "" {
		return blob.Condition{}
	}
	return blob.IfGenerationMatch(gen)
}
