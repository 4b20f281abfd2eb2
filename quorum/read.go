package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// prefetch is how much of a read the hedged attempt reads before it counts as
// an answer: small objects (log segments) are hedged whole, larger ones at
// least up to their first bytes.
const prefetch = 512 << 10

type statAnswer struct {
	r     *replica
	attrs *blob.Attributes
	err   error
}

// statAll stats key on rs in parallel and returns every answer.
func (s *Store) statAll(ctx context.Context, key string, rs []*replica) []statAnswer {
	ch := make(chan statAnswer, len(rs))
	for _, r := range rs {
		go func() {
			start := time.Now()
			a, err := r.s.Stat(ctx, key)
			s.observe(r, time.Since(start), err, false)
			ch <- statAnswer{r, a, err}
		}()
	}
	out := make([]statAnswer, 0, len(rs))
	for range rs {
		out = append(out, <-ch)
	}
	return out
}

type attempt struct {
	r      *replica
	val    any
	tok    string
	err    error
	cancel context.CancelFunc
}

// hedged asks replicas fastest first, asking the next one when the current one
// is slower than its hedge delay or fails, and returns the first answer st
// accepts. NotFound wins only once s.nf replicas said it.
func (s *Store) hedged(ctx context.Context, op, key string, rs []*replica, st *keyState,
	try func(ctx context.Context, r *replica) (val any, tok string, err error), release func(any)) (any, *replica, error) {
	results := make(chan attempt, len(rs))
	next, inflight, nf := 0, 0, 0
	var lastErr error
	launch := func() time.Duration {
		r := rs[next]
		next++
		inflight++
		actx, cancel := context.WithCancel(ctx)
		go func() {
			start := time.Now()
			v, tok, err := try(actx, r)
			s.observe(r, time.Since(start), err, actx.Err() != nil && ctx.Err() == nil)
			results <- attempt{r, v, tok, err, cancel}
		}()
		return s.hedgeDelay(r)
	}
	finish := func() {
		if inflight == 0 {
			return
		}
		go func(n int) {
			for range n {
				a := <-results
				a.cancel()
				if a.err == nil && release != nil {
					release(a.val)
				}
			}
		}(inflight)
	}
	timer := time.NewTimer(launch())
	defer timer.Stop()
	for {
		var tc <-chan time.Time
		if s.opts.HedgeDelay >= 0 && next < len(rs) {
			tc = timer.C
		}
		select {
		case <-tc:
			s.stats.hedges.Add(1)
			timer.Reset(launch())
			continue
		case a := <-results:
			inflight--
			switch {
			case a.err == nil && st.acceptFound(a.tok):
				finish()
				// The winner's context lives as long as its reader.
				return withCancel(a.val, a.cancel), a.r, nil
			case a.err == nil:
				a.cancel()
				if release != nil {
					release(a.val)
				}
				lastErr = &blob.Error{Op: op, Key: key, Err: fmt.Errorf("replica %d: %w", a.r.idx, errUnservable)}
			case errors.Is(a.err, blob.ErrNotFound) && st.acceptNotFound():
				a.cancel()
				if nf++; nf >= s.nf {
					finish()
					return nil, nil, &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound}
				}
			default:
				a.cancel()
				if errors.Is(a.err, blob.ErrInvalidArgument) || errors.Is(a.err, blob.ErrInvalidKey) {
					finish()
					return nil, nil, a.err
				}
				lastErr = a.err
			}
			if next < len(rs) {
				timer.Reset(launch())
			} else if inflight == 0 {
				if err := ctx.Err(); err != nil {
					return nil, nil, driver.WrapError(op, key, err, nil)
				}
				err := fmt.Errorf("%w: %d of %d replicas said not found, %d needed; last error: %v", ErrNoQuorum, nf, len(rs), s.nf, lastErr)
				if errors.Is(lastErr, errUnservable) {
					// Only this, not the replica's own error: a replica's
					// NotFound must not pass for the quorum's.
					err = fmt.Errorf("%w (%w)", err, errUnservable)
				}
				return nil, nil, &blob.Error{Op: op, Key: key, Err: err}
			}
		case <-ctx.Done():
			finish()
			return nil, nil, driver.WrapError(op, key, ctx.Err(), nil)
		}
	}
}

