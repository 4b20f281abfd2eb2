package quorum

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// survey stats key on every replica that is up and returns the answers once
// need replicas answered, giving the others a moment more (lateGrace).
func (s *Store) survey(ctx context.Context, key string, need int) ([]rstate, error) {
	rs := s.upReplicas(need)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	ch := make(chan rstate, len(rs))
	for _, r := range rs {
		go func() { ch <- s.statReplica(ctx, r, key) }()
	}
	var xs []rstate
	var errs []error
	var grace <-chan time.Time
	for got := 0; got < len(rs); got++ {
		var x rstate
		select {
		case x = <-ch:
		case <-grace:
			return xs, nil
		}
		if !x.ok() {
			errs = append(errs, fmt.Errorf("replica %d: %w", x.r.idx, x.err))
			if len(errs) > len(rs)-need {
				break
			}
			continue
		}
		xs = append(xs, x)
		if len(xs) >= need && grace == nil && len(xs) < len(rs) {
			t := time.NewTimer(s.lateGrace(time.Since(start)))
			defer t.Stop()
			grace = t.C
		}
	}
	if len(xs) >= need {
		return xs, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %d of %d replicas answered, %d needed: %v", ErrNoQuorum, len(xs), len(s.reps), need, errors.Join(errs...))
}

// settle returns the key's current version, chosen (accepted by a majority
// at one ballot), with the replicas that hold it and, when settling had to
// read it, its value. A version found on fewer replicas is finished first:
// its accept is replayed onto the replicas that have promised no higher
// ballot, and when that cannot reach a majority a consensus round decides
// (CASPaxos's read), so a version is only ever returned once no later read
// can miss it.
func (s *Store) settle(ctx context.Context, op, key string) (*rstate, *value, error) {
	// Bounded like a consensus round, so that no replay lands long after
	// the survey it was decided on (see InFlightBound).
	ctx, done := s.bounded(ctx, 0)
	defer done()
	for attempt := 0; ; attempt++ {
		xs, err := s.survey(ctx, key, s.maj)
		if err != nil && ctx.Err() != nil {
			return nil, nil, doneError(ctx, op, key, false, err)
		}
		if err != nil {
			return nil, nil, wrapOp(op, key, err)
		}
		// A replica whose bytes failed their checksum holds no version
		// until repair rewrites it.
		xs = slices.DeleteFunc(xs, func(x rstate) bool { return s.isCorrupt(key, x.r) })
		if len(xs) < s.maj {
			return nil, nil, blob.Errorf(op, key, nil, "%w: %d of %d replicas answered with verified state, %d needed", ErrNoQuorum, len(xs), len(s.reps), s.maj)
		}
		cur := highest(xs)
		if countAcc(xs, cur.acc) >= s.maj || cur.acc == "" {
			return cur, nil, nil
		}
		s.stats.readRepairs.Add(1)
		v, err := s.readValue(ctx, key, cur)
		if err == nil {
			if ok := s.replay(ctx, key, xs, cur, v); ok {
				return cur, v, nil
			}
		}
		if attempt == roundAttempts-1 {
			return nil, nil, blob.Errorf(op, key, nil, "%w: the key's replicas keep changing", ErrNoQuorum)
		}
		if ctx.Err() != nil {
			return nil, nil, doneError(ctx, op, key, false, err)
		}
		// Someone promised a higher ballot: a round of our own decides.
		if _, err := s.consensus(ctx, op, key, keep); err != nil {
			return nil, nil, err
		}
	}
}

// replay writes cur's value, at cur's ballot, onto the replicas in xs that
// accepted less and promised no more, and reports whether a majority then
// holds it. (A replayed accept is a duplicate of the accept its proposer
// sent, which Paxos tolerates.)
func (s *Store) replay(ctx context.Context, key string, xs []rstate, cur *rstate, v *value) bool {
	have := 0
	var todo []int
	for i, x := range xs {
		switch {
		case x.acc == cur.acc:
			have++
		case x.acc < cur.acc && x.prom <= cur.acc:
			todo = append(todo, i)
		}
	}
	if have+len(todo) < s.maj {
		return false
	}
	f := s.fanOut(ctx, key, len(todo), v.size(), func(ctx context.Context, i int) error {
		return s.writeReplica(ctx, key, &xs[todo[i]], v, cur.acc, cur.acc)
	})
	_, err := f.wait(s.maj-have, "")
	if err == nil {
		s.stats.repairs.Add(int64(s.maj - have))
	}
	return err == nil
}

func wrapOp(op, key string, err error) error {
	var be *blob.Error
	if errors.As(err, &be) {
		return err
	}
	return driver.WrapError(op, key, err, nil)
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	if s.consistency(ctx) == ReadFastest && !s.hasFloor(key) {
		if x, ok := s.statFastest(ctx, key); ok {
			return publicAttrs(x), nil
		}
	}
	cur, _, err := s.settle(ctx, "stat", key)
	if err != nil {
		return nil, err
	}
	if cur.gone() {
		return nil, &blob.Error{Op: driver.OpStat, Key: key, Kind: blob.ErrNotFound}
	}
	return publicAttrs(cur), nil
}

// statFastest asks the fastest replica, hedging to the next; it reports
// false when no replica showed a value (NotFound is decided by a majority).
func (s *Store) statFastest(ctx context.Context, key string) (*rstate, bool) {
	v, ok, done := s.hedged(ctx, func(ctx context.Context, r *replica) (any, bool) {
		x := s.statReplica(ctx, r, key)
		return &x, x.ok() && x.visible()
	}, nil)
	done()
	if !ok {
		return nil, false
	}
	return v.(*rstate), true
}

// hedged asks the replicas fastest first, the next one after a hedge delay
// or at once after a useless answer, and returns the first useful answer.
// Each attempt runs under a context of its own: the losers' are cancelled
// when one wins, the winner's is not (a reader it opened goes on reading
// under it), and done ends it once the caller is through with the answer.
func (s *Store) hedged(ctx context.Context, try func(ctx context.Context, r *replica) (any, bool), release func(any)) (v any, ok bool, done func()) {
	rs := s.order()
	type answer struct {
		i  int
		v  any
		ok bool
	}
	ch := make(chan answer, len(rs))
	cancels := make([]context.CancelFunc, 0, len(rs))
	next, inflight := 0, 0
	launch := func() {
		r, i := rs[next], next
		next++
		inflight++
		actx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		go func() {
			v, ok := try(actx, r)
			ch <- answer{i, v, ok}
		}()
	}
	finish := func(n, winner int) {
		for i, cancel := range cancels {
			if i != winner {
				cancel()
			}
		}
		go func() {
			for range n {
				if a := <-ch; a.ok && release != nil {
					release(a.v)
				}
			}
		}()
	}
	launch()
	timer := time.NewTimer(s.hedgeDelay(rs[0]))
	defer timer.Stop()
	for {
		var tc <-chan time.Time
		if s.opts.HedgeDelay >= 0 && next < len(rs) {
			tc = timer.C
		}
		select {
		case <-tc:
			s.stats.hedges.Add(1)
			launch()
			timer.Reset(s.hedgeDelay(rs[0]))
		case a := <-ch:
			inflight--
			if a.ok {
				finish(inflight, a.i)
				return a.v, true, cancels[a.i]
			}
			if next < len(rs) {
				launch()
				timer.Reset(s.hedgeDelay(rs[0]))
			} else if inflight == 0 {
				finish(0, -1)
				return nil, false, func() {}
			}
		case <-ctx.Done():
			finish(inflight, -1)
			return nil, false, func() {}
		}
	}
}

// NewRangeReader implements blob.Store.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	if s.consistency(ctx) == ReadFastest && !s.hasFloor(key) {
		v, ok, done := s.hedged(ctx, func(ctx context.Context, r *replica) (any, bool) {
			rd, err := s.readReplica(ctx, key, r, nil, offset, length)
			return rd, err == nil
		}, func(v any) { v.(*reader).Close() })
		if ok {
			rd := v.(*reader)
			inner := rd.cancel
			rd.cancel = func() { // the winner's context ends with the reader
				if inner != nil {
					inner()
				}
				done()
			}
			return rd, nil
		}
	}
	return s.readMajority(ctx, key, offset, length)
}

