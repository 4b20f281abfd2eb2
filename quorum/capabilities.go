package quorum

import (
	"context"
	"errors"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

var (
	_ blob.Prewarmer          = (*Store)(nil)
	_ blob.Finalizer          = (*Store)(nil)
	_ blob.CapabilityReporter = (*Store)(nil)
)

// Finalize implements blob.Finalizer: it seals key on every replica that
// holds it (natively where the replica is a Finalizer), so that a compactor
// copying the object from any replica copies final bytes. It succeeds when
// W replicas finalized it; NotFound needs as many replicas to agree as a read
// does.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check(driver.OpFinalize, key); err != nil {
		return err
	}
	var (
		mu                     sync.Mutex
		done, missing, errored int
		errs                   []error
		wg                     sync.WaitGroup
	)
	for _, r := range s.reps {
		wg.Go(func() {
			err := blob.Finalize(ctx, r.s, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				done++
			case errors.Is(err, blob.ErrNotFound):
				missing++
			default:
				errored++
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	switch {
	case done >= s.w:
		return nil
	case missing >= len(s.reps)-s.w+1:
		return &blob.Error{Op: driver.OpFinalize, Key: key, Kind: blob.ErrNotFound}
	}
	return &blob.Error{Op: driver.OpFinalize, Key: key, Kind: ErrNoQuorum, Err: errors.Join(errs...)}
}

// Capabilities implements blob.CapabilityReporter. Prewarm is native (every
// replica is prewarmed), so a pool.Creator over a quorum serves pooled
// creates; Finalize is native where every replica's is. Appends, copies and
// random access go through the blob helpers' fallbacks.
func (s *Store) Capabilities() blob.Capabilities {
	c := blob.Capabilities{Prewarm: true, Finalize: true}
	for _, r := range s.reps {
		c.Finalize = c.Finalize && blob.CapabilitiesOf(r.s).Finalize
	}
	return c
}
