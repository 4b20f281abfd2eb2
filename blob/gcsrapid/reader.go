package gcsrapid

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"sync"

	"cloud.google.com/go/storage"
	gax "github.com/googleapis/gax-go/v2"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewRangeReader implements blob.Store. Unfinalized objects are readable up
// to their last flush.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	if length == 0 {
		// The client reads to the end for length 0 on some paths; a
		// zero-length read only needs the object to exist.
		a, err := s.Stat(ctx, key)
		if err != nil {
			return nil, driver.WrapError(driver.OpRead, key, err, classify)
		}
		return driver.EmptyReader(a), nil
	}
	if length < 0 {
		// To the end, which for an unfinalized object may lie past the size
		// its metadata reports: ask for everything there is rather than for
		// "the rest", which the client would check against that metadata's
		// checksum. Each message's checksum is still checked.
		length = math.MaxInt64 - offset
	}
	o := s.bucket.Object(key)
	r, err := openRead(ctx, s, func() (*storage.Reader, error) { return o.NewRangeReader(ctx, offset, length) })
	if isOutOfRange(err) {
		a, serr := s.Stat(ctx, key)
		if serr != nil {
			return nil, driver.WrapError(driver.OpRead, key, serr, classify)
		}
		if offset >= a.Size {
			return driver.EmptyReader(a), nil
		}
	}
	if err != nil {
		return nil, driver.WrapError(driver.OpRead, key, err, classify)
	}
	var size int64 // the object's size when the reported one is known to be out of date
	if md := r.Metadata(); doubtful(md, r.Attrs.Size) {
		hide, n, err := s.hidden(ctx, key, r.Attrs.Generation, md, r.Attrs.Size)
		if err != nil || hide {
			r.Close()
		}
		if err != nil {
			return nil, driver.WrapError(driver.OpRead, key, err, classify)
		}
		if hide {
			return nil, notFoundUnwritten(driver.OpRead, key)
		}
		size = n
	}
	end := int64(math.MaxInt64)
	if length < end-offset {
		end = offset + length
	}
	body := &rangeReader{s: s, ctx: ctx, key: key, gen: r.Attrs.Generation, r: r, off: offset, end: end}
	return driver.NewReader(key, body, func() *blob.Attributes {
		a := r.Attrs
		return &blob.Attributes{
			Key: key, Size: max(a.Size, size), ContentType: a.ContentType, ContentEncoding: a.ContentEncoding,
			CacheControl: a.CacheControl, ModTime: a.LastModified, Generation: strconv.FormatInt(a.Generation, 10),
		}
	}, classify), nil
}

// OpenReaderAt implements blob.ReaderAtOpener with one multi-range download
// stream: concurrent ReadAt calls share it instead of opening a read each.
func (s *Store) OpenReaderAt(ctx context.Context, key string) (blob.ReaderAt, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	// The stream's first reply does not carry the object's custom metadata,
	// which says whether it holds a committed write (a prewarmed object not
	// yet written, or one whose write is still under way): a Stat beside the
	// open does, at the cost of one metadata read but no added latency.
	type statted struct {
		a   *storage.ObjectAttrs
		err error
	}
	stat := make(chan statted, 1)
	go func() {
		a, err := s.bucket.Object(key).Attrs(ctx)
		stat <- statted{a, err}
	}()
	o := s.bucket.Object(key)
	// The stream outlives the open's context: each ReadAtContext ends with
	// its own (a reader held in a cache serves callers that each bring one).
	sctx := context.WithoutCancel(ctx)
	mrd, err := openRead(ctx, s, func() (*storage.MultiRangeDownloader, error) { return o.NewMultiRangeDownloader(sctx) })
	st := <-stat
	if err != nil {
		return nil, driver.WrapError(driver.OpRead, key, err, classify)
	}
	gen, size := mrd.Attrs.Generation, mrd.Attrs.Size
	if st.err == nil && st.a.Generation != gen {
		// The object changed between the two: ask about the stream's.
		st.a, st.err = s.bucket.Object(key).Generation(gen).Attrs(ctx)
	}
	if st.err == nil {
		var hide bool
		hide, size, st.err = s.hidden(ctx, key, gen, st.a.Metadata, max(size, st.a.Size))
		if st.err == nil && hide {
			st.err = notFoundUnwritten(driver.OpRead, key)
		}
	}
	if st.err != nil {
		mrd.Close()
		return nil, driver.WrapError(driver.OpRead, key, st.err, classify)
	}
	return &readerAt{s: s, ctx: ctx, sctx: sctx, mrd: mrd, key: key, gen: gen, size: size}, nil
}

// readerAt serves ReadAt from one multi-range stream. The service may end a
// read stream at any time (the storage-testbench cancels them after 10 s);
// the client then fails every later range on it, so a ReadAt that fails
// opens another stream on the same generation and asks again for what it
// has not received, within the Store's retries.
type readerAt struct {
	s      *Store
	ctx    context.Context // the open's: ReadAt's
	sctx   context.Context // the streams': the open's, without its end
	key    string
	gen    int64
	mu     sync.Mutex
	mrd    *storage.MultiRangeDownloader
	size   int64
	closed bool
	reopen int // streams opened after the first
}

// Size is the object's size as far as known: the size reported when the
// stream opened, or the end of the furthest read, whichever is larger.
func (r *readerAt) Size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.size
}

