package gcsrapid

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// warmWriter is an appendable object that exists (created and flushed empty)
// with its write stream open, ready to take bytes with one flush.
type warmWriter struct {
	sw     *storage.Writer
	key    string
	gen    int64
	cancel context.CancelFunc // ends the stream
}

// openStream starts an appendable writer on o whose stream lives until
// cancel, not as long as the caller's ctx: a flushed object stays valid after
// the call that created it returns.
//
// chunk is the client's buffer. With 0 the client sends each Write without a
// copy, but opens the stream with a message that creates the object empty:
// right for pooled writers, whose objects exist already and are private.
// Otherwise it must hold the whole first write, so that the message creating
// the object carries its bytes and no reader ever sees a replaced object
// empty. (The client's default, 16 MiB for every writer that receives a byte,
// would cost a large allocation per small write.)
func (s *Store) openStream(o *storage.ObjectHandle, opts *blob.WriterOptions, chunk int) (*storage.Writer, context.CancelFunc) {
	ctx, cancel := context.WithCancel(s.bgCtx)
	sw := o.NewWriter(ctx)
	sw.Append = true
	sw.FinalizeOnClose = false
	sw.ChunkSize = chunk
	if opts != nil {
		sw.ContentType = opts.ContentType
		sw.CacheControl = opts.CacheControl
		sw.ContentDisposition = opts.ContentDisposition
		sw.ContentEncoding = opts.ContentEncoding
		sw.ContentLanguage = opts.ContentLanguage
		sw.Metadata = opts.Metadata
	}
	return sw, cancel
}

// untilDone runs f, aborting the stream if ctx ends first.
func untilDone(ctx context.Context, cancel context.CancelFunc, f func() error) error {
	stop := context.AfterFunc(ctx, cancel)
	err := f()
	if !stop() && err == nil {
		err = ctx.Err()
	}
	return err
}

// prewarm creates key (which must not exist) and leaves its stream open.
func (s *Store) prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (*warmWriter, error) {
	sw, cancel := s.openStream(s.bucket.Object(key).If(storage.Conditions{DoesNotExist: true}), withMark(opts), 0)
	err := untilDone(ctx, cancel, func() error {
		_, err := sw.Flush()
		return err
	})
	if err != nil {
		cancel()
		sw.Close()
		return nil, driver.WrapError(driver.OpPrewarm, key, err, driver.ClassifyWrite(classify, blob.IfNotExist()))
	}
	ww := &warmWriter{sw: sw, key: key, cancel: cancel}
	if a := sw.Attrs(); a != nil {
		ww.gen = a.Generation
	}
	return ww, nil
}

// Prewarm implements blob.Prewarmer: it creates key now, so that the returned
// writer's Write and Close cost one data round trip.
func (s *Store) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpPrewarm, key); err != nil {
		return nil, err
	}
	if opts != nil && opts.If.GenerationMatch() != "" {
		return nil, blob.Errorf(driver.OpPrewarm, key, blob.ErrInvalidArgument, "a prewarmed key must not exist: IfGenerationMatch makes no sense")
	}
	ww, err := s.prewarm(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return s.newWriter(ctx, key, opts, ww), nil
}

// NewWriter implements blob.Store. The object is created and its bytes
// flushed at Close, in one round trip for writes up to MaxBuffer; it is left
// unfinalized (see Finalize).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if opts != nil {
		if err := opts.If.Validate(driver.OpWrite, key); err != nil {
			return nil, err
		}
		if g := opts.If.GenerationMatch(); g != "" {
			if _, err := parseGeneration(driver.OpWrite, key, g); err != nil {
				return nil, err
			}
		}
	}
	return s.newWriter(ctx, key, opts, nil), nil
}

func (s *Store) newWriter(ctx context.Context, key string, opts *blob.WriterOptions, ww *warmWriter) *writer {
	w := &writer{s: s, ctx: ctx, key: key, warm: ww}
	if ww == nil {
		w.started = time.Now()
	}
	if opts != nil {
		w.opts = *opts
		if len(opts.ContentMD5) > 0 {
			w.md5 = md5.New()
		}
	}
	return w
}

// writer buffers a write and commits it with one flush at Close.
type writer struct {
	s       *Store
	ctx     context.Context
	key     string
	opts    blob.WriterOptions
	warm    *warmWriter // pre-created object, or nil
	started time.Time   // when the write began: NewWriter, or a prewarmed writer's first use

	buf    bytes.Buffer
	md5    hash.Hash
	sw     *storage.Writer // open stream once streaming or committing
	cancel context.CancelFunc
	wrote  int64
	busy   atomic.Bool
	closed bool
	err    error
}

// begin starts the write's clock at its first use: a prewarmed writer may
// wait in a pool long before anyone writes to it.
func (w *writer) begin() {
	if w.started.IsZero() {
		w.started = time.Now()
	}
}

var errConcurrentUse = errors.New("gcsrapid: concurrent use of one writer")

