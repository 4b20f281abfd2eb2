package quorum

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter implements blob.Store. The writer buffers the object and commits
// it at Close (see the package doc).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	o, err := s.writerOptions("write", key, opts)
	if err != nil {
		return nil, err
	}
	return &writer{s: s, ctx: ctx, key: key, opts: o}, nil
}

func (s *Store) writerOptions(op, key string, opts *blob.WriterOptions) (blob.WriterOptions, error) {
	var o blob.WriterOptions
	if err := s.check(op, key); err != nil {
		return o, err
	}
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate(op, key); err != nil {
		return o, err
	}
	for k := range o.Metadata {
		if reserved(k) {
			return o, blob.Errorf(op, key, blob.ErrInvalidArgument, "metadata key %s is reserved", k)
		}
	}
	return o, nil
}

type writer struct {
	s    *Store
	ctx  context.Context
	key  string
	opts blob.WriterOptions
	buf  spool
	sum  hash.Hash // MD5 of the bytes, when the caller declared one
	done bool
	// fresh: a store-chosen name (Create, Prewarm), written in one round
	// trip per replica; warm holds its prewarmed replica writers, if any.
	fresh bool
	tok   string
	warm  []chan warmResult
	// wrote is the version the committed write made current.
	wrote string
}

type warmResult struct {
	w      blob.Writer
	cancel context.CancelFunc
	// detach stops the Prewarm context from cancelling the warm writer:
	// once committing, it lives as long as the write's own calls.
	detach func() bool
	err    error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	if err := w.ctx.Err(); err != nil {
		return 0, driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if len(w.opts.ContentMD5) > 0 {
		if w.sum == nil {
			w.sum = md5.New()
		}
		w.sum.Write(p)
	}
	n, err := w.buf.Write(p)
	if err != nil {
		return n, blob.Errorf(driver.OpWrite, w.key, nil, "buffering the object: %w", err)
	}
	return n, nil
}

// abort releases warm replica writers without committing anything.
func (w *writer) abort() {
	for _, ch := range w.warm {
		if ch == nil {
			continue
		}
		go func() {
			if r := <-ch; r.err == nil {
				r.cancel()
				r.w.Close()
			}
		}()
	}
}

func (w *writer) Close() error {
	if w.done {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		w.abort()
		return driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if w.s.life.Closed() {
		w.abort()
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	if len(w.opts.ContentMD5) > 0 {
		if w.sum == nil {
			w.sum = md5.New()
		}
		if sum := w.sum.Sum(nil); !bytes.Equal(sum, w.opts.ContentMD5) {
			w.abort()
			return blob.Errorf(driver.OpWrite, w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the declared %x", sum, w.opts.ContentMD5)
		}
	}
	v := &value{body: w.buf.body(), opts: w.opts, kind: live}
	v.opts.If, v.opts.ContentMD5 = blob.Condition{}, nil
	// The operation's bound allows for moving this object.
	ctx, done := w.s.bounded(w.ctx, v.size())
	defer done()
	var err error
	switch {
	case w.fresh:
		err = w.s.createFresh(ctx, w.key, v, w.tok, w.warm)
		if err == nil {
			w.wrote = v.ver
		}
	case w.opts.If.NotExist():
		w.wrote, err = w.s.consensusWrote(ctx, "write", w.key, func(cur *rstate) (*value, error) {
			if cur.visible() {
				return nil, &blob.Error{Op: driver.OpWrite, Key: w.key, Kind: blob.ErrExists}
			}
			return v, nil
		})
	case w.opts.If.GenerationMatch() != "":
		g := w.opts.If.GenerationMatch()
		w.wrote, err = w.s.consensusWrote(ctx, "write", w.key, func(cur *rstate) (*value, error) {
			if !cur.visible() || cur.ver != g {
				return nil, blob.Errorf(driver.OpWrite, w.key, blob.ErrPrecondition, "quorum version is not %s", g)
			}
			return v, nil
		})
	default:
		w.wrote, err = w.s.consensusWrote(ctx, "write", w.key, func(*rstate) (*value, error) { return v, nil })
	}
	if err != nil {
		w.wrote = ""
		if cerr := w.ctx.Err(); cerr != nil && !errors.Is(err, blob.ErrExists) && !errors.Is(err, blob.ErrPrecondition) {
			return driver.WrapError(driver.OpWrite, w.key, cerr, nil)
		}
		var be *blob.Error
		if errors.As(err, &be) && be.Op == "write" && be.Key == w.key {
			return err
		}
		return &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	w.s.stats.writes.Add(1)
	return nil
}

// WrittenGeneration implements blob.GenerationReporter: the version this
// write's consensus round made current (or a fresh name's token), which is
// what Stat reports as the Generation.
func (w *writer) WrittenGeneration() (string, bool) { return w.wrote, w.wrote != "" }

// putDecided writes v (a value, or a tombstone for a delete) through a
// consensus round whose decision does not depend on what the key holds,
// except that a tombstone is written only over a value (else ErrNotFound).
func (s *Store) putDecided(ctx context.Context, op, key string, v *value) error {
	_, err := s.consensus(ctx, op, key, func(cur *rstate) (*value, error) {
		if v.kind == tomb && cur.gone() {
			return nil, &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound}
		}
		return v, nil
	})
	return err
}

// createFresh writes a store-chosen name: the name is new, so no consensus is
// needed, and the write is one IfNotExist commit per replica, through the
// prewarmed replica writers where there are.
func (s *Store) createFresh(ctx context.Context, key string, v *value, tok string, warm []chan warmResult) (err error) {
	defer func() { s.noteUncertain(err) }()
	if tok == "" {
		tok = s.newToken("")
	}
	v.ver = tok
	v.chain = []string{tok}
	var rs []*replica
	if warm != nil {
		for i, ch := range warm {
			if ch != nil {
				rs = append(rs, s.reps[i])
			}
		}
	} else {
		rs = s.upReplicas(s.w)
	}
	f := s.fanOut(ctx, key, len(rs), v.size(), func(ctx context.Context, i int) error {
		r := rs[i]
		if warm != nil {
			res := <-warm[r.idx]
			if res.err == nil {
				defer res.cancel()
				// The warm writer lives in its own context, cancelled with
				// the Prewarm context until now: from here it is bound by
				// this write's, so a straggler outlives the caller's context.
				res.detach()
				stop := context.AfterFunc(ctx, res.cancel)
				defer stop()
				start := time.Now()
				err := copyAndClose(res.w, v.body, res.cancel)
				s.observe(r, time.Since(start), err, ctx.Err() != nil)
				return err
			}
		}
		return s.writeReplica(ctx, key, &rstate{r: r, kind: absent}, v, tok, tok)
	})
	landed, err := f.wait(s.w, tok)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return doneError(ctx, driver.OpWrite, key, landed, err)
	case !landed && f.count(blob.ErrExists) > 0:
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrExists, Err: err}
	case landed:
		return blob.Errorf(driver.OpWrite, key, nil, "%w (%w): %v", ErrNoQuorum, ErrUncertain, err)
	}
	return blob.Errorf(driver.OpWrite, key, nil, "%w: %v", ErrNoQuorum, err)
}

// goTask runs fn as a task Close waits for, unless the store is closing.
func (s *Store) goTask(fn func()) bool { return s.tasks.Go(fn) }

// Prewarm implements blob.Prewarmer. For a store-chosen name (one that
// blob.NewName made, as Create and pool.NewCreator use: unique, so no one
// else writes it) it prewarms key on every replica that is up (natively
// where the replica is a Prewarmer) and returns once a write quorum of them
// is ready; closing the writer commits through the warm handles, one round
// trip per replica, without consensus. Any other key may be contended, so
// its writer commits as an IfNotExist write decided by consensus, and
// nothing is warmed.
func (s *Store) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	o, err := s.writerOptions("prewarm", key, opts)
	if err != nil {
		return nil, err
	}
	if o.If.GenerationMatch() != "" {
		return nil, blob.Errorf(driver.OpPrewarm, key, blob.ErrInvalidArgument, "a prewarmed write is IfNotExist")
	}
	if _, fresh := blob.NameTime(key); !fresh {
		// Not a store-chosen name: another writer may use it, so the write
		// is an IfNotExist decided by consensus.
		o.If = blob.IfNotExist()
		return &writer{s: s, ctx: ctx, key: key, opts: o}, nil
	}
	w := &writer{s: s, ctx: ctx, key: key, opts: o, fresh: true, tok: s.newToken("")}
	w.warm = make([]chan warmResult, len(s.reps))
	ready := make(chan error, len(s.reps))
	ups := s.upReplicas(s.w)
	v := &value{opts: o, kind: live, ver: w.tok}
	for _, r := range ups {
		ch := make(chan warmResult, 1)
		w.warm[r.idx] = ch
		ro := replicaOptions(v, w.tok, w.tok, nil)
		go func() {
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			stop := context.AfterFunc(ctx, cancel)
			start := time.Now()
			rw, err := blob.Prewarm(rctx, r.s, key, &ro)
			s.observe(r, time.Since(start), err, rctx.Err() != nil)
			if err != nil {
				stop()
				cancel()
			}
			ch <- warmResult{rw, func() { stop(); cancel() }, stop, err}
			ready <- err
		}()
	}
	var errs []error
	for okN := 0; okN < s.w; {
		select {
		case err := <-ready:
			if err == nil {
				okN++
				continue
			}
			errs = append(errs, err)
			if len(errs) > len(ups)-s.w {
				w.done = true
				w.abort()
				var kind error
				for _, e := range errs {
					if errors.Is(e, blob.ErrExists) {
						kind = blob.ErrExists
					}
				}
				return nil, &blob.Error{Op: driver.OpPrewarm, Key: key, Kind: kind, Err: fmt.Errorf("%w: %v", ErrNoQuorum, errors.Join(errs...))}
			}
		case <-ctx.Done():
			w.done = true
			w.abort()
			return nil, driver.WrapError(driver.OpPrewarm, key, ctx.Err(), nil)
		}
	}
	return w, nil
}
