package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	// A replica the survey found holding the version may be rewriting it
	// meanwhile (a repair, or a straggler of the write, replacing the object
	// with the same version): gcsrapid hides an appendable object until its
	// first bytes are flushed, so its Finalize finds none. Such a replica is
	// surveyed again and, while it still holds the version, sealed again.
	done := map[int]bool{}
	for attempt := 1; ; attempt++ {
		xs, _ := s.surveyAll(ctx, key)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		missing := false
		for _, x := range xs {
			mu.Lock()
			sealed := done[x.r.idx]
			mu.Unlock()
			if sealed || !x.ok() || x.kind != live || x.ver != cur.ver {
				continue
			}
			wg.Go(func() {
				err := blob.Finalize(ctx, x.r.s, key)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					done[x.r.idx] = true
				case errors.Is(err, blob.ErrNotFound) && attempt < finalizeAttempts:
					missing = true
				default:
					errs = append(errs, fmt.Errorf("replica %d: %w", x.r.idx, err))
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			return &blob.Error{Op: driver.OpFinalize, Key: key, Err: errors.Join(errs...)}
		}
		if !missing {
			return nil
		}
		select {
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		case <-ctx.Done():
			return &blob.Error{Op: driver.OpFinalize, Key: key, Err: ctx.Err()}
		}
	}
}

// finalizeAttempts bounds the surveys of a Finalize whose replicas' objects
// keep disappearing under it.
const finalizeAttempts = 5
