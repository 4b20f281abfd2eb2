package quorum

import (
	"context"
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
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	if s.closed.Load() {
		return nil, &blob.Error{Op: "list", Key: o.Prefix, Kind: blob.ErrClosed}
	}
	if o.Prefix != "" {
		if err := blob.ValidateKey("list", o.Prefix); err != nil {
			return nil, err
		}
	}
	if o.PageSize < 0 {
		return nil, blob.Errorf("list", o.Prefix, blob.ErrInvalidArgument, "negative page size %d", o.PageSize)
	}
	after := o.StartAfter
	if o.PageToken != "" {
		k, err := driver.DecodePageToken(o.PageToken)
		if err != nil {
			return nil, err
		}
		after = max(after, k)
	}
	size := o.PageSize
	if size == 0 {
		size = blob.DefaultPageSize
	}
	ro := blob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, StartAfter: after, PageSize: size}
	pages, err := s.listReplicas(ctx, &ro)
	if err != nil {
		return nil, err
	}
	merged := map[string]blob.ListObject{}
	bound, bounded := "", false
	for _, p := range pages {
		for _, obj := range p.Objects {
			if old, ok := merged[obj.Key]; !ok || obj.ModTime.After(old.ModTime) {
				obj.Generation = ""
				merged[obj.Key] = obj
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
		obj := merged[k]
		if !obj.IsDir && !s.listable(ctx, k) {
			continue
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

// listable filters a replica's entry through what this process knows: a key
// it deleted, or whose only copies are failed writes, is checked with a
// quorum Stat (rare: only while the replicas disagree).
func (s *Store) listable(ctx context.Context, key string) bool {
	st := s.snapshot(key)
	if st == nil || (st.latest != "" && !st.deleted) {
		return true
	}
	if st.deleted && st.flying == 0 && len(st.failed) == 0 {
		return false
	}
	_, err := s.Stat(ctx, key)
	return err == nil
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
				if blobErrIs(x.err, blob.ErrInvalidArgument) {
					return nil, x.err
				}
				errs = append(errs, x.err.Error())
				continue
			}
			pages = append(pages, x.p)
			if len(pages) == s.nf && grace == nil {
				t := time.NewTimer(s.hedgeDelay(rs[0]))
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			return pages, nil
		case <-ctx.Done():
			return nil, driver.WrapError("list", o.Prefix, ctx.Err(), nil)
		}
	}
	if len(pages) < s.nf {
		return nil, blob.Errorf("list", o.Prefix, nil, "%w: %d of %d replicas listed, %d needed: %s", ErrNoQuorum, len(pages), len(rs), s.nf, strings.Join(errs, "; "))
	}
	return pages, nil
}
