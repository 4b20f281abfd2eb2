package fault

import (
	"context"
	"fmt"
	"io"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewRangeReader implements blob.Store. Each Read of the reader is an OpReadData call.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	after, err := s.enter(ctx, OpRead, key)
	if err != nil {
		return nil, err
	}
	r, err := s.inner.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	if after != nil {
		r.Close()
		return nil, after.report()
	}
	return &reader{s: s, ctx: ctx, key: key, r: r}, nil
}

// NewWriter implements blob.Store. Each Write is an OpWriteData call and Close
// is the OpCommit call.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	after, err := s.enter(ctx, OpWrite, key)
	if err != nil {
		return nil, err
	}
	_, w, err := s.openWriter(ctx, key, after, func(wctx context.Context) (string, blob.Writer, error) {
		w, err := s.inner.NewWriter(wctx, key, opts)
		return key, w, err
	})
	return w, err
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	after, err := s.enter(ctx, OpStat, key)
	if err != nil {
		return nil, err
	}
	a, err := s.inner.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if after != nil {
		return nil, after.report()
	}
	return a, nil
}

// List implements blob.Store. Rules match the listing prefix.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	var prefix string
	if opts != nil {
		prefix = opts.Prefix
	}
	after, err := s.enter(ctx, OpList, prefix)
	if err != nil {
		return nil, err
	}
	p, err := s.inner.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	if after != nil {
		return nil, after.report()
	}
	return p, nil
}

// Delete implements blob.Store. FailNth fails it before the object is
// removed, FailNthAfter after. Options blob.CheckDelete refuses are refused
// before any rule applies: a call that never reaches the backend is no call
// to fault.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if _, err := blob.CheckDelete(key, opts); err != nil {
		return err
	}
	after, err := s.enter(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	if err := s.inner.Delete(ctx, key, opts); err != nil {
		return err
	}
	if after != nil {
		return after.report()
	}
	return nil
}

// Close closes the inner store. It is never faulted: releasing resources is
// not something a test wants to fail.
func (s *Store) Close() error { return s.inner.Close() }

// Prewarm implements blob.Prewarmer: natively over a Prewarmer, otherwise as
// blob.Prewarm falls back (an IfNotExist writer through this wrapper).
func (s *Store) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	after, err := s.enter(ctx, OpPrewarm, key)
	if err != nil {
		return nil, err
	}
	p, ok := s.inner.(blob.Prewarmer)
	if !ok {
		w, err := blob.Prewarm(ctx, s.plain, key, opts)
		return fallbackWriter(w, err, after)
	}
	_, w, err := s.openWriter(ctx, key, after, func(wctx context.Context) (string, blob.Writer, error) {
		w, err := p.Prewarm(wctx, key, opts)
		return key, w, err
	})
	return w, err
}

// Create implements blob.Creator: natively over a Creator, otherwise as
// blob.Create falls back (a new name and an IfNotExist writer through this
// wrapper). Rules match the prefix.
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	after, err := s.enter(ctx, OpCreate, prefix)
	if err != nil {
		return "", nil, err
	}
	c, ok := s.inner.(blob.Creator)
	if !ok {
		key, w, err := blob.Create(ctx, s.plain, prefix, opts)
		if err == nil && after != nil {
			after.key = key
		}
		w, err = fallbackWriter(w, err, after)
		if err != nil {
			return "", nil, err
		}
		return key, w, nil
	}
	return s.openWriter(ctx, prefix, after, func(wctx context.Context) (string, blob.Writer, error) {
		return c.Create(wctx, prefix, opts)
	})
}

