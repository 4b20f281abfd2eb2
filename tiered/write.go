package tiered

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter writes to hot. Unconditional writes are the hot store's own
// writer, with no added work. Conditional writes must also see cold, so their
// bytes are buffered and committed at Close under the key's lock (see
// commitConditional).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if opts == nil || opts.If.IsZero() {
		return recordingHot{Store: s.hot, s: s}.NewWriter(ctx, key, opts)
	}
	if err := opts.If.Validate("write", key); err != nil {
		return nil, err
	}
	if _, ok := opts.Metadata[generationKey]; ok {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "metadata key %s is reserved", generationKey)
	}
	return &condWriter{s: s, ctx: ctx, key: key, opts: *opts}, nil
}

// Create makes a new object in hot under a name the store picks. The name is
// new, so unlike an IfNotExist write it need not be looked up in cold: Create
// costs exactly what the hot store's Create costs (one data round trip over a
// pooled gcsrapid store).
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if s.life.Closed() {
		return "", nil, driver.ClosedError(driver.OpCreate, prefix)
	}
	if isMarker(prefix) {
		return "", nil, blob.Errorf(driver.OpCreate, prefix, blob.ErrInvalidKey, "prefix reserved for move markers")
	}
	key, w, err := blob.Create(ctx, s.hot, prefix, opts)
	if err != nil {
		return key, w, err
	}
	return key, &recordingWriter{Writer: w, s: s, key: key}, nil
}

type condWriter struct {
	s      *Store
	ctx    context.Context
	key    string
	opts   blob.WriterOptions
	buf    []byte
	closed bool
}

func (w *condWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	if err := w.ctx.Err(); err != nil {
		return 0, &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *condWriter) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	if w.s.life.Closed() {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	return w.s.commitConditional(w.ctx, w.key, w.buf, w.opts)
}

// commitConditional checks a precondition against both tiers and commits to
// hot (see Conditional operations in the package documentation). A version
// in hot is written over on condition of its generation there; a version
// in cold only is checked again, and written over, under the key's lock in
// hot, which every other operation on it holds too. The key's lock in this
// process keeps its own compactor from moving the key meanwhile; a
// compactor in another process moves only objects older than After, and an
// object that was absent from hot when an IfNotExist check began cannot be
// both created and moved within one conditional write unless the write
// outlasts After.
func (s *Store) commitConditional(ctx context.Context, key string, data []byte, opts blob.WriterOptions) error {
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: key, Err: err}
	}
	defer unlock()
	if opts.If.NotExist() {
		for range 4 {
			// Before hot is asked: every pack committed until now counts.
			if _, err := s.coldStat(ctx, key, time.Now()); err == nil {
				// Cold's version exists unless a grave in hot shadows it.
				a, err := s.hot.Stat(ctx, key)
				if err != nil && !errors.Is(err, blob.ErrNotFound) {
					return err
				}
				if err != nil || !isGrave(a) {
					return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrExists}
				}
				if err := s.replaceGrave(ctx, key, data, opts, a); !errors.Is(err, errGraveMoved) {
					return err
				}
				continue
			} else if !errors.Is(err, blob.ErrNotFound) {
				return err
			}
			if err := s.putHot(ctx, key, data, opts, ""); !errors.Is(err, errGraveMoved) {
				return err
			}
		}
		return blob.Errorf(driver.OpWrite, key, nil, "tiered: key kept changing")
	}
	want := opts.If.GenerationMatch()
	a, err := s.hotStat(ctx, key)
	for try := 0; err == nil && try < 3; try++ {
		if a.Generation != want || isGrave(a) {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
		}
		err = s.putHotRecorded(ctx, key, data, &opts)
		if !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
		// want left hot since the Stat: replaced (the Stat now says so), or
		// moved by a compactor in another process (cold has it now).
		a, err = s.hotStat(ctx, key)
	}
	if err == nil {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	// want lives in cold only, if anywhere: both tiers are checked again,
	// and the write committed, under key's lock in hot, which every other
	// operation on a version in cold only holds too.
	held, unlockHot, err := s.lockHot(ctx, key)
	if err != nil {
		return err
	}
	defer unlockHot()
	return s.outlasted(held, driver.OpWrite, key, s.commitColdOnly(held, key, data, opts, want))
}

// commitColdOnly is commitConditional's write of a version in cold only,
// under key's lock in hot.
func (s *Store) commitColdOnly(ctx context.Context, key string, data []byte, opts blob.WriterOptions, want string) error {
	if a, err := s.hotStat(ctx, key); err == nil {
		if a.Generation != want || isGrave(a) {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
		}
		return s.putHotRecorded(ctx, key, data, &opts)
	} else if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	ca, err := s.coldStat(ctx, key, s.settled())
	if errors.Is(err, blob.ErrNotFound) || (err == nil && ca.Generation != want) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
	}
	if err != nil {
		return err
	}
	// The object lives in cold only; the new version goes to hot, where it
	// shadows the cold one until it is moved over it.
	o := opts
	o.If = blob.IfNotExist()
	err = s.putHot(ctx, key, data, o, want)
	if errors.Is(err, blob.ErrExists) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition, Err: err}
	}
	return err
}