func (r *readerAt) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadAtContext(r.ctx, p, off)
}

// ReadAtContext reads under ctx: once ctx ends it returns ctx's error,
// leaving the range it asked for to land in a buffer nobody reads, and the
// stream open for other calls.
func (r *readerAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	switch {
	case closed:
		return 0, driver.ClosedError(driver.OpRead, r.key)
	case off < 0:
		return 0, blob.Errorf(driver.OpRead, r.key, blob.ErrInvalidArgument, "negative offset %d", off)
	case len(p) == 0:
		return 0, nil
	}
	// The size reported when the stream opened may be out of date for an
	// unfinalized object: read past it, to the true end.
	var buf bytes.Buffer
	bo := backoff()
	tries := 0 // streams reopened since the last progress
	for {
		// An ended context fails the read whatever else is ready: the
		// select below picks at random between a range that landed at once
		// and ctx.Done.
		if err := ctx.Err(); err != nil {
			return 0, driver.WrapError(driver.OpRead, r.key, err, classify)
		}
		r.mu.Lock()
		mrd := r.mrd
		r.mu.Unlock()
		got := buf.Len()
		at := off + int64(got)
		// Each range lands in a buffer of its own, so that one abandoned
		// when ctx ends cannot write into the next.
		part := new(bytes.Buffer)
		done := make(chan error, 1)
		mrd.Add(part, at, int64(len(p)-buf.Len()), func(_, _ int64, err error) { done <- err })
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			return 0, driver.WrapError(driver.OpRead, r.key, ctx.Err(), classify)
		}
		buf.Write(part.Bytes())
		if err == nil {
			break
		}
		if at >= r.Size() && (isOutOfRange(err) || errors.Is(classify(err), blob.ErrInvalidArgument)) {
			if buf.Len() > 0 {
				break
			}
			return 0, io.EOF
		}
		if buf.Len() > got {
			tries = 0 // the retries count streams ended without progress
		}
		if classify(err) != nil || tries >= max(r.s.opts.Retries, 0) || ctx.Err() != nil {
			return 0, driver.WrapError(driver.OpRead, r.key, err, classify)
		}
		tries++
		// The stream ended under this read: open another from where it got.
		if perr := gax.Sleep(ctx, bo.Pause()); perr != nil {
			return 0, driver.WrapError(driver.OpRead, r.key, err, classify)
		}
		if rerr := r.reopenStream(ctx, mrd); rerr != nil {
			return 0, driver.WrapError(driver.OpRead, r.key, rerr, classify)
		}
	}
	n := copy(p, buf.Bytes())
	r.mu.Lock()
	r.size = max(r.size, off+int64(n))
	r.mu.Unlock()
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// reopenStream replaces the stream old (if it is still the current one) by a
// new one on the same generation, which lives as long as the reader; ctx
// bounds the wait.
func (r *readerAt) reopenStream(ctx context.Context, old *storage.MultiRangeDownloader) error {
	o := r.s.bucket.Object(r.key).Generation(r.gen)
	mrd, err := openRead(ctx, r.s, func() (*storage.MultiRangeDownloader, error) { return o.NewMultiRangeDownloader(r.sctx) })
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed || r.mrd != old {
		r.mu.Unlock()
		mrd.Close()
		return nil
	}
	r.mrd = mrd
	r.reopen++
	r.mu.Unlock()
	r.s.stats.readReopens.Add(1)
	go old.Close()
	return nil
}

func (r *readerAt) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	mrd := r.mrd
	r.mu.Unlock()
	mrd.Wait()
	return mrd.Close()
}

// rangeReader is the body of a range read. The service may end a read stream
// at any time (the storage-testbench cancels them after 10 s); when it ends
// under a read, rangeReader opens another on the same generation from the
// offset reached, up to the Store's retries in a row without progress.
type rangeReader struct {
	s     *Store
	ctx   context.Context
	key   string
	gen   int64
	r     *storage.Reader
	off   int64 // the next byte to read
	end   int64 // the end of the range
	tries int   // streams reopened since the last byte read
}

func (b *rangeReader) Read(p []byte) (int, error) {
	bo := backoff()
	for {
		n, err := b.r.Read(p)
		b.off += int64(n)
		if n > 0 {
			b.tries = 0
		}
		if err == nil || err == io.EOF || n > 0 {
			// An error after some bytes comes back on the next Read.
			if err != nil && err != io.EOF {
				err = nil
			}
			return n, err
		}
		if classify(err) != nil || b.tries >= max(b.s.opts.Retries, 0) || b.ctx.Err() != nil || b.off >= b.end {
			return 0, err
		}
		b.tries++
		if gax.Sleep(b.ctx, bo.Pause()) != nil {
			return 0, err
		}
		o := b.s.bucket.Object(b.key).Generation(b.gen)
		nr, oerr := openRead(b.ctx, b.s, func() (*storage.Reader, error) { return o.NewRangeReader(b.ctx, b.off, b.end-b.off) })
		if isOutOfRange(oerr) {
			return 0, io.EOF
		}
		if oerr != nil {
			return 0, err
		}
		b.r.Close()
		b.r = nr
		b.s.stats.readReopens.Add(1)
	}
}

func (b *rangeReader) Close() error { return b.r.Close() }
