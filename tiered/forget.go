package tiered

import (
	"context"
	"errors"

	"github.com/zonalblob/zonalblob/blob"
)

// Forget accepts the loss of a log object of the pack log (a name from
// Stats.Damaged): one found missing is no longer reported, and one present
// but damaged is removed from cold. Either way the versions it held are gone
// for good, and reads of its keys serve what the rest of the log and the
// tiers hold. Put a lost object back instead, if a copy exists: it is then
// read like any other.
func (s *Store) Forget(ctx context.Context, name string) error {
	if err := s.life.Check("forget", name); err != nil {
		return err
	}
	if err := s.catalog.RefreshFull(ctx); err != nil {
		return err
	}
	damaged, lost := s.catalog.IsDamaged(name)
	if !damaged {
		return blob.Errorf("forget", name, blob.ErrNotFound, "tiered: %q is not a damaged or lost object of the pack log", name)
	}
	if lost {
		if err := s.catalog.RecordInventory(ctx, nil, []string{name}); err != nil {
			return err
		}
	} else {
		if err := s.catalog.RecordInventory(ctx, []string{name}, nil); err != nil {
			return err
		}
		if err := s.cold.Delete(ctx, name, nil); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		s.catalog.ClearDamaged(name)
	}
	s.opts.Logger.Warn("tiered: a damaged or lost pack log object was forgotten; the versions it held are gone", "object", name)
	return nil
}
