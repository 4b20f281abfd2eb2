package gcsrapid

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List implements blob.Store with the service's ordered listing; StartAfter
// maps to its lexicographic start (inclusive, so the key itself is dropped).
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	size := o.PageSize
	token := o.PageToken
	page := &blob.ListPage{}
	for {
		it := s.bucket.Objects(ctx, &storage.Query{Prefix: o.Prefix, Delimiter: o.Delimiter, StartOffset: o.StartAfter})
		var attrs []*storage.ObjectAttrs
		next, err := iterator.NewPager(it, size-len(page.Objects), token).NextPage(&attrs)
		if err != nil {
			return nil, driver.WrapError(driver.OpList, o.Prefix, err, classify)
		}
		if attrs, err = s.visible(ctx, attrs); err != nil {
			return nil, driver.WrapError(driver.OpList, o.Prefix, err, classify)
		}
		batch := make([]blob.ListObject, 0, len(attrs))
		for _, a := range attrs {
			if a.Prefix != "" {
				batch = append(batch, blob.ListObject{Key: a.Prefix, IsDir: true})
				continue
			}
			mod := a.Updated
			if mod.IsZero() {
				mod = a.Created
			}
			batch = append(batch, blob.ListObject{Key: a.Name, Size: a.Size, ModTime: mod, MD5: a.MD5, Generation: strconv.FormatInt(a.Generation, 10)})
		}
		// The client yields a response's objects before its prefixes; each
		// response covers one key range, so sorting it restores byte order.
		slices.SortFunc(batch, func(a, b blob.ListObject) int { return strings.Compare(a.Key, b.Key) })
		page.Objects = append(page.Objects, driver.FilterAfter(batch, o.StartAfter)...)
		if next == "" {
			return page, nil
		}
		if len(page.Objects) >= size {
			page.NextPageToken = next
			return page, nil
		}
		token = next
	}
}
