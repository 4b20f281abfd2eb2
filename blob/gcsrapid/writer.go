package gcsrapid

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	gax "github.com/googleapis/gax-go/v2"
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
	// id identifies the object this write creates (see writeIDKey); empty
	// for a prewarmed writer that writes into its prewarmed object, whose
	// generation is known.
	id string
	// declared is the size the object declares (see sizeKey), if any;
	// replacing says a prewarmed object is being replaced by one that does.
	declared  string
	replacing bool
	// took is the generation a recovery took over, whose stream's replies
	// need not name it.
	took   int64
	gen    int64 // of the committed object, once Close returned nil
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
		if err := w.open(w.s.opts.MaxBuffer, true); err != nil {
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
		if w.takenByLeftover(w.err) {
			// A streamed write's bytes are gone: it cannot go on.
			if removed, rerr := w.s.removeLeftover(w.ctx, w.key); rerr == nil && removed {
				w.err = errLeftoverRemoved(w.key)
			}
		}
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
// write's preconditions whose first message carries the first size bytes
// (streaming: the write's size is not known yet).
//
// A write that takes more than one message declares its size in the object's
// metadata ("?" when streaming; see sizeKey), so that no reader sees it before
// it is whole. A prewarmed object exists already without a declaration, so
// such a write replaces it (on condition of its generation) with a new one
// that declares its size: one metadata operation, for writes of more than
// maxMessage bytes only.
func (w *writer) open(size int, streaming bool) error {
	var declare string
	if streaming || size > maxMessage {
		// Committed by declaring the size at Close: the metadata update
		// changes the object's metageneration, which is what lets a
		// leftover be removed without risk to a write that committed
		// (see Options.LeftoverAge).
		declare = "?"
	}
	o := w.s.bucket.Object(w.key)
	opts := &w.opts
	switch {
	case w.warm != nil && declare == "":
		w.sw, w.cancel = w.warm.sw, w.warm.cancel
		return nil
	case w.warm != nil:
		o = o.If(storage.Conditions{GenerationMatch: w.warm.gen})
		opts = withMark(opts)
		w.replacing = true
		ww := w.warm
		w.s.background(func(context.Context) {
			ww.sw.Close()
			ww.cancel()
		})
	case w.opts.If.NotExist():
		o = o.If(storage.Conditions{DoesNotExist: true})
	case w.opts.If.GenerationMatch() != "":
		g, err := parseGeneration(driver.OpWrite, w.key, w.opts.If.GenerationMatch())
		if err != nil {
			return err
		}
		o = o.If(storage.Conditions{GenerationMatch: g})
	}
	w.id, w.declared = newWriteID(), declare
	w.sw, w.cancel = w.s.openStream(o, withWriteID(opts, w.id, declare), roundUp(max(size, 1), googleapi.MinUploadChunkSize))
	return nil
}

func newWriteID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (w *writer) Close() error {
	if err := w.enter(driver.OpWrite); err != nil {
		return err
	}
	defer w.busy.Store(false)
	w.begin()
	w.closed = true
	err := w.commit()
	if w.takenByLeftover(err) {
		err = w.overLeftover(err)
	}
	if err != nil {
		w.abandon()
		return err
	}
	w.gen = w.committedGeneration()
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
	buffered := w.sw == nil
	if buffered {
		if err := w.open(w.buf.Len(), false); err != nil {
			return err
		}
	}
	var p []byte
	if buffered {
		p = w.buf.Bytes()
	}
	err := w.flushAll(p)
	if err != nil && buffered && w.ctx.Err() == nil {
		// The stream failed. If the object it created exists, finish it
		// rather than leave an empty or partial object, or report as
		// ErrExists an object that only this write made.
		err = w.recover(err)
	}
	if err != nil {
		return err
	}
	if w.declared == "?" {
		// A streamed write commits by declaring the size it reached.
		if err := w.s.declare(w.ctx, w.key, w.sw.Attrs(), w.wrote); err != nil {
			return driver.WrapError(driver.OpWrite, w.key, err, classify)
		}
	}
	if w.warm != nil && !w.replacing && w.wrote == 0 {
		// No byte tells readers that this write committed: clearing the
		// prewarm mark does.
		if err := w.s.unmark(w.ctx, w.key, w.warm.gen); err != nil {
			return driver.WrapError(driver.OpWrite, w.key, err, classify)
		}
	}
	return nil
}

// flushAll sends p and flushes, then checks what the service says it
// persisted: the persisted size of its last reply, which must be every byte
// written. (The client's Flush returns the offset it aimed at, not what the
// service reported.)
func (w *writer) flushAll(p []byte) error {
	if p != nil {
		if err := w.send(p); err != nil {
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
		w.err = driver.WrapError(driver.OpWrite, w.key, err, w.classifier())
		return w.err
	}
	if a := w.sw.Attrs(); a != nil {
		flushed = a.Size
	}
	if flushed != w.wrote {
		w.err = blob.Errorf(driver.OpWrite, w.key, nil, "gcsrapid: the service persisted %d bytes, %d were written", flushed, w.wrote)
		return w.err
	}
	return nil
}

// recover finishes a buffered write whose stream failed, within the Store's
// retries: if the object the stream created exists (found by its generation,
// from the service's reply or the prewarm, or else by this write's
// identifier), it is taken over and given the bytes the service did not
// persist. An error that found no object of this write's is returned as it
// was (an ErrExists then names another writer's object).
func (w *writer) recover(err error) error {
	bo := backoff()
	data := w.buf.Bytes()
	for attempt := 0; attempt <= max(w.s.opts.Retries, 0); attempt++ {
		gen, ferr := w.ownGeneration()
		if ferr != nil || gen == 0 {
			return err
		}
		w.s.stats.recoveries.Add(1)
		ferr = w.complete(gen, data)
		if ferr == nil {
			w.err = nil
			return nil
		}
		if errors.Is(ferr, errNotOurs) || w.ctx.Err() != nil {
			return err
		}
		err = driver.WrapError(driver.OpWrite, w.key, ferr, w.classifier())
		if pause := bo.Pause(); gax.Sleep(w.ctx, pause) != nil {
			break
		}
	}
	return err
}

var errNotOurs = errors.New("gcsrapid: the object is no longer this write's")

// ownGeneration returns the generation of the object this write created, or
// 0 if none exists: from the service's reply or the prewarm, or else the
// live object if it carries this write's identifier.
func (w *writer) ownGeneration() (int64, error) {
	if w.warm != nil && !w.replacing {
		return w.warm.gen, nil
	}
	if a := w.sw.Attrs(); a != nil && a.Generation > 0 {
		return a.Generation, nil
	}
	if w.id == "" {
		return 0, nil
	}
	a, err := w.s.bucket.Object(w.key).Attrs(w.ctx)
	if errors.Is(classify(err), blob.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if a.Metadata[writeIDKey] != w.id {
		return 0, nil
	}
	return a.Generation, nil
}

// complete takes generation gen over and appends what it lacks of data. The
// takeover's reply carries the size the service persisted, which is what
// the object holds.
func (w *writer) complete(gen int64, data []byte) error {
	sctx, cancel := context.WithCancel(w.s.bgCtx)
	tw, size, err := w.s.takeOver(w.ctx, sctx, cancel, w.key, gen,
		&storage.AppendableWriterOpts{ChunkSize: roundUp(max(len(data), 1), googleapi.MinUploadChunkSize)})
	if err != nil {
		if errors.Is(classify(err), blob.ErrNotFound) {
			return errNotOurs
		}
		return err
	}
	old, oldCancel := w.sw, w.cancel
	w.sw, w.cancel, w.took = tw, cancel, gen
	w.s.background(func(context.Context) {
		old.Close()
		oldCancel()
	})
	if size > int64(len(data)) {
		return errNotOurs
	}
	if size == int64(len(data)) {
		return nil
	}
	w.wrote = size
	return w.flushAll(data[size:])
}

// abandon ends a write that will not commit. A buffered write that never
// reached the bucket leaves nothing; an object this writer created or streamed
// into is deleted, on condition of its generation, before Close returns, so
// that a failed write leaves no object of its own behind (unless the delete
// fails too: the error Close returns says the write failed, and an object of
// it may remain). The generation is the prewarm's, the service's reply's, or,
// when the stream failed before any reply, the live object's if it carries
// this write's identifier.
func (w *writer) abandon() {
	if w.sw == nil && w.warm == nil {
		return
	}
	sw, cancel, ww := w.sw, w.cancel, w.warm
	if sw == nil {
		sw, cancel = ww.sw, ww.cancel
	}
	cancel()
	sw.Close()
	var gen int64
	if ww != nil && !w.replacing {
		gen = ww.gen
	} else if a := sw.Attrs(); a != nil {
		gen = a.Generation
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(w.s.bgCtx), abandonTimeout)
	defer stop()
	o := w.s.bucket.Object(w.key)
	if gen == 0 && w.id != "" {
		if a, err := o.Attrs(ctx); err == nil && a.Metadata[writeIDKey] == w.id {
			gen = a.Generation
		}
	}
	if gen > 0 {
		o.If(storage.Conditions{GenerationMatch: gen}).Delete(ctx)
	}
	if w.replacing {
		// The prewarmed object, if the replacement never landed.
		o.If(storage.Conditions{GenerationMatch: ww.gen}).Delete(ctx)
	}
}

// overLeftover handles a conditional create that found its key taken: if
// what holds it is a leftover (see Options.LeftoverAge), it is removed and a
// buffered write is made again, once; a streamed write, whose bytes are
// gone, fails with an error that is not ErrExists, so that its caller may
// write again. Otherwise err stands.
func (w *writer) overLeftover(err error) error {
	removed, rerr := w.s.removeLeftover(w.ctx, w.key)
	if rerr != nil || !removed {
		return err
	}
	if w.sw != nil {
		sw, cancel := w.sw, w.cancel
		w.s.background(func(context.Context) {
			sw.Close()
			cancel()
		})
	}
	if w.declared == "?" && w.buf.Len() == 0 && w.wrote > 0 {
		return errLeftoverRemoved(w.key)
	}
	w.sw, w.cancel, w.wrote, w.err, w.id, w.declared, w.took = nil, nil, 0, nil, "", "", 0
	return w.commit()
}

// takenByLeftover reports whether err is a conditional create's ErrExists,
// which a leftover may have caused.
func (w *writer) takenByLeftover(err error) bool {
	return err != nil && w.opts.If.NotExist() && w.warm == nil && errors.Is(err, blob.ErrExists)
}

// errLeftoverRemoved fails a streamed conditional create whose key a
// leftover held: not ErrExists, as no committed write holds the key now.
func errLeftoverRemoved(key string) error {
	return blob.Errorf(driver.OpWrite, key, nil, "gcsrapid: the key was held by the leftover of a write that never committed, now removed; write again")
}

// removeLeftover removes the live object of key if it is a leftover: it
// declares a size not yet committed ("?") and was created more than
// LeftoverAge ago. The delete is conditional on the generation and
// metageneration seen, so a write that committed meanwhile (its declaration
// changes the metageneration) is kept. It reports whether the key is now
// free of it.
func (s *Store) removeLeftover(ctx context.Context, key string) (bool, error) {
	o := s.bucket.Object(key)
	a, err := o.Attrs(ctx)
	if errors.Is(classify(err), blob.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if d, ok := declaredSize(a.Metadata); !ok || d >= 0 || a.Created.IsZero() || time.Since(a.Created) < s.opts.LeftoverAge {
		return false, nil
	}
	err = o.If(storage.Conditions{GenerationMatch: a.Generation, MetagenerationMatch: a.Metageneration}).Delete(ctx)
	switch kind := classify(err); {
	case err == nil:
		s.stats.leftovers.Add(1)
		return true, nil
	case kind == blob.ErrNotFound:
		return true, nil
	default:
		return false, nil // committed or replaced meanwhile: the key is taken
	}
}

// declare commits a streamed write: the generation a names declares size in
// place of "?", so that readers see it, and see its size even when the one
// the service reports is out of date.
func (s *Store) declare(ctx context.Context, key string, a *storage.ObjectAttrs, size int64) error {
	if a == nil || a.Generation == 0 {
		return errors.New("gcsrapid: the service did not name the streamed object's generation")
	}
	_, err := s.bucket.Object(key).If(storage.Conditions{GenerationMatch: a.Generation}).
		Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{sizeKey: strconv.FormatInt(size, 10)}})
	return err
}

// committedGeneration returns the generation of the object a successful
// commit wrote, from what the write learned, or 0 if it never learned it.
// Appends into an appendable object keep its generation, and a declaration
// or an unmark is a metadata update on condition of the generation, which
// changes the metageneration only; so the generation the stream was opened
// on, or first reported, is the one Stat reports. It must be read before the
// stream's background Close, which may still update the stream's attributes.
func (w *writer) committedGeneration() int64 {
	switch {
	case w.warm != nil && !w.replacing && w.warm.gen > 0:
		return w.warm.gen
	case w.took > 0:
		return w.took
	case w.sw == nil:
		return 0
	}
	if a := w.sw.Attrs(); a != nil {
		return a.Generation
	}
	return 0
}

// WrittenGeneration implements blob.GenerationReporter.
func (w *writer) WrittenGeneration() (string, bool) {
	if w.gen <= 0 {
		return "", false
	}
	return strconv.FormatInt(w.gen, 10), true
}

// abandonTimeout bounds the cleanup of a failed write.
const abandonTimeout = 30 * time.Second

func roundUp(n, unit int) int { return (n + unit - 1) / unit * unit }

// String helps debugging without exposing data.
func (w *writer) String() string { return fmt.Sprintf("gcsrapid writer %s/%s", w.s.name, w.key) }
