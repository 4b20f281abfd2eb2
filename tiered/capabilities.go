package tiered

import (
	"context"
	"errors"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

var (
	_ blob.Creator            = (*Store)(nil)
	_ blob.Finalizer          = (*Store)(nil)
	_ blob.CapabilityReporter = (*Store)(nil)
)

// Finalize implements blob.Finalizer: an object in hot is finalized there
// (natively where hot is a Finalizer); one in cold is final already.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check(driver.OpFinalize, key); err != nil {
		return err
	}
	err := blob.Finalize(ctx, s.hot, key)
	if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	// Moved meanwhile, or never hot: cold is written before hot is deleted,
	// so a miss in both means the object does not exist.
	_, err = s.coldStat(ctx, key, s.settled())
	return err
}

// Capabilities implements blob.CapabilityReporter. Create and Finalize are
// native where hot's are; appends, copies and random access go through the
// blob helpers' fallbacks, because an object may move between tiers under
// them.
func (s *Store) Capabilities() blob.Capabilities {
	hot := blob.CapabilitiesOf(s.hot)
	return blob.Capabilities{Create: hot.Create, Finalize: hot.Finalize}
}