func withCancel(v any, cancel context.CancelFunc) any {
	if r, ok := v.(*reader); ok {
		r.cancel = cancel
		return r
	}
	cancel()
	return v
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check("stat", key); err != nil {
		return nil, err
	}
	return settle(ctx, func() (*blob.Attributes, error) { return s.stat(ctx, key) })
}

func (s *Store) stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if s.consistency(ctx) == ReadMajority {
		a, _, err := s.statMajority(ctx, key)
		if err != nil {
			return nil, err
		}
		return publicAttrs(a), nil
	}
	v, _, err := s.hedged(ctx, "stat", key, s.order(), s.snapshot(key), func(ctx context.Context, r *replica) (any, string, error) {
		a, err := r.s.Stat(ctx, key)
		return a, tokenOf(a), err
	}, nil)
	if err != nil {
		return nil, err
	}
	return publicAttrs(v.(*blob.Attributes)), nil
}

// statMajority stats a read quorum and returns the newest version this store
// may serve, with the replicas holding it. Replicas that answered with
// anything else are queued for repair.
func (s *Store) statMajority(ctx context.Context, key string) (*blob.Attributes, map[*replica]*blob.Attributes, error) {
	st := s.snapshot(key)
	rs := s.order()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan statAnswer, len(rs))
	for _, r := range rs {
		go func() {
			start := time.Now()
			a, err := r.s.Stat(ctx, key)
			s.observe(r, time.Since(start), err, ctx.Err() != nil)
			ch <- statAnswer{r, a, err}
		}()
	}
	var found []statAnswer
	answered, nf := 0, 0
	var lastErr error
	for got := 0; got < len(rs); got++ {
		a := <-ch
		switch {
		case a.err == nil && st.acceptFound(tokenOf(a.attrs)):
			found = append(found, a)
			answered++
		case a.err == nil:
			answered++
		case errors.Is(a.err, blob.ErrNotFound):
			answered++
			if st.acceptNotFound() {
				nf++
			}
		default:
			lastErr = a.err
		}
		if answered >= s.r && (len(found) > 0 || nf >= s.nf) {
			break
		}
	}
	if len(found) == 0 {
		if nf >= s.nf {
			return nil, nil, &blob.Error{Op: "stat", Key: key, Kind: blob.ErrNotFound}
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, driver.WrapError("stat", key, err, nil)
		}
		return nil, nil, &blob.Error{Op: "stat", Key: key, Err: fmt.Errorf("%w: %d of %d answered; last error: %v", ErrNoQuorum, answered, len(rs), lastErr)}
	}
	newest := found[0]
	for _, a := range found[1:] {
		if tokenOf(a.attrs) > tokenOf(newest.attrs) {
			newest = a
		}
	}
	holders := map[*replica]*blob.Attributes{}
	for _, a := range found {
		if tokenOf(a.attrs) == tokenOf(newest.attrs) {
			holders[a.r] = a.attrs
		}
	}
	if len(holders) < answered {
		s.stats.readRepairs.Add(1)
		s.rq.add(key)
	}
	return newest.attrs, holders, nil
}

// NewRangeReader implements blob.Store.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check("read", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf("read", key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	return settle(ctx, func() (blob.Reader, error) { return s.newRangeReader(ctx, key, offset, length) })
}

// errUnservable: a replica holds a version this store must not serve (older
// than one it acknowledged, or a failed write's).
var errUnservable = errors.New("replica holds a version this store must not serve")

