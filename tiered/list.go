package tiered

import (
	"cmp"
	"context"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List merges one page of each tier. Hot is listed before cold: an object
// moved after hot's listing was already in cold before it, so an object that
// exists for the whole listing is never missed, with one exception: a key
// in cold only when hot is listed, replaced in hot and then deleted before
// cold is listed, is missed (the Delete removes the copy the new version
// shadows first), though the Delete may return only after the listing.
// Reads and Stats ask both tiers again for that reason; a listing would
// have to list hot twice. An object in both tiers (mid
// move, or overwritten after a move) appears once, with hot's attributes.
// Objects listed from cold only have an empty Generation (cold listings do
// not carry the metadata that holds it); Stat returns it.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	// A bad prefix or page size is refused before either tier is asked.
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	after, err := driver.ListStart(&o)
	if err != nil {
		return nil, err
	}
	size := o.PageSize
	for {
		page, bound, err := s.listOnce(ctx, &blob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, StartAfter: after, PageSize: size})
		if err != nil || len(page.Objects) > 0 || bound == "" {
			return page, err
		}
		// A page of markers only: go on after them rather than return an
		// empty page that is not the last.
		after = bound
	}
}

// listOnce merges one page of each tier (and of the keys packs serve). bound,
// when not empty, is the last key a source listed before it cut its page:
// entries after it are unknown for that source, so the merged page stops
// there.
func (s *Store) listOnce(ctx context.Context, inner *blob.ListOptions) (page *blob.ListPage, bound string, err error) {
	hp, err := s.hot.List(ctx, inner)
	if err != nil {
		return nil, "", err
	}
	// Packs and cold's own objects are listed after hot, for the reason
	// reads ask them after hot; the two at once, as neither orders the
	// other (a listing of the pack log, when the catalog needs one, and
	// cold's listing are each a regional round trip).
	var cp *blob.ListPage
	pp := &blob.ListPage{}
	var cerr error
	coldDone := make(chan struct{})
	go func() {
		defer close(coldDone)
		cp, cerr = s.cold.List(ctx, inner)
	}()
	// Hot's stale copies are set aside before what packs serve is read,
	// and the catalog is brought up to date after hot's last answer: a key
	// filterStale drops (a pack holds its version, or it was retired from
	// hot since the listing) is in a pack the catalog packedPage reads
	// already has. Read the other way round, a key whose first pack landed
	// in between was in neither.
	hotObjs, err := s.filterStale(ctx, hp.Objects)
	if err == nil {
		err = s.catalog.Sync(ctx, s.settled())
	}
	if err == nil {
		pp, err = s.packedPage(ctx, inner)
	}
	<-coldDone
	err = cmp.Or(err, cerr)
	if err != nil {
		return nil, "", err
	}
	// In order of precedence: hot's attributes win, then a pack's.
	sources := []*blob.ListPage{hp, pp, cp}
	for _, p := range sources {
		if p.NextPageToken != "" && len(p.Objects) > 0 {
			if last := p.Objects[len(p.Objects)-1].Key; bound == "" || last < bound {
				bound = last
			}
		}
	}
	// Hot's stale copies are set aside once hot's page has set the bound.
	hp.Objects = hotObjs
	graves, err := s.gravesIn(ctx, hp.Objects)
	if err != nil {
		return nil, "", err
	}
	size := inner.PageSize
	page = &blob.ListPage{Objects: make([]blob.ListObject, 0, min(size, len(hp.Objects)+len(pp.Objects)+len(cp.Objects)))}
	lists := [][]blob.ListObject{hp.Objects, pp.Objects, cp.Objects}
	more := false
	for {
		first := -1
		for i, l := range lists {
			if len(l) > 0 && (first < 0 || l[0].Key < lists[first][0].Key) {
				first = i
			}
		}
		if first < 0 {
			break
		}
		next := lists[first][0]
		for i, l := range lists {
			if len(l) > 0 && l[0].Key == next.Key {
				lists[i] = l[1:]
			}
		}
		if first > 0 {
			next.Generation = ""
		}
		if bound != "" && next.Key > bound {
			more = true
			break
		}
		if isMarker(next.Key) || graves[next.Key] {
			continue
		}
		if next.IsDir && first == 0 {
			// A directory hot shows may hold nothing but graves.
			live, err := s.dirLive(ctx, next.Key)
			if err != nil {
				return nil, "", err
			}
			if !live {
				continue
			}
		}
		if len(page.Objects) == size {
			more = true
			break
		}
		page.Objects = append(page.Objects, next)
	}
	if bound != "" {
		more = true
	}
	if more && len(page.Objects) > 0 {
		page.NextPageToken = driver.EncodePageToken(page.Objects[len(page.Objects)-1].Key)
	}
	return page, bound, nil
}

// packedPage lists, like a store's List, the keys packs serve: a page of at
// most inner.PageSize entries after inner.StartAfter, common prefixes
// grouped at inner.Delimiter.
func (s *Store) packedPage(ctx context.Context, inner *blob.ListOptions) (*blob.ListPage, error) {
	page := &blob.ListPage{}
	after := inner.StartAfter
	for {
		batch, err := s.catalog.Keys(ctx, inner.Prefix, after, inner.PageSize+1)
		if err != nil {
			return nil, err
		}
		for _, p := range batch {
			after = p.Entry.Key
			o := blob.ListObject{Key: p.Entry.Key, Size: p.Entry.Len, ModTime: p.Entry.Attrs.ModTime, MD5: p.Entry.Attrs.MD5}
			if inner.Delimiter != "" {
				rest := strings.TrimPrefix(o.Key, inner.Prefix)
				if i := strings.Index(rest, inner.Delimiter); i >= 0 {
					o = blob.ListObject{Key: inner.Prefix + rest[:i+len(inner.Delimiter)], IsDir: true}
					if n := len(page.Objects); n > 0 && page.Objects[n-1].Key == o.Key {
						continue
					}
					if o.Key <= inner.StartAfter {
						continue
					}
				}
			}
			if len(page.Objects) == inner.PageSize {
				page.NextPageToken = driver.EncodePageToken(page.Objects[len(page.Objects)-1].Key)
				return page, nil
			}
			page.Objects = append(page.Objects, o)
		}
		if len(batch) <= inner.PageSize {
			return page, nil
		}
	}
}
