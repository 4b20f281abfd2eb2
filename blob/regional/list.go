package regional

import (
	"context"
	"io"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List implements blob.Store.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	if s.opts.SortListings {
		return s.listSorted(ctx, &o)
	}
	return s.listPaged(ctx, &o)
}

// listPaged relies on the backend's byte-ordered pages and filters StartAfter
// itself, asking for no more than the page still needs so that the backend's
// token always marks exactly where this page ends.
func (s *Store) listPaged(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	size := o.PageSize
	token := gcblob.FirstPageToken
	if o.PageToken != "" {
		t, err := driver.DecodePageToken(o.PageToken)
		if err != nil {
			return nil, err
		}
		token = []byte(t)
	}
	page := &blob.ListPage{}
	for {
		objs, next, err := s.b.ListPage(ctx, token, size-len(page.Objects), &gcblob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter})
		if err != nil {
			return nil, driver.WrapError(driver.OpList, o.Prefix, err, classify)
		}
		batch := make([]blob.ListObject, 0, len(objs))
		for _, obj := range objs {
			batch = append(batch, blob.ListObject{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5, IsDir: obj.IsDir})
		}
		page.Objects = append(page.Objects, driver.FilterAfter(batch, o.StartAfter)...)
		if len(next) == 0 {
			return page, nil
		}
		if len(page.Objects) >= size {
			page.NextPageToken = driver.EncodePageToken(string(next))
			return page, nil
		}
		token = next
	}
}

// listSorted lists the whole prefix, then pages it in memory (see Options.SortListings).
func (s *Store) listSorted(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	var all []blob.ListObject
	it := s.b.List(&gcblob.ListOptions{Prefix: o.Prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, driver.WrapError(driver.OpList, o.Prefix, err, classify)
		}
		if s.opts.fileTree && tempName.MatchString(obj.Key) {
			// A write in progress (or one a crash cut short): no key can
			// have this form, see checkFileKey.
			continue
		}
		all = append(all, blob.ListObject{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5})
	}
	return driver.Paginate(all, o)
}
