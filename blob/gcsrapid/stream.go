package gcsrapid

import (
	"context"
	"sync"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

var _ blob.AppendStreamer = (*Store)(nil)

// CreateAppendStream implements blob.AppendStreamer: it creates key as an
// appendable object whose first message carries data, flushes it, and keeps
// the stream open, so that each later Append is one write and one flush.
//
// A stream trusts that it is the object's only writer until a takeover says
// otherwise, and fails with blob.ErrPrecondition if the service reports
// more bytes persisted than it sent (another writer's, which must never
// acknowledge its own); with client retries on (retries > 1) a retried stream could
// take the object back and resend bytes at offsets another writer has
// used, so code that shares objects between writers keeps the default.
func (s *Store) CreateAppendStream(ctx context.Context, key string, data []byte) (blob.AppendStream, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	// First data of more than one message would show its prefix while
	// it is written: the object declares "?" until all of it is flushed,
	// then its size (see sizeKey), as a large Put does; later appends
	// only add to what readers see.
	if s.pipelines() && len(data) <= maxMessage {
		// A first message holds the whole create, so it appears whole.
		return s.createPipe(ctx, key, data)
	}
	var opts *blob.WriterOptions
	if len(data) > maxMessage {
		opts = withWriteID(nil, newWriteID(), "?")
	}
	sw, cancel := s.openStream(s.bucket.Object(key).If(storage.Conditions{DoesNotExist: true}), opts,
		roundUp(max(len(data), 1), googleapi.MinUploadChunkSize))
	st := &appendStream{s: s, key: key, sw: sw, cancel: cancel}
	if err := st.write(ctx, data, driver.ClassifyWrite(classify, blob.IfNotExist())); err != nil {
		return nil, err
	}
	if opts != nil {
		if err := s.declare(ctx, key, sw.Attrs(), int64(len(data))); err != nil {
			st.Close()
			return nil, driver.WrapError(driver.OpWrite, key, err, classify)
		}
	}
	return st, nil
}

// TakeOverAppendStream implements blob.AppendStreamer with a takeover of the
// unfinalized object key: the previous stream's next flush fails.
func (s *Store) TakeOverAppendStream(ctx context.Context, key string) (blob.AppendStream, error) {
	if err := s.check(driver.OpAppend, key); err != nil {
		return nil, err
	}
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return nil, driver.WrapError(driver.OpAppend, key, err, classify)
	}
	if !a.Finalized.IsZero() {
		return nil, blob.Errorf(driver.OpAppend, key, blob.ErrPrecondition, "the object is finalized")
	}
	if s.pipelines() {
		return s.takeOverPipe(ctx, key, a.Generation)
	}
	sctx, cancel := context.WithCancel(s.bgCtx)
	sw, size, err := s.takeOver(ctx, sctx, cancel, key, a.Generation, &storage.AppendableWriterOpts{ChunkSize: googleapi.MinUploadChunkSize})
	if err != nil {
		return nil, driver.WrapError(driver.OpAppend, key, err, classify)
	}
	return &appendStream{s: s, key: key, sw: sw, cancel: cancel, size: size}, nil
}

// appendStream is an open appendable object.
type appendStream struct {
	// mu is held through each Append, so that a Close from another
	// goroutine (a writer shutting down) waits for it instead of racing it.
	mu     sync.Mutex
	s      *Store
	key    string
	sw     *storage.Writer
	cancel context.CancelFunc
	size   int64
	err    error
	closed bool
}

func (a *appendStream) Size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.size
}

func (a *appendStream) Append(ctx context.Context, p []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.write(ctx, p, classify)
}

// write sends p and flushes, failing the stream for good on any error.
func (a *appendStream) write(ctx context.Context, p []byte, kind func(error) error) error {
	if a.err != nil {
		return a.err
	}
	if a.s.life.Closed() {
		return driver.ClosedError(driver.OpAppend, a.key)
	}
	var flushed int64
	err := untilDone(ctx, a.cancel, func() error {
		if _, err := a.sw.Write(p); err != nil {
			return err
		}
		var err error
		flushed, err = a.sw.Flush()
		return err
	})
	if err == nil {
		// The durable tail is the persisted size of the service's reply, not
		// the offset the client's Flush aimed at.
		if at := a.sw.Attrs(); at != nil {
			flushed = at.Size
		}
	}
	switch {
	case err != nil:
		a.err = driver.WrapError(driver.OpAppend, a.key, err, kind)
	case flushed > a.size+int64(len(p)):
		// Another writer's bytes (a takeover), which must never
		// acknowledge this stream's.
		a.err = blob.Errorf(driver.OpAppend, a.key, blob.ErrPrecondition, "gcsrapid: the service persisted %d bytes, more than the %d this stream wrote: another writer appended", flushed, a.size+int64(len(p)))
	case flushed != a.size+int64(len(p)):
		a.err = blob.Errorf(driver.OpAppend, a.key, nil, "gcsrapid: the service persisted %d bytes, expected %d", flushed, a.size+int64(len(p)))
	}
	if a.err != nil {
		a.closeLocked()
		return a.err
	}
	a.size = flushed
	return nil
}

// Close ends the stream in the background without finalizing the object;
// an Append running in another goroutine finishes first.
func (a *appendStream) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closeLocked()
	return nil
}

func (a *appendStream) closeLocked() {
	if a.closed {
		return
	}
	a.closed = true
	if a.err == nil {
		a.err = driver.ClosedError(driver.OpAppend, a.key)
	}
	sw, cancel := a.sw, a.cancel
	a.s.background(func(context.Context) {
		sw.Close()
		cancel()
	})
}
