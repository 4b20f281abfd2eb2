package driver

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

// Paginate serves one List page from objs, the complete set of objects (not
// common prefixes) under opts.Prefix in any order. It sorts, applies Prefix,
// Delimiter grouping, StartAfter, PageSize and PageToken exactly as Store.List
// specifies. Drivers whose backend cannot list in order (S3 Express directory
// buckets) or cannot be trusted to (a file tree) use it; its page token is the
// last key returned, so a listing stays correct when objects are created or
// deleted between pages.
func Paginate(objs []blob.ListObject, opts *blob.ListOptions) (*blob.ListPage, error) {
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	after, err := ListStart(&o)
	if err != nil {
		return nil, err
	}
	size := o.PageSize
	if size <= 0 {
		size = blob.DefaultPageSize
	}
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(a, b blob.ListObject) int { return cmp.Compare(a.Key, b.Key) })
	page := &blob.ListPage{}
	var lastDir string
	for _, obj := range sorted {
		if !strings.HasPrefix(obj.Key, o.Prefix) {
			continue
		}
		if o.Delimiter != "" {
			if i := strings.Index(obj.Key[len(o.Prefix):], o.Delimiter); i >= 0 {
				dir := obj.Key[:len(o.Prefix)+i+len(o.Delimiter)]
				if dir == lastDir {
					continue
				}
				lastDir = dir
				obj = blob.ListObject{Key: dir, IsDir: true}
			}
		}
		if obj.Key <= after {
			continue
		}
		if len(page.Objects) == size {
			page.NextPageToken = EncodePageToken(page.Objects[size-1].Key)
			break
		}
		page.Objects = append(page.Objects, obj)
	}
	return page, nil
}

// ListStart returns the key after which a page starts: the later of
// StartAfter and the key encoded in PageToken. Composites that merge the
// pages of several stores start each of them there.
func ListStart(o *blob.ListOptions) (string, error) {
	after := o.StartAfter
	if o.PageToken != "" {
		k, err := DecodePageToken(o.PageToken)
		if err != nil {
			return "", err
		}
		after = max(after, k)
	}
	return after, nil
}

// EncodePageToken makes an opaque page token that resumes after key.
func EncodePageToken(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// DecodePageToken returns the key encoded by EncodePageToken.
func DecodePageToken(token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", blob.Errorf(OpList, "", blob.ErrInvalidArgument, "malformed page token")
	}
	return string(b), nil
}

// FilterAfter drops entries of a sorted page whose Key is not after startAfter,
// for drivers whose backend ignores StartAfter.
func FilterAfter(objs []blob.ListObject, startAfter string) []blob.ListObject {
	if startAfter == "" {
		return objs
	}
	i, _ := slices.BinarySearchFunc(objs, startAfter, func(o blob.ListObject, k string) int {
		if o.Key <= k {
			return -1
		}
		return 1
	})
	return objs[i:]
}

// CheckListOptions returns a copy of opts (the zero value for nil) after the
// checks every driver makes before listing: a valid prefix and a page size
// that is not negative. A page size of 0 becomes blob.DefaultPageSize.
func CheckListOptions(opts *blob.ListOptions) (blob.ListOptions, error) {
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	if o.Prefix != "" {
		if err := blob.ValidateKey(OpList, o.Prefix); err != nil {
			return o, err
		}
	}
	switch {
	case o.PageSize < 0:
		return o, blob.Errorf(OpList, o.Prefix, blob.ErrInvalidArgument, "negative page size %d", o.PageSize)
	case o.PageSize == 0:
		o.PageSize = blob.DefaultPageSize
	}
	return o, nil
}
