package s3express

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List implements blob.Store. Directory buckets return keys in no order,
// accept only prefixes ending in "/" and no start-after, so List lists the
// directory that encloses the prefix (the prefix up to its last "/") to the
// end, and sorts, filters and pages it in memory with driver.Paginate:
//
//   - Delimiter "/": one directory level (its keys and subdirectories), so
//     the cost is ceil(entries in that directory / 1000) ListObjectsV2 calls.
//   - No delimiter or another delimiter: the whole subtree under that
//     directory, grouped here; the cost is ceil(keys in the subtree / 1000)
//     calls, and memory for those keys.
//
// StartAfter and the page token (the last key returned) are applied after
// sorting, so they cost nothing on the wire, and neither do they save
// anything. To keep a paged listing from costing a full directory listing
// per page, the first page's sorted snapshot serves the later pages for
// ListSnapshotTTL; objects created or deleted after the first page may then
// be missed or still seen, which the Store contract allows; objects that
// exist throughout are listed exactly once either way.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	dir := o.Prefix[:strings.LastIndexByte(o.Prefix, '/')+1]
	delim := ""
	if o.Delimiter == "/" {
		delim = "/"
	}
	scope := dir + "\x00" + delim

	var objs []blob.ListObject
	snapID, inner, hasSnap := strings.Cut(o.PageToken, ".")
	if o.PageToken != "" {
		if !hasSnap {
			return nil, blob.Errorf(driver.OpList, o.Prefix, blob.ErrInvalidArgument, "malformed page token")
		}
		o.PageToken = inner
		objs = s.snapshots.get(snapID, scope)
	}
	if _, err := driver.Paginate(nil, &o); err != nil {
		return nil, err // a malformed token, before any request
	}
	if objs == nil {
		if err := s.waitWarm(ctx, driver.OpList, o.Prefix); err != nil {
			return nil, err
		}
		var err error
		if objs, err = s.listDir(ctx, dir, delim); err != nil {
			return nil, driver.WrapError(driver.OpList, o.Prefix, err, s.classify)
		}
		snapID = ""
	}
	page, err := driver.Paginate(objs, &o)
	if err != nil {
		return nil, err
	}
	if page.NextPageToken != "" {
		if snapID == "" && s.opts.ListSnapshotTTL > 0 {
			snapID = s.snapshots.put(scope, objs, s.opts.ListSnapshotTTL)
		}
		page.NextPageToken = snapID + "." + page.NextPageToken
	}
	return page, nil
}

// listDir lists everything under dir (a prefix ending in "/", or ""), one
// level when delim is "/", in the bucket's order.
func (s *Store) listDir(ctx context.Context, dir, delim string) ([]blob.ListObject, error) {
	in := &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		// Keys may hold characters XML 1.0 cannot carry.
		EncodingType: types.EncodingTypeUrl,
	}
	if dir != "" {
		in.Prefix = aws.String(dir)
	}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	var objs []blob.ListObject
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx, s.session)
		if err != nil {
			return nil, err
		}
		for _, c := range out.Contents {
			k, err := url.QueryUnescape(aws.ToString(c.Key))
			if err != nil {
				return nil, err
			}
			objs = append(objs, blob.ListObject{Key: k, Size: aws.ToInt64(c.Size), ModTime: aws.ToTime(c.LastModified),
				Generation: aws.ToString(c.ETag)})
		}
		for _, cp := range out.CommonPrefixes {
			k, err := url.QueryUnescape(aws.ToString(cp.Prefix))
			if err != nil {
				return nil, err
			}
			objs = append(objs, blob.ListObject{Key: k, IsDir: true})
		}
	}
	return objs, nil
}

// snapshotCache holds recent directory listings for their continuation
// pages, a few at a time.
type snapshotCache struct {
	mu    sync.Mutex
	items map[string]*snapshot
}

type snapshot struct {
	scope   string
	objs    []blob.ListObject
	expires time.Time
}

const maxSnapshots = 16

func (c *snapshotCache) get(id, scope string) []blob.ListObject {
	c.mu.Lock()
	defer c.mu.Unlock()
	sn := c.items[id]
	if sn == nil || sn.scope != scope || time.Now().After(sn.expires) {
		return nil
	}
	return sn.objs
}

func (c *snapshotCache) put(scope string, objs []blob.ListObject, ttl time.Duration) string {
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[string]*snapshot{}
	}
	var oldest string
	for k, sn := range c.items {
		if now.After(sn.expires) {
			delete(c.items, k)
		} else if oldest == "" || sn.expires.Before(c.items[oldest].expires) {
			oldest = k
		}
	}
	if len(c.items) >= maxSnapshots {
		delete(c.items, oldest)
	}
	if objs == nil {
		objs = []blob.ListObject{} // nil means "not cached" to get
	}
	c.items[id] = &snapshot{scope: scope, objs: objs, expires: now.Add(ttl)}
	return id
}
