package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Finalize implements blob.Finalizer: it seals key's acknowledged version on
// every replica that holds it, in parallel (blob.Finalize: natively where the
// replica is a Finalizer, such as gcsrapid; elsewhere objects are final
// already). It first settles the key as a majority read does, so the version
// sealed is the one reads return. It fails with ErrNotFound when the key
// holds no value, and with the holders' errors when any of them failed. A
// replica that receives the version later, by repair, holds it as a replica
// writer leaves it.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check(driver.OpFinalize, key); err != nil {
		return err
	}
	cur, _, err := s.settle(ctx, "finalize", key)
	if err != nil {
		return err
	}
	if cur.gone() {
		return &blob.Error{Op: driver.OpFinalize, Key: key, Kind: blob.ErrNotFound}
	}
	xs, _ := s.surveyAll(ctx, key)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, x := range xs {
		if !x.ok() || x.kind != live || x.ver != cur.ver {
			continue
		}
		wg.Go(func() {
			if err := blob.Finalize(ctx, x.r.s, key); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("replica %d: %w", x.r.idx, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return &blob.Error{Op: driver.OpFinalize, Key: key, Err: errors.Join(errs...)}
	}
	return nil
}
