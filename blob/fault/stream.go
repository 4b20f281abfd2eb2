package fault

import (
	"context"
	"fmt"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/blob/latency"
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
	return s.wrapStream(key, st), nil
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
	return s.wrapStream(key, st), nil
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

// wrapStream faults st's appends; a pipelined stream stays pipelined.
func (s *Store) wrapStream(key string, st blob.AppendStream) blob.AppendStream {
	w := &stream{s: s, key: key, st: st}
	if p, ok := st.(blob.PipelinedAppendStream); ok {
		done := make(chan struct{})
		close(done)
		return &pipeStream{stream: w, p: p, last: done}
	}
	return w
}

// pipeStream faults a pipelined stream's Sends as OpCommit, as Append's:
// a failure before fails the stream before the bytes are sent; a delay or
// a hang holds the Send's acknowledgement (not the Sends after it, which
// go out at once); a FailAfter reports a failure once the bytes are
// durable. Acknowledgements keep the order of the Sends.
type pipeStream struct {
	*stream
	p      blob.PipelinedAppendStream
	mu     sync.Mutex
	last   chan struct{} // closed once the last Send's done has run
	closed bool          // the stream below was ended
	// seq numbers the Sends; failedAt is the one that failed the stream.
	seq, failedAt int
}

func (w *pipeStream) Append(ctx context.Context, p []byte) error {
	return blob.SendAndWait(ctx, w, p)
}

func (w *pipeStream) Send(ctx context.Context, p []byte, done func(error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	d := w.s.decide(OpCommit, w.key)
	prev, mine := w.last, make(chan struct{})
	w.last = mine
	w.seq++
	seq := w.seq
	var before error
	switch {
	case d.down:
		before = w.s.injected(OpCommit, w.key, ErrDown)
	case d.fail && !d.after:
		before = w.s.injected(OpCommit, w.key, d.err)
	}
	var inner chan error
	if before != nil {
		// Later Sends are refused now; the stream below ends once the
		// Sends before this one are answered (see the goroutine).
		if w.err == nil {
			w.err, w.failedAt = before, seq
		}
	} else {
		inner = make(chan error, 1)
		if err := w.p.Send(ctx, p, func(err error) { inner <- err }); err != nil {
			w.failLocked(err, seq)
			w.last = prev
			return err
		}
	}
	go func() {
		err := before
		if inner != nil {
			if d.delay > 0 {
				if e := latency.Sleep(ctx, d.delay); e != nil {
					err = w.s.injected(OpCommit, w.key, e)
				}
			}
			if d.hang {
				<-ctx.Done()
				err = w.s.injected(OpCommit, w.key, ctx.Err())
			}
			if e := <-inner; err == nil {
				err = e
			}
			if err == nil && d.fail && d.after {
				err = (&pending{s: w.s, op: OpCommit, key: w.key, cause: d.err}).report()
			}
		}
		<-prev
		w.mu.Lock()
		if err != nil {
			w.failLocked(err, seq)
		} else if w.err != nil && w.failedAt <= seq {
			err = w.err // a Send before this one failed the stream
		}
		w.mu.Unlock()
		done(err)
		close(mine)
	}()
	return nil
}

// failLocked fails the stream: the Sends in flight below fail too.
func (w *pipeStream) failLocked(err error, seq int) {
	if w.err == nil {
		w.err, w.failedAt = err, seq
	}
	if !w.closed {
		w.closed = true
		w.st.Close()
	}
}
