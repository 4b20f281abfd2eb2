package gcsrapid

import (
	"context"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// Create implements blob.Creator. Writes without attributes are served by a
// pool.Creator: pools, one per prefix (up to MaxPools), of objects this store
// prewarmed (created and flushed empty), so the caller's Write and Close cost
// one data round trip. Writes with attributes, prefixes beyond MaxPools, and
// every Create when pooling is off, create inline: a Put with IfNotExist.
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if err := s.life.CheckOpen(driver.OpCreate, prefix); err != nil {
		return "", nil, err
	}
	if prefix != "" {
		if err := validateKey(driver.OpCreate, prefix); err != nil {
			return "", nil, err
		}
		if s.opts.Hierarchical {
			if err := validateHierarchical(driver.OpCreate, prefix+"name"); err != nil {
				return "", nil, err
			}
		}
	}
	if opts != nil && opts.If.GenerationMatch() != "" {
		return "", nil, blob.Errorf(driver.OpCreate, prefix, blob.ErrInvalidArgument, "Create makes new objects: IfGenerationMatch makes no sense")
	}
	if s.creator != nil {
		return s.creator.Create(ctx, prefix, opts)
	}
	return blob.CreateInline(ctx, s, prefix, opts)
}

// creatorView is the Store as its pool.Creator sees it: prewarming natively,
// and left open when the Creator closes (Store.Close closes it). The
// Creator makes its unpooled names with blob.CreateInline, never through
// this view's Create. Its deletes work while the Store closes, which is when
// the Creator undoes its pooled objects.
type creatorView struct{ *Store }

func (creatorView) Close() error { return nil }

func (v creatorView) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := validateKey(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	return v.delete(ctx, key, cond)
}

func newCreator(s *Store) (*pool.Creator, error) {
	return pool.NewCreator(creatorView{s}, s.opts.CreatorOptions)
}