func (w *writer) enter(op string) error {
	if !w.busy.CompareAndSwap(false, true) {
		return &blob.Error{Op: op, Key: w.key, Err: errConcurrentUse}
	}
	if w.closed {
		w.busy.Store(false)
		return driver.ClosedError(op, w.key)
	}
	return nil
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.enter(driver.OpWrite); err != nil {
		return 0, err
	}
	defer w.busy.Store(false)
	w.begin()
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		return 0, driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if w.md5 != nil {
		w.md5.Write(p)
	}
	if w.sw == nil && w.buf.Len()+len(p) <= w.s.opts.MaxBuffer {
		return w.buf.Write(p)
	}
	// Too large to buffer: stream from here on.
	if w.sw == nil {
		if err := w.open(w.s.opts.MaxBuffer); err != nil {
			w.err = err
			return 0, err
		}
		if err := w.send(w.buf.Bytes()); err != nil {
			return 0, err
		}
		w.buf = bytes.Buffer{}
	}
	if err := w.send(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *writer) send(p []byte) error {
	_, err := w.sw.Write(p)
	if err != nil {
		w.err = driver.WrapError(driver.OpWrite, w.key, err, w.classifier())
		return w.err
	}
	w.wrote += int64(len(p))
	return nil
}

// classifier classifies the errors of the write's commit under its
// condition; a prewarmed object was created under IfNotExist.
func (w *writer) classifier() func(error) error {
	if w.warm != nil {
		return driver.ClassifyWrite(classify, blob.IfNotExist())
	}
	return driver.ClassifyWrite(classify, w.opts.If)
}

// open starts the stream: the warm one, or a new appendable object with the
// write's preconditions whose first message carries the first size bytes.
func (w *writer) open(size int) error {
	if w.warm != nil {
		w.sw, w.cancel = w.warm.sw, w.warm.cancel
		return nil
	}
	o := w.s.bucket.Object(w.key)
	switch {
	case w.opts.If.NotExist():
		o = o.If(storage.Conditions{DoesNotExist: true})
	case w.opts.If.GenerationMatch() != "":
		g, err := parseGeneration(driver.OpWrite, w.key, w.opts.If.GenerationMatch())
		if err != nil {
			return err
		}
		o = o.If(storage.Conditions{GenerationMatch: g})
	}
	w.sw, w.cancel = w.s.openStream(o, &w.opts, roundUp(max(size, 1), googleapi.MinUploadChunkSize))
	return nil
}

func (w *writer) Close() error {
	if err := w.enter(driver.OpWrite); err != nil {
		return err
	}
	defer w.busy.Store(false)
	w.begin()
	w.closed = true
	err := w.commit()
	if err != nil {
		w.abandon()
		return err
	}
	d := time.Since(w.started)
	w.s.stats.writes.add(d)
	w.s.metrics.recordWrite(w.s, d)
	// The object is durable once flushed; ending the stream is bookkeeping
	// that need not delay the caller.
	sw, cancel := w.sw, w.cancel
	w.s.background(func(context.Context) {
		sw.Close()
		cancel()
	})
	return nil
}

func (w *writer) commit() error {
	if w.err != nil {
		return w.err
	}
	if err := w.s.life.CheckOpen(driver.OpWrite, w.key); err != nil {
		return err
	}
	if err := w.ctx.Err(); err != nil {
		return driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if w.md5 != nil {
		if sum := w.md5.Sum(nil); !bytes.Equal(sum, w.opts.ContentMD5) {
			return blob.Errorf(driver.OpWrite, w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the given %x", sum, w.opts.ContentMD5)
		}
	}
	if w.sw == nil {
		if err := w.open(w.buf.Len()); err != nil {
			return err
		}
		if err := w.send(w.buf.Bytes()); err != nil {
			return err
		}
	}
	var flushed int64
	err := untilDone(w.ctx, w.cancel, func() error {
		var err error
		flushed, err = w.sw.Flush()
		return err
	})
	if err != nil {
		return driver.WrapError(driver.OpWrite, w.key, err, w.classifier())
	}
	if flushed != w.wrote {
		return blob.Errorf(driver.OpWrite, w.key, nil, "gcsrapid: flushed %d bytes, wrote %d", flushed, w.wrote)
	}
	if w.warm != nil && w.wrote == 0 {
		// No byte tells readers that this write committed: clearing the
		// prewarm mark does.
		if err := w.s.unmark(w.ctx, w.key, w.warm.gen); err != nil {
			return driver.WrapError(driver.OpWrite, w.key, err, classify)
		}
	}
	return nil
}

// abandon ends a write that will not commit. A buffered write that never
// reached the bucket leaves nothing; an object this writer created or streamed
// into is deleted, by generation, in the background.
func (w *writer) abandon() {
	if w.sw == nil && w.warm == nil {
		return
	}
	sw, cancel, ww := w.sw, w.cancel, w.warm
	if sw == nil {
		sw, cancel = ww.sw, ww.cancel
	}
	var gen int64
	if ww != nil {
		gen = ww.gen
	} else if a := sw.Attrs(); a != nil && w.wrote > 0 {
		gen = a.Generation
	}
	w.s.background(func(ctx context.Context) {
		cancel()
		sw.Close()
		if gen > 0 {
			w.s.bucket.Object(w.key).If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
		}
	})
}

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// String helps debugging without exposing data.
func (w *writer) String() string { return fmt.Sprintf("gcsrapid writer %s/%s", w.s.name, w.key) }
