package fault

import (
	"context"
	"fmt"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

var (
	_ blob.AppendStreamer       = (*Store)(nil)
	_ blob.AppendStreamReporter = (*Store)(nil)
)

// ServesAppendStreams implements blob.AppendStreamReporter: the wrapper
// passes append streams through when the store below serves them.
func (s *Store) ServesAppendStreams() bool { return blob.ServesAppendStreams(s.inner) }

// CreateAppendStream implements blob.AppendStreamer over an AppendStreamer
// (an error wrapping blob.ErrUnsupported otherwise). Opening the stream is
// faulted as OpWrite; each flush that makes bytes durable, the first
// included, as OpCommit: a FailAfter there leaves the bytes written and
// reports a failure, and any failure ends the stream, as a broken stream
// would.
func (s *Store) CreateAppendStream(ctx context.Context, key string, data []byte) (blob.AppendStream, error) {
	as, ok := s.inner.(blob.AppendStreamer)
	if !ok {
		return nil, &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.inner)}
	}
	if _, err := s.enter(ctx, OpWrite, key); err != nil {
		return nil, err
	}
	after, err := s.enter(ctx, OpCommit, key)
	if err != nil {
		return nil, err
	}
	st, err := as.CreateAppendStream(ctx, key, data)
	if err != nil {
		return nil, err
	}
	if after != nil {
		st.Close()
		return nil, after.report()
	}
	return &stream{s: s, key: key, st: st}, nil
}

// TakeOverAppendStream implements blob.AppendStreamer over an
// AppendStreamer, faulted as OpAppend.
func (s *Store) TakeOverAppendStream(ctx context.Context, key string) (blob.AppendStream, error) {
	as, ok := s.inner.(blob.AppendStreamer)
	if !ok {
		return nil, &blob.Error{Op: driver.OpAppend, Key: key, Kind: blob.ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.inner)}
	}
	after, err := s.enter(ctx, OpAppend, key)
	if err != nil {
		return nil, err
	}
	st, err := as.TakeOverAppendStream(ctx, key)
	if err != nil {
		return nil, err
	}
	if after != nil {
		st.Close()
		return nil, after.report()
	}
	return &stream{s: s, key: key, st: st}, nil
}

type stream struct {
	s   *Store
	key string
	st  blob.AppendStream
	err error
}

func (w *stream) Size() int64  { return w.st.Size() }
func (w *stream) Close() error { return w.st.Close() }

func (w *stream) Append(ctx context.Context, p []byte) error {
	if w.err != nil {
		return w.err
	}
	after, err := w.s.enter(ctx, OpCommit, w.key)
	if err == nil {
		err = w.st.Append(ctx, p)
		if err == nil && after != nil {
			err = after.report()
		}
	}
	if err != nil {
		w.err = err
		w.st.Close()
	}
	return err
}
