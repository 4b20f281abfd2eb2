package blob

import "context"

// AppendStreamer is a Store that keeps an object open for appends on one
// long-lived stream, so that each append costs one flush instead of opening
// the object again (GCS appendable objects: about 1 ms instead of a 40-50 ms
// metadata operation). Holding the stream is holding the object: a stream
// taken over by another caller fails from then on, which is how a new writer
// fences an old one.
type AppendStreamer interface {
	// CreateAppendStream creates key, which must not exist (ErrExists), with
	// data as its first bytes, durable when it returns, and keeps the stream
	// open for later appends.
	CreateAppendStream(ctx context.Context, key string, data []byte) (AppendStream, error)
	// TakeOverAppendStream opens the existing, unfinalized object key for
	// appends. Every stream opened on key before fails its next Append with
	// ErrPrecondition. A missing key fails with ErrNotFound, a finalized one
	// with ErrPrecondition.
	TakeOverAppendStream(ctx context.Context, key string) (AppendStream, error)
}

// AppendStream appends to one object. It is not safe for concurrent use,
// except that Close may be called while an Append runs in another goroutine
// (a writer shutting down): it waits for that Append.
type AppendStream interface {
	// Append writes p at the end of the object and returns once p is durable
	// (flushed). It fails with ErrPrecondition once another stream has taken
	// the object over; after any failure the stream is unusable and the
	// caller takes the object over again to learn what was persisted.
	Append(ctx context.Context, p []byte) error
	// Size is the object's size as this stream knows it: what it found when
	// it was opened plus what it appended since.
	Size() int64
	// Close ends the stream without finalizing the object.
	Close() error
}

// AppendStreamReporter is a wrapper that says whether the store below it
// serves append streams: a wrapper implements AppendStreamer to pass them
// through, so a type assertion on it proves nothing.
type AppendStreamReporter interface {
	ServesAppendStreams() bool
}

// ServesAppendStreams reports whether s serves append streams: what it
// reports if it is an AppendStreamReporter, otherwise whether it is an
// AppendStreamer.
func ServesAppendStreams(s Store) bool {
	if r, ok := s.(AppendStreamReporter); ok {
		return r.ServesAppendStreams()
	}
	_, ok := s.(AppendStreamer)
	return ok
}

// PipelinedAppendStream is an AppendStream that takes appends while earlier
// ones are still in flight (GCS appendable objects: several flushes on one
// stream), so that an append waits for its own round trip and not also for
// the one before it.
type PipelinedAppendStream interface {
	AppendStream
	// Send writes p after every byte sent before it and returns without
	// waiting for p to be durable. done is called exactly once, in the
	// order of the Sends, with nil once p is durable, or with the error
	// that failed the stream: a failure fails every Send after it (and
	// may fail those before it still in flight), and the bytes of a
	// failed Send may or may not be in the object (the caller takes the
	// object over again to learn what was persisted). If ctx ends before
	// p is durable, the stream fails. done may run before Send returns
	// and must not block; if Send returns an error, nothing was sent and
	// done is never called. Size counts what was sent, durable or not. Send
	// is safe for concurrent use; Close fails the Sends still in flight.
	Send(ctx context.Context, p []byte, done func(error)) error
}

// SendAndWait is Append for a pipelined stream: it sends p and waits for
// its acknowledgement (a Send whose ctx ends fails the stream).
func SendAndWait(ctx context.Context, st PipelinedAppendStream, p []byte) error {
	ch := make(chan error, 1)
	if err := st.Send(ctx, p, func(err error) { ch <- err }); err != nil {
		return err
	}
	return <-ch
}