// readMajority serves the key's chosen version.
func (s *Store) readMajority(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	for attempt := 0; ; attempt++ {
		cur, v, err := s.settle(ctx, "read", key)
		if err != nil {
			return nil, err
		}
		if cur.gone() {
			return nil, &blob.Error{Op: driver.OpRead, Key: key, Kind: blob.ErrNotFound}
		}
		if v != nil {
			return bodyReader(key, cur, v.body, offset, length), nil
		}
		rd, err := s.readReplica(ctx, key, cur.r, cur, offset, length)
		if err == nil {
			return rd, nil
		}
		// A changed replica is read again; a corrupt one is skipped by
		// the next settling.
		if !errors.Is(err, errChanged) && !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrCorrupt) || attempt == roundAttempts-1 {
			return nil, wrapOp("read", key, err)
		}
	}
}

// readReplica opens a range of key on replica r and returns it with the
// version it belongs to. want, if set, is the version the read must get
// (errChanged otherwise); without it the replica is stat'ed alongside the
// read and any value it holds is served.
func (s *Store) readReplica(ctx context.Context, key string, r *replica, want *rstate, offset, length int64) (*reader, error) {
	rctx, cancel := context.WithCancel(ctx)
	st := want
	var stCh chan rstate
	if st == nil {
		stCh = make(chan rstate, 1)
		go func() { stCh <- s.statReplica(rctx, r, key) }()
	}
	start := time.Now()
	rd, err := r.s.NewRangeReader(rctx, key, offset, length)
	s.observe(r, time.Since(start), err, rctx.Err() != nil && ctx.Err() == nil)
	if stCh != nil {
		x := <-stCh
		st = &x
	}
	if err != nil {
		cancel()
		return nil, err
	}
	fail := func(err error) (*reader, error) {
		rd.Close()
		cancel()
		return nil, err
	}
	if !st.ok() {
		return fail(st.err)
	}
	if !st.visible() {
		return fail(&blob.Error{Op: driver.OpRead, Key: key, Kind: blob.ErrNotFound})
	}
	// The reader must have opened the version the stat describes. A Stat
	// made alongside the read may have seen a write that landed after the
	// reader opened, so only the reader's own attributes can prove that;
	// a Stat after the read proves it only against a version stat'ed
	// before the read began (want).
	if !sameObject(rd.Attributes(), st.attrs) {
		if want == nil {
			return fail(errChanged)
		}
		after := s.statReplica(rctx, r, key)
		if !after.ok() || after.attrs == nil || after.attrs.Generation != st.attrs.Generation {
			return fail(errChanged)
		}
	}
	if s.isCorrupt(key, r) {
		return fail(fmt.Errorf("replica %d: %w", r.idx, errCorruptBytes))
	}
	out := &reader{r: rd, key: key, attrs: publicAttrs(st), cancel: cancel}
	whole := offset == 0 && (length < 0 || length >= st.attrs.Size)
	if !whole && st.sum != "" && st.attrs.Size <= verifyPartsBelow {
		// Part of a small value is served from the whole of it, verified:
		// one more request, for a range read of at most a megabyte.
		rd.Close()
		if rd, err = r.s.NewRangeReader(rctx, key, 0, -1); err != nil {
			cancel()
			return nil, err
		}
		out.r = rd
		if !sameObject(rd.Attributes(), st.attrs) {
			return fail(errChanged)
		}
		b, err := io.ReadAll(rd)
		if err != nil {
			return fail(err)
		}
		v := &verifier{s: s, key: key, r: r, want: st.sum, size: st.attrs.Size}
		v.add(b)
		if err := v.check(); err != nil {
			return fail(err)
		}
		end := int64(len(b))
		if length >= 0 {
			end = min(end, offset+length)
		}
		out.head = b[min(offset, end):end]
		return out, nil
	}
	if whole && st.sum != "" {
		// A read of the whole value is verified as it is read: its last
		// Read fails with ErrCorrupt if the bytes do not match.
		out.verify = &verifier{s: s, key: key, r: r, want: st.sum, size: st.attrs.Size}
	}
	// Hedged reads answer with their first bytes in hand, so small objects
	// are hedged whole (and verified before they are served).
	n := int64(prefetch)
	if length >= 0 && length < n {
		n = length
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, rd, n); err != nil && err != io.EOF {
		return fail(err)
	}
	out.head = buf.Bytes()
	if out.verify != nil {
		out.verify.add(out.head)
		if int64(len(out.head)) == st.attrs.Size {
			if err := out.verify.check(); err != nil {
				return fail(err)
			}
			out.verify = nil
		}
	}
	return out, nil
}