// settle retries a read whose every replica held a version this store must
// not serve: that happens while overwrites of the key are in flight, and
// lasts about as long as a write, so a few short waits let it settle
// instead of failing the read.
func settle[T any](ctx context.Context, read func() (T, error)) (T, error) {
	delay := time.Millisecond
	for attempt := 0; ; attempt++ {
		v, err := read()
		if err == nil || !errors.Is(err, errUnservable) || attempt == 6 {
			return v, err
		}
		select {
		case <-time.After(delay):
			delay *= 2
		case <-ctx.Done():
			return v, err
		}
	}
}

func (s *Store) newRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	rs, st := s.order(), s.snapshot(key)
	var want map[*replica]*blob.Attributes
	if s.consistency(ctx) == ReadMajority {
		_, holders, err := s.statMajority(ctx, key)
		if err != nil {
			return nil, err
		}
		// Holders of the newest version first; the others only if a write
		// replaced it on every holder meanwhile (then the replica's version
		// was written later in real time, and st still vets it).
		want = holders
		var hs, rest []*replica
		for _, r := range rs {
			if holders[r] != nil {
				hs = append(hs, r)
			} else {
				rest = append(rest, r)
			}
		}
		rs = append(hs, rest...)
	}
	release := func(v any) { v.(*reader).Close() }
	v, _, err := s.hedged(ctx, "read", key, rs, st, func(ctx context.Context, r *replica) (any, string, error) {
		// Replica readers carry no metadata, so when the version matters the
		// attempt stats first and checks that the reader opened the same
		// object, trying again if a write replaced it in between.
		var rd blob.Reader
		var sa *blob.Attributes
		for try := 0; ; try++ {
			sa = nil
			if try == 0 {
				sa = want[r]
			}
			if sa == nil && (st != nil || want != nil) {
				a, err := r.s.Stat(ctx, key)
				if err != nil {
					return nil, "", err
				}
				if !st.acceptFound(tokenOf(a)) {
					return nil, "", &blob.Error{Op: "read", Key: key, Err: fmt.Errorf("replica %d: %w", r.idx, errUnservable)}
				}
				sa = a
			}
			var err error
			if rd, err = r.s.NewRangeReader(ctx, key, offset, length); err != nil {
				return nil, "", err
			}
			ra := rd.Attributes()
			if sa == nil || (ra.Size == sa.Size && (ra.ModTime.IsZero() || ra.ModTime.Equal(sa.ModTime))) {
				break
			}
			rd.Close()
			if try == 3 {
				return nil, "", blob.Errorf("read", key, nil, "replica %d keeps changing while opening", r.idx)
			}
		}
		n := int64(prefetch)
		if length >= 0 && length < n {
			n = length
		}
		out := &reader{r: rd, key: key, attrs: sa}
		var buf bytes.Buffer
		if _, err := io.CopyN(&buf, rd, n); err != nil && err != io.EOF {
			rd.Close()
			return nil, "", err
		}
		out.head = buf.Bytes()
		tok := ""
		if sa != nil {
			tok = tokenOf(sa)
		}
		return out, tok, nil
	}, release)
	if err != nil {
		return nil, err
	}
	return v.(*reader), nil
}

type reader struct {
	r      blob.Reader
	key    string
	head   []byte
	attrs  *blob.Attributes // from Stat, when the read checked the version
	cancel context.CancelFunc
	closed bool
}

func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, &blob.Error{Op: "read", Key: r.key, Kind: blob.ErrClosed}
	}
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	return r.r.Read(p)
}

func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.r.Close()
	if r.cancel != nil {
		r.cancel()
	}
	return err
}

func (r *reader) Attributes() *blob.Attributes {
	if r.attrs != nil {
		a := publicAttrs(r.attrs)
		return a
	}
	a := *r.r.Attributes()
	if _, ok := a.Metadata[VersionKey]; ok {
		return publicAttrs(&a)
	}
	// The replica's reader carries no metadata, so no quorum version: its
	// generation is the replica's own, which no other replica shares and
	// no quorum call accepts. Say nothing rather than something wrong.
	a.Generation = ""
	return &a
}
