package tiered

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// NewRangeReader reads from hot and, if hot does not have key, from cold.
// Hot is asked first, and cold only once hot has answered: cold is written
// before hot is deleted, so a reader that misses in hot after a move finds
// the object in cold, and a cold read that begins after hot's miss sees every
// move that deleted from hot before it. (Asking cold at the same time as hot
// would not: a cold answer given before a newer version's move completed, and
// a hot miss after it, would serve the older version.)
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	ahead := s.startReadAhead(ctx, key, offset, length)
	r, err := s.readOnce(ctx, key, offset, length, ahead)
	if !errors.Is(err, blob.ErrNotFound) {
		return r, err
	}
	// Missed in both tiers, which proves the key absent only if what cold
	// held when hot missed was deleted as the key's deletion. A Delete of
	// a version put in hot after that miss first deletes the older copy it
	// shadows in cold (so that the copy never shows once the version is
	// gone): a read that missed in hot before the put and in cold after
	// that deletion saw a key that existed throughout. Asked again, hot
	// has the new version, or has lost it since to a Delete that left
	// nothing in either tier; a move of it would have put its copy in
	// cold first, where the second look finds it.
	s.stats.missesChecked.Add(1)
	return s.readOnce(ctx, key, offset, length, nil)
}

// readOnce asks hot, then, if hot does not have key, cold.
func (s *Store) readOnce(ctx context.Context, key string, offset, length int64, ahead *readAhead) (blob.Reader, error) {
	r, err := s.hot.NewRangeReader(ctx, key, offset, length)
	since := s.settled()
	if err == nil {
		grave, gerr := s.readsGrave(ctx, key, r.Attributes())
		if gerr != nil || grave {
			r.Close()
			ahead.drop()
			if gerr != nil {
				return nil, gerr
			}
			return nil, notFound(driver.OpRead, key)
		}
	}
	if err == nil {
		stale, serr := s.staleHot(ctx, key, r.Attributes().Generation, since)
		switch {
		case serr != nil:
			r.Close()
			ahead.drop()
			return nil, serr
		case stale:
			// A copy a retirement left: the pack log has the key.
			r.Close()
			s.stats.staleHot.Add(1)
			return s.readCold(ctx, key, offset, length, since, ahead)
		}
		ahead.drop()
		return &fallbackReader{s: s, ctx: ctx, key: key, off: offset, n: length, r: r}, nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		ahead.drop()
		return nil, err
	}
	return s.readCold(ctx, key, offset, length, since, ahead)
}

// readAhead is the part of a read of a key the catalog has in a cached pack
// index that runs while hot is asked: a read of the cached entry's range
// and, if the catalog's last listing is older than half hotDeleteDelay, a
// listing of the pack log.
type readAhead struct {
	cancel context.CancelFunc
	guess  packlog.Packed
	spec   chan specRead
}

type specRead struct {
	r   blob.Reader
	err error
}

