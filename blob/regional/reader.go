package regional

import (
	"context"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewRangeReader implements blob.Store. The reader's Attributes carry Size,
// ContentType and ModTime (what gocloud returns with a read).
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	if s.opts.SortListings {
		// gocloud's fileblob rewrites an object's attribute file in place, so
		// opening while a commit runs can fail; commits hold the key lock.
		defer s.locks.lock(key)()
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil && offset > 0 && classify(err) != blob.ErrNotFound {
		// Some backends (Azure: 416) refuse a range that starts at or past
		// the end; our contract reads nothing there.
		if a, serr := s.b.Attributes(ctx, key); serr == nil && offset >= a.Size {
			return driver.EmptyReader(s.attrs(key, a)), nil
		}
	}
	if err != nil {
		return nil, driver.WrapError(driver.OpRead, key, err, classify)
	}
	return driver.NewReader(key, r, func() *blob.Attributes { return readerAttrs(key, r) }, classify), nil
}

func readerAttrs(key string, r *gcblob.Reader) *blob.Attributes {
	return &blob.Attributes{Key: key, Size: r.Size(), ContentType: r.ContentType(), ModTime: r.ModTime()}
}
