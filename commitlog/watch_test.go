package commitlog

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// watchOp names the kinds of request a watchStore shows its hooks.
type watchOp int

const (
	watchWrite    watchOp = iota // an object written whole (NewWriter, committed at Close)
	watchCreate                  // an append stream created (CreateAppendStream), data its first bytes
	watchAppend                  // an append: an Appender's writer at Close, an append stream's Append or Send
	watchFinalize                // Finalize
)

// watchReq is a write a watchStore passes on.
type watchReq struct {
	op   watchOp
	key  string
	data []byte // the bytes written or appended
}

// watchStore passes every call to the store it wraps, serving what that
// store serves (append streams, pipelined ones included, appends,
// finalization), and shows the writes among them to its hooks: before may
// fail a write before the store sees it; after sees the store's answer and
// may replace it, a success by an error being a write that took effect
// while its caller is told it failed. On an append stream after only
// watches. The tests use it to see a writer's steps in the requests they
// make: a roll and a switch, the steps of a move.
//
// A whole write or an Appender's append reaches the store at its Close,
// with the bytes written before it: the hooks see them whole.
type watchStore struct {
	blob.Store
	before func(watchReq) error
	after  func(watchReq, error) error
}

var (
	_ blob.Appender             = (*watchStore)(nil)
	_ blob.Finalizer            = (*watchStore)(nil)
	_ blob.AppendStreamer       = (*watchStore)(nil)
	_ blob.AppendStreamReporter = (*watchStore)(nil)
	_ blob.CapabilityReporter   = (*watchStore)(nil)
)

func (s *watchStore) hookBefore(r watchReq) error {
	if s.before == nil {
		return nil
	}
	return s.before(r)
}

func (s *watchStore) hookAfter(r watchReq, err error) error {
	if s.after == nil {
		return err
	}
	return s.after(r, err)
}

// Capabilities reports what the wrapped store serves of what this wrapper
// passes on.
func (s *watchStore) Capabilities() blob.Capabilities {
	c := blob.CapabilitiesOf(s.Store)
	return blob.Capabilities{Append: c.Append, Finalize: c.Finalize}
}

func (s *watchStore) ServesAppendStreams() bool { return blob.ServesAppendStreams(s.Store) }

func (s *watchStore) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	return &watchWriter{ctx: ctx, s: s, req: watchReq{op: watchWrite, key: key}, open: func() (blob.Writer, error) {
		return s.Store.NewWriter(ctx, key, opts)
	}}, nil
}

func (s *watchStore) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	a, ok := s.Store.(blob.Appender)
	if !ok {
		return nil, &blob.Error{Op: driver.OpAppend, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T cannot append", s.Store)}
	}
	return &watchWriter{ctx: ctx, s: s, req: watchReq{op: watchAppend, key: key}, open: func() (blob.Writer, error) {
		return a.NewAppender(ctx, key, opts)
	}}, nil
}

func (s *watchStore) Finalize(ctx context.Context, key string) error {
	r := watchReq{op: watchFinalize, key: key}
	if err := s.hookBefore(r); err != nil {
		return err
	}
	return s.hookAfter(r, blob.Finalize(ctx, s.Store, key))
}

func (s *watchStore) CreateAppendStream(ctx context.Context, key string, data []byte) (blob.AppendStream, error) {
	as, ok := s.Store.(blob.AppendStreamer)
	if !ok {
		return nil, &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.Store)}
	}
	r := watchReq{op: watchCreate, key: key, data: data}
	if err := s.hookBefore(r); err != nil {
		return nil, err
	}
	st, err := as.CreateAppendStream(ctx, key, data)
	if err = s.hookAfter(r, err); err != nil {
		if st != nil {
			st.Close()
		}
		return nil, err
	}
	return s.wrapStream(key, st), nil
}

func (s *watchStore) TakeOverAppendStream(ctx context.Context, key string) (blob.AppendStream, error) {
	as, ok := s.Store.(blob.AppendStreamer)
	if !ok {
		return nil, &blob.Error{Op: driver.OpAppend, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.Store)}
	}
	st, err := as.TakeOverAppendStream(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.wrapStream(key, st), nil
}

// wrapStream watches st's appends; a pipelined stream stays pipelined.
func (s *watchStore) wrapStream(key string, st blob.AppendStream) blob.AppendStream {
	w := &watchStream{AppendStream: st, s: s, key: key}
	if p, ok := st.(blob.PipelinedAppendStream); ok {
		return &watchPipe{watchStream: w, p: p}
	}
	return w
}

// watchWriter keeps the bytes written and hands them to the store at Close,
// after the before hook: a write it fails never reaches the store.
type watchWriter struct {
	ctx   context.Context
	s     *watchStore
	req   watchReq
	open  func() (blob.Writer, error)
	buf   bytes.Buffer
	inner blob.Writer
	done  bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("commitlog test: write to %s after Close", w.req.key)
	}
	return w.buf.Write(p)
}

func (w *watchWriter) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	if err := w.ctx.Err(); err != nil {
		return err // aborted by its caller: nothing is committed
	}
	w.req.data = w.buf.Bytes()
	if err := w.s.hookBefore(w.req); err != nil {
		return err
	}
	return w.s.hookAfter(w.req, w.commit())
}

func (w *watchWriter) commit() error {
	in, err := w.open()
	if err != nil {
		return err
	}
	w.inner = in
	if _, err := in.Write(w.req.data); err != nil {
		return err // the caller's context, cancelled by Put, aborts it
	}
	return in.Close()
}

// WrittenGeneration implements blob.GenerationReporter: the store's writer's.
func (w *watchWriter) WrittenGeneration() (string, bool) {
	if w.inner == nil {
		return "", false
	}
	return blob.WrittenGeneration(w.inner)
}

type watchStream struct {
	blob.AppendStream
	s   *watchStore
	key string
}

func (w *watchStream) Append(ctx context.Context, p []byte) error {
	r := watchReq{op: watchAppend, key: w.key, data: p}
	if err := w.s.hookBefore(r); err != nil {
		w.AppendStream.Close() // a stream is unusable after a failure
		return err
	}
	err := w.AppendStream.Append(ctx, p)
	w.s.hookAfter(r, err)
	return err
}

type watchPipe struct {
	*watchStream
	p blob.PipelinedAppendStream
}

func (w *watchPipe) Append(ctx context.Context, p []byte) error {
	return blob.SendAndWait(ctx, w, p)
}

func (w *watchPipe) Send(ctx context.Context, p []byte, done func(error)) error {
	r := watchReq{op: watchAppend, key: w.key, data: p}
	if err := w.s.hookBefore(r); err != nil {
		w.p.Close() // a stream is unusable after a failure
		return err
	}
	return w.p.Send(ctx, p, func(err error) {
		w.s.hookAfter(r, err)
		done(err)
	})
}

// watchedSeg returns the segment of log whose object (not slot) key is.
func watchedSeg(log, key string) (segKey, bool) {
	rest, ok := strings.CutPrefix(key, log+"/seg/")
	if !ok {
		return segKey{}, false
	}
	return parseSegKey(rest)
}

// framesOf returns the frames p holds whole, or nil if p is not frames.
func framesOf(p []byte) []frame {
	frames, n, err := decodeFrames(p)
	if err != nil || n != len(p) {
		return nil
	}
	return frames
}