// verifier checks a whole read's bytes against the value's checksum.
type verifier struct {
	s    *Store
	key  string
	r    *replica
	want string
	size int64
	n    int64
	crc  uint32
}

func (v *verifier) add(p []byte) {
	v.n += int64(len(p))
	v.crc = crc32.Update(v.crc, castagnoli, p)
}

// check reports whether the bytes read match, noting the replica as
// corrupt for repair if not.
func (v *verifier) check() error {
	if v.n == v.size && fmt.Sprintf("%08x", v.crc) == v.want {
		return nil
	}
	v.s.noteCorrupt(v.key, v.r)
	return &blob.Error{Op: driver.OpRead, Key: v.key, Kind: blob.ErrCorrupt, Err: fmt.Errorf("replica %d: %d bytes read of %d, checksum %08x, recorded %s", v.r.idx, v.n, v.size, v.crc, v.want)}
}

// prefetch is how much of a read the hedged attempt reads before it counts as
// an answer.
const prefetch = 512 << 10

// verifyPartsBelow: a range read of a value up to this size reads the whole
// value to verify its checksum; of a larger one, the range is served as
// read (a whole read of it is verified).
const verifyPartsBelow = 1 << 20

type reader struct {
	r      io.ReadCloser
	key    string
	head   []byte
	attrs  *blob.Attributes
	cancel context.CancelFunc
	closed bool
	verify *verifier // checks the bytes after head, when set
}

func bodyReader(key string, x *rstate, b *body, offset, length int64) *reader {
	return &reader{r: io.NopCloser(b.reader(offset, length)), key: key, attrs: publicAttrs(x)}
}

func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, driver.ClosedError(driver.OpRead, r.key)
	}
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	n, err := r.r.Read(p)
	if r.verify != nil {
		r.verify.add(p[:n])
		if err == io.EOF {
			if verr := r.verify.check(); verr != nil {
				return n, verr
			}
		}
	}
	return n, err
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

func (r *reader) Attributes() *blob.Attributes { return r.attrs }
