package quorum

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// List implements blob.Store by merging one page from each replica. Every
// acknowledged object is on at least W replicas, so any N-W+1 answers hold
// it: List waits for that many, gives the rest a hedge delay, and returns the
// union, cut where the shortest replica page that has more ends.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	after, err := driver.ListStart(&o)
	if err != nil {
		return nil, err
	}
	size := o.PageSize
	ro := blob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, StartAfter: after, PageSize: size}
	pages, err := s.listReplicas(ctx, &ro)
	if err != nil {
		return nil, err
	}
	type entry struct {
		obj   blob.ListObject
		n     int  // pages listing it
		check bool // pages disagree, or it may be a tombstone: ask a majority
	}
	merged := map[string]*entry{}
	bound, bounded := "", false
	for _, p := range pages {
		for _, obj := range p.Objects {
			obj.Generation = ""
			e := merged[obj.Key]
			if e == nil {
				e = &entry{obj: obj}
				merged[obj.Key] = e
			} else if !obj.IsDir && (obj.Size != e.obj.Size || string(obj.MD5) != string(e.obj.MD5)) {
				e.check = true
			}
			e.n++
			if !obj.IsDir && maybeHidden(obj) {
				e.check = true
			}
		}
		if p.NextPageToken != "" && len(p.Objects) > 0 {
			last := p.Objects[len(p.Objects)-1].Key
			if !bounded || last < bound {
				bound, bounded = last, true
			}
		}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		if k > after && (!bounded || k <= bound) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	page := &blob.ListPage{}
	for _, k := range keys {
		e := merged[k]
		obj := e.obj
		if obj.IsDir {
			// Replica listings group tombstones too: the prefix is shown
			// only if a value lies under it.
			ok, err := s.holdsValue(ctx, obj.Key)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		if !obj.IsDir && (e.check || e.n < len(pages)) {
			// Replicas disagree (a write in flight or missed, a tombstone):
			// a majority decides, as for Stat.
			a, err := s.Stat(WithConsistency(ctx, ReadMajority), k)
			if err != nil {
				if errors.Is(err, blob.ErrNotFound) {
					continue
				}
				return nil, err
			}
			obj.Size, obj.ModTime, obj.MD5 = a.Size, a.ModTime, a.MD5
		}
		if len(page.Objects) == size {
			page.NextPageToken = driver.EncodePageToken(page.Objects[size-1].Key)
			return page, nil
		}
		page.Objects = append(page.Objects, obj)
	}
	if bounded {
		last := bound
		if n := len(page.Objects); n > 0 {
			last = page.Objects[n-1].Key
		}
		page.NextPageToken = driver.EncodePageToken(last)
	}
	return page, nil
}

func (s *Store) listReplicas(ctx context.Context, o *blob.ListOptions) ([]*blob.ListPage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct {
		p   *blob.ListPage
		err error
	}
	rs := s.order()
	ch := make(chan res, len(rs))
	for _, r := range rs {
		go func() {
			start := time.Now()
			p, err := r.s.List(ctx, o)
			s.observe(r, time.Since(start), err, ctx.Err() != nil)
			ch <- res{p, err}
		}()
	}
	var pages []*blob.ListPage
	var errs []string
	var grace <-chan time.Time
	for got := 0; got < len(rs); got++ {
		select {
		case x := <-ch:
			if x.err != nil {
				if errors.Is(x.err, blob.ErrInvalidArgument) {
					return nil, x.err
				}
				errs = append(errs, x.err.Error())
				continue
			}
			pages = append(pages, x.p)
			if len(pages) == s.listQuorum() && grace == nil {
				t := time.NewTimer(s.hedgeDelay(rs[0]))
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			return pages, nil
		case <-ctx.Done():
			return nil, driver.WrapError(driver.OpList, o.Prefix, ctx.Err(), nil)
		}
	}
	if len(pages) < s.listQuorum() {
		return nil, blob.Errorf(driver.OpList, o.Prefix, nil, "%w: %d of %d replicas listed, %d needed: %s", ErrNoQuorum, len(pages), len(rs), s.listQuorum(), strings.Join(errs, "; "))
	}
	return pages, nil
}

// listQuorum is how many replica pages a listing needs: N-W+1 of them hold
// every acknowledged object.
func (s *Store) listQuorum() int { return len(s.reps) - s.w + 1 }

// holdsValue reports whether some value (not a tombstone) has a key under
// prefix: one listing of the replicas in the common case.
func (s *Store) holdsValue(ctx context.Context, prefix string) (bool, error) {
	o := &blob.ListOptions{Prefix: prefix, PageSize: 32}
	for {
		p, err := s.List(ctx, o)
		if err != nil {
			return false, err
		}
		if len(p.Objects) > 0 {
			return true, nil
		}
		if p.NextPageToken == "" {
			return false, nil
		}
		o.PageToken = p.NextPageToken
	}
}