// startReadAhead starts a readAhead for key if a cached pack index has a
// live entry of it (a key moved out of hot, whose next read is likely to
// miss there); nil otherwise.
func (s *Store) startReadAhead(ctx context.Context, key string, offset, length int64) *readAhead {
	guess, ok := s.catalog.Cached(key)
	if !ok {
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	a := &readAhead{cancel: cancel, guess: guess, spec: make(chan specRead, 1)}
	if start := time.Now(); start.Sub(s.catalog.LastRefresh()) > s.hotDeleteDelay()/2 {
		// The listing a miss would need, begun now (a failed one is made
		// again after hot's answer).
		go s.catalog.Sync(sctx, start)
	}
	go func() {
		r, err := s.readPacked(sctx, guess, offset, length)
		a.spec <- specRead{r, err}
	}()
	return a
}

// take returns the speculative read if it read entry p, and drops it
// otherwise; nil if it failed or was taken.
func (a *readAhead) take(p packlog.Packed) blob.Reader {
	if a == nil || a.spec == nil {
		return nil
	}
	res := <-a.spec
	a.spec = nil
	if res.err == nil && p.Pack.Name == a.guess.Pack.Name && p.Entry.Off == a.guess.Entry.Off {
		return &cancelReader{Reader: res.r, cancel: a.cancel}
	}
	if res.r != nil {
		res.r.Close()
	}
	return nil
}

// drop abandons the read ahead.
func (a *readAhead) drop() {
	if a == nil {
		return
	}
	a.cancel()
	if a.spec != nil {
		if res := <-a.spec; res.r != nil {
			res.r.Close()
		}
		a.spec = nil
	}
}

// readCold reads key from cold, after hot missed: from the pack that serves
// it, if one does, else from the cold object of its name. The catalog is
// brought up to date first, to include every log object committed before
// since (see settled), so a pack whose objects left hot before the miss,
// and a tombstone of a Delete acknowledged before the read began, are seen.
//
// A read ahead (the pack the catalog already knew, read while hot was
// asked) is kept if the catalog still names the same entry afterwards: a
// pack's bytes never change, so it is the read that would have followed. A
// packed read then costs about one cold round trip, alongside hot's.
func (s *Store) readCold(ctx context.Context, key string, offset, length int64, since time.Time, ahead *readAhead) (blob.Reader, error) {
	for attempt := 0; ; attempt++ {
		if err := s.catalog.Sync(ctx, since); err != nil {
			ahead.drop()
			return nil, err
		}
		p, ok, err := s.catalog.Lookup(ctx, key)
		if err == nil {
			// A damaged pack or tombstone may hold a newer version of
			// key, or have killed the one found.
			err = s.catalog.DamagedFor(driver.OpRead, key)
		}
		if err != nil {
			ahead.drop()
			return nil, err
		}
		if ok {
			if r := ahead.take(p); r != nil {
				return r, nil
			}
		}
		ahead.drop()
		if !ok {
			break
		}
		r, err := s.readPacked(ctx, p, offset, length)
		if errors.Is(err, blob.ErrNotFound) && attempt == 0 {
			// The pack was rewritten and removed: its successor was
			// committed before, and a full listing finds it.
			if err := s.catalog.RefreshFull(ctx); err != nil {
				return nil, err
			}
			since = time.Time{}
			continue
		}
		return r, err
	}
	r, err := s.cold.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &coldReader{Reader: r}, nil
}

// cancelReader cancels the context of a read when it is closed.
type cancelReader struct {
	blob.Reader
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	err := r.Reader.Close()
	r.cancel()
	return err
}

// fallbackReader covers a hot store that reports a missing key only on the
// first Read (the contract allows it): it then reads cold instead.
type fallbackReader struct {
	s      *Store
	ctx    context.Context
	key    string
	off, n int64
	r      blob.Reader
	read   bool
}

func (f *fallbackReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if !f.read && n == 0 && err != nil && errors.Is(err, blob.ErrNotFound) {
		f.read = true
		c, cerr := f.s.readCold(f.ctx, f.key, f.off, f.n, f.s.settled(), nil)
		if cerr != nil {
			return 0, cerr
		}
		f.r.Close()
		f.r = c
		return f.r.Read(p)
	}
	f.read = true
	return n, err
}

func (f *fallbackReader) Close() error { return f.r.Close() }

func (f *fallbackReader) Attributes() *blob.Attributes { return f.r.Attributes() }

// coldReader shows a cold object's attributes as the tiered store's.
type coldReader struct{ blob.Reader }

func (r *coldReader) Attributes() *blob.Attributes { return fromCold(r.Reader.Attributes()) }

// fromCold returns a cold object's attributes with the generation it had in
// hot and without the bookkeeping metadata.
func fromCold(a *blob.Attributes) *blob.Attributes {
	if a == nil {
		return nil
	}
	out := *a
	if g, ok := a.Metadata[generationKey]; ok {
		out.Generation = g
		out.Metadata = maps.Clone(a.Metadata)
		delete(out.Metadata, generationKey)
		if len(out.Metadata) == 0 {
			out.Metadata = nil
		}
	} else if a.Generation != "" {
		out.Generation = coldGenerationPrefix + a.Generation
	}
	return &out
}

// Stat returns hot's attributes if hot has key, else cold's (with the
// generation the object had in hot).
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	a, err := s.statOnce(ctx, key)
	if !errors.Is(err, blob.ErrNotFound) {
		return a, err
	}
	s.stats.missesChecked.Add(1) // a miss in both tiers: see NewRangeReader
	return s.statOnce(ctx, key)
}

// statOnce asks hot, then, if hot does not have key, cold.
func (s *Store) statOnce(ctx context.Context, key string) (*blob.Attributes, error) {
	a, err := s.hotStat(ctx, key)
	if err == nil && isGrave(a) {
		return nil, notFound(driver.OpStat, key)
	}
	if err == nil || !errors.Is(err, blob.ErrNotFound) {
		return a, err
	}
	return s.coldStat(ctx, key, s.settled())
}

// coldStat returns the attributes of key's version in cold: the pack
// entry's, or the cold object's. The catalog includes every log object
// committed before since: settled() after a miss in hot, the present time
// for a check made before hot is asked.
func (s *Store) coldStat(ctx context.Context, key string, since time.Time) (*blob.Attributes, error) {
	if err := s.catalog.Sync(ctx, since); err != nil {
		return nil, err
	}
	p, ok, err := s.catalog.Lookup(ctx, key)
	if err == nil {
		err = s.catalog.DamagedFor(driver.OpStat, key)
	}
	if err != nil {
		return nil, err
	}
	if ok {
		a := *p.Entry.Attrs
		return &a, nil
	}
	a, err := s.cold.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return fromCold(a), nil
}