// NewAppender implements blob.Appender: natively over an Appender, otherwise
// it fails with an error wrapping blob.ErrUnsupported, as blob.Append does.
// Options blob.CheckAppend refuses are refused before any rule applies.
func (s *Store) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	if _, err := blob.CheckAppend(key, opts); err != nil {
		return nil, err
	}
	after, err := s.enter(ctx, OpAppend, key)
	if err != nil {
		return nil, err
	}
	a, ok := s.inner.(blob.Appender)
	if !ok {
		return nil, &blob.Error{Op: driver.OpAppend, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T cannot append", s.inner)}
	}
	_, w, err := s.openWriter(ctx, key, after, func(wctx context.Context) (string, blob.Writer, error) {
		w, err := a.NewAppender(wctx, key, opts)
		return key, w, err
	})
	return w, err
}

// Copy implements blob.Copier: natively over a Copier, otherwise by streaming
// through this wrapper as blob.Copy does. Rules match dstKey. Options
// blob.CheckCopy refuses are refused before any rule applies; a Copier below
// refuses an IfGenerationMatch it cannot enforce, and the streaming copy's
// write is conditional.
func (s *Store) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	if _, err := blob.CheckCopy(dstKey, opts, true); err != nil {
		return err
	}
	after, err := s.enter(ctx, OpCopy, dstKey)
	if err != nil {
		return err
	}
	if c, ok := s.inner.(blob.Copier); ok {
		err = c.Copy(ctx, dstKey, srcKey, opts)
	} else {
		err = blob.CopyBetween(ctx, s.plain, dstKey, s.plain, srcKey, opts)
	}
	if err != nil {
		return err
	}
	if after != nil {
		return after.report()
	}
	return nil
}

// OpenReaderAt implements blob.ReaderAtOpener: natively over a ReaderAtOpener
// (each ReadAt is then an OpReadData call), otherwise as blob.OpenReaderAt
// falls back (a Stat and one range read per ReadAt, through this wrapper).
func (s *Store) OpenReaderAt(ctx context.Context, key string) (blob.ReaderAt, error) {
	after, err := s.enter(ctx, OpReaderAt, key)
	if err != nil {
		return nil, err
	}
	o, native := s.inner.(blob.ReaderAtOpener)
	var ra blob.ReaderAt
	if native {
		ra, err = o.OpenReaderAt(ctx, key)
	} else {
		ra, err = blob.OpenReaderAt(ctx, s.plain, key)
	}
	if err != nil {
		return nil, err
	}
	if after != nil {
		ra.Close()
		return nil, after.report()
	}
	if native {
		ra = &readerAt{s: s, ctx: ctx, key: key, ra: ra}
	}
	return ra, nil
}

// Finalize implements blob.Finalizer: natively over a Finalizer, otherwise as
// blob.Finalize falls back (objects are final once committed, so it checks
// that key exists, through this wrapper).
func (s *Store) Finalize(ctx context.Context, key string) error {
	after, err := s.enter(ctx, OpFinalize, key)
	if err != nil {
		return err
	}
	if err := blob.Finalize(ctx, s.inner, key); err != nil {
		return err
	}
	if after != nil {
		return after.report()
	}
	return nil
}

// Capabilities implements blob.CapabilityReporter: the wrapper serves
// natively exactly what the store it wraps does.
func (s *Store) Capabilities() blob.Capabilities {
	c := blob.CapabilitiesOf(s.inner)
	c.Retire = false // a retirement has no fallback, and the wrapper offers none
	return c
}

// openWriter opens an inner writer under a context this wrapper can cancel,
// which is how an injected commit failure aborts it.
func (s *Store) openWriter(ctx context.Context, key string, after *pending, open func(context.Context) (string, blob.Writer, error)) (string, blob.Writer, error) {
	wctx, cancel := context.WithCancel(ctx)
	key, w, err := open(wctx)
	if err != nil {
		cancel()
		return "", nil, err
	}
	fw := &writer{s: s, ctx: ctx, cancel: cancel, key: key, w: w}
	if after != nil {
		fw.abort()
		after.key = key
		return "", nil, after.report()
	}
	return key, fw, nil
}

