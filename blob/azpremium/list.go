package azpremium

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List implements blob.Store. The service lists in byte order and counts
// common prefixes in a page's size; the page token is its continuation marker.
// StartAfter goes to the service as startFrom (inclusive, flat listings only,
// ignored by services that predate it) and is always applied here as well.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := driver.CheckListOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := s.begin(ctx, driver.OpList, o.Prefix, false); err != nil {
		return nil, err
	}
	size := o.PageSize
	var marker *string
	if o.PageToken != "" {
		m, err := driver.DecodePageToken(o.PageToken)
		if err != nil {
			return nil, err
		}
		marker = &m
	}
	var prefix *string
	if o.Prefix != "" {
		p := escapeKey(o.Prefix)
		prefix = &p
	}
	startAfter := escapeKey(o.StartAfter)
	delim := escapeKey(o.Delimiter)
	page := &blob.ListPage{}
	for {
		// Never ask for more than the page still needs, so the marker the
		// service returns is exactly where this page ends.
		n := int32(min(size-len(page.Objects), 5000))
		var (
			batch []blob.ListObject
			next  *string
			err   error
		)
		if o.Delimiter == "" {
			var startFrom *string
			if marker == nil && startAfter != "" {
				startFrom = &startAfter
			}
			batch, next, err = s.listFlat(ctx, prefix, marker, startFrom, n)
		} else {
			batch, next, err = s.listHierarchy(ctx, delim, prefix, marker, n)
		}
		if err != nil {
			return nil, s.wrap(driver.OpList, o.Prefix, err, classify)
		}
		for _, obj := range driver.FilterAfter(batch, startAfter) {
			obj.Key = unescapeKey(obj.Key)
			page.Objects = append(page.Objects, obj)
		}
		if next == nil || *next == "" {
			return page, nil
		}
		if len(page.Objects) >= size {
			page.NextPageToken = driver.EncodePageToken(*next)
			return page, nil
		}
		marker = next
	}
}

func (s *Store) listFlat(ctx context.Context, prefix, marker, startFrom *string, n int32) ([]blob.ListObject, *string, error) {
	pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: prefix, Marker: marker, MaxResults: &n, StartFrom: startFrom})
	resp, err := pager.NextPage(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []blob.ListObject
	if resp.Segment != nil {
		out = make([]blob.ListObject, 0, len(resp.Segment.BlobItems))
		for _, it := range resp.Segment.BlobItems {
			out = append(out, listObject(it))
		}
	}
	return out, resp.NextMarker, nil
}

func (s *Store) listHierarchy(ctx context.Context, delim string, prefix, marker *string, n int32) ([]blob.ListObject, *string, error) {
	pager := s.client.NewListBlobsHierarchyPager(delim, &container.ListBlobsHierarchyOptions{Prefix: prefix, Marker: marker, MaxResults: &n})
	resp, err := pager.NextPage(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []blob.ListObject
	if resp.Segment != nil {
		out = make([]blob.ListObject, 0, len(resp.Segment.BlobItems)+len(resp.Segment.BlobPrefixes))
		for _, it := range resp.Segment.BlobItems {
			out = append(out, listObject(it))
		}
		for _, p := range resp.Segment.BlobPrefixes {
			name := deref(p.Name)
			if !strings.HasSuffix(name, delim) && strings.HasSuffix(name, delim[:1]) {
				// Azurite cuts a common prefix after the first byte of a
				// longer delimiter; the service itself ends it with the whole
				// delimiter.
				name += delim[1:]
			}
			out = append(out, blob.ListObject{Key: name, IsDir: true})
		}
		// The SDK splits the service's one ordered list into blobs and
		// prefixes; merge them back.
		slices.SortFunc(out, func(a, b blob.ListObject) int { return cmp.Compare(a.Key, b.Key) })
	}
	return out, resp.NextMarker, nil
}

func listObject(it *container.BlobItem) blob.ListObject {
	o := blob.ListObject{Key: deref(it.Name)}
	if p := it.Properties; p != nil {
		o.Size = derefInt(p.ContentLength)
		o.ModTime = derefTime(p.LastModified)
		o.MD5 = p.ContentMD5
		if p.ETag != nil {
			o.Generation = string(*p.ETag)
		}
	}
	return o
}
