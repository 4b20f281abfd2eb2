package quorum

import (
	"context"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Delete implements blob.Store. A delete writes a tombstone, decided by
// consensus like any write: a version like any other, so that a replica
// still holding an older copy loses to it in reads, repair and
// anti-entropy. Tombstones are collected once every replica holds the same
// one and TombstoneGrace has passed.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	t := &value{kind: tomb}
	g, conditional := cond.Generation()
	if !conditional {
		err = s.putDecided(ctx, "delete", key, t)
		if err != nil && ctx.Err() != nil {
			return driver.WrapError(driver.OpDelete, key, ctx.Err(), nil)
		}
		return err
	}
	_, err = s.consensus(ctx, "delete", key, func(cur *rstate) (*value, error) {
		switch {
		case cur.gone():
			return nil, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrNotFound}
		case cur.ver != g:
			return nil, blob.Errorf(driver.OpDelete, key, blob.ErrPrecondition, "quorum version is not %s", g)
		}
		return t, nil
	})
	if err != nil && ctx.Err() != nil {
		return driver.WrapError(driver.OpDelete, key, ctx.Err(), nil)
	}
	return err
}