// fallbackWriter applies a FailAfter decision to a writer that a blob helper
// opened through this wrapper (so it is already one of ours).
func fallbackWriter(w blob.Writer, err error, after *pending) (blob.Writer, error) {
	if err != nil {
		return nil, err
	}
	if after != nil {
		w.(*writer).abort()
		return nil, after.report()
	}
	return w, nil
}

// plainStore is the wrapper without its optional methods, so that the blob
// helpers' fallbacks run through the wrapper's faulted core operations instead
// of coming back to the optional methods that called them.
type plainStore struct{ s *Store }

func (p plainStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	return p.s.NewRangeReader(ctx, key, offset, length)
}

func (p plainStore) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	return p.s.NewWriter(ctx, key, opts)
}

func (p plainStore) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	return p.s.Stat(ctx, key)
}

func (p plainStore) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	return p.s.List(ctx, opts)
}

func (p plainStore) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	return p.s.Delete(ctx, key, opts)
}

func (p plainStore) Close() error { return p.s.Close() }

// reader faults each Read. An injected failure is sticky, as a broken stream's is.
type reader struct {
	s   *Store
	ctx context.Context
	key string
	r   blob.Reader
	err error
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	after, err := r.s.enter(r.ctx, OpReadData, r.key)
	if err != nil {
		r.err = err
		return 0, err
	}
	n, err := r.r.Read(p)
	if after != nil && (err == nil || err == io.EOF) {
		r.err = after.report()
		return n, r.err
	}
	return n, err
}

func (r *reader) Close() error                 { return r.r.Close() }
func (r *reader) Attributes() *blob.Attributes { return r.r.Attributes() }

// readerAt faults each ReadAt of a native ReaderAt. Calls are independent, so
// failures are not sticky.
type readerAt struct {
	s   *Store
	ctx context.Context
	key string
	ra  blob.ReaderAt
}

func (r *readerAt) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadAtContext(r.ctx, p, off)
}

func (r *readerAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	after, err := r.s.enter(ctx, OpReadData, r.key)
	if err != nil {
		return 0, err
	}
	n, err := r.ra.ReadAtContext(ctx, p, off)
	if after != nil && (err == nil || err == io.EOF) {
		return n, after.report()
	}
	return n, err
}

func (r *readerAt) Size() int64  { return r.ra.Size() }
func (r *readerAt) Close() error { return r.ra.Close() }

// writer faults each Write and the commit at Close. After an injected Write
// failure the writer is broken: later Writes fail the same way and Close
// aborts, because a real store never commits an object whose upload failed.
type writer struct {
	s      *Store
	ctx    context.Context // the caller's, for delays and hangs
	cancel context.CancelFunc
	key    string
	w      blob.Writer
	err    error
	closed bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	after, err := w.s.enter(w.ctx, OpWriteData, w.key)
	if err != nil {
		w.err = err
		return 0, err
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, err
	}
	if after != nil {
		w.err = after.report()
		return n, w.err
	}
	return n, nil
}

func (w *writer) Close() error {
	if w.closed {
		return w.w.Close()
	}
	w.closed = true
	// Cancelling after the inner Close is harmless by the Store contract (Put
	// does the same) and releases the context.
	defer w.cancel()
	if w.err != nil {
		w.abort()
		return w.err
	}
	after, err := w.s.enter(w.ctx, OpCommit, w.key)
	if err != nil {
		w.abort()
		return err
	}
	if err := w.w.Close(); err != nil {
		return err
	}
	if after != nil {
		return after.report()
	}
	return nil
}

// abort closes the inner writer with its context cancelled, which the Store
// contract says commits nothing.
func (w *writer) abort() {
	w.closed = true
	w.cancel()
	w.w.Close()
}

// WrittenGeneration implements blob.GenerationReporter: the inner writer's.
func (w *writer) WrittenGeneration() (string, bool) { return blob.WrittenGeneration(w.w) }
