package regional

import (
	"bytes"
	"context"
	"crypto/md5"
	"net/http"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter implements blob.Store.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if _, ok := o.If.Generation(); ok && !s.opts.LocalPreconditions {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrUnsupported, "generation preconditions on this bucket")
	}
	wctx, cancel := context.WithCancel(ctx)
	wo := &gcblob.WriterOptions{
		ContentType:        o.ContentType,
		CacheControl:       o.CacheControl,
		ContentDisposition: o.ContentDisposition,
		ContentEncoding:    o.ContentEncoding,
		ContentLanguage:    o.ContentLanguage,
		ContentMD5:         o.ContentMD5,
		Metadata:           o.Metadata,
		// Local mode checks existence itself at commit, under the key lock.
		IfNotExist: o.If.NotExist() && !s.opts.LocalPreconditions,
	}
	var token string
	if s.opts.LocalPreconditions {
		md := make(map[string]string, len(o.Metadata)+1)
		for k, v := range o.Metadata {
			md[k] = v
		}
		token = newGeneration()
		md[generationKey] = token
		wo.Metadata = md
	}
	if s.opts.BufferedUploads {
		cancel()
		return &uploadWriter{s: s, ctx: ctx, key: key, cond: o.If, wo: wo, written: written{token: token}}, nil
	}
	w, err := s.b.NewWriter(wctx, key, wo)
	if err != nil {
		cancel()
		return nil, s.writeError(key, err, classify)
	}
	return &writer{s: s, w: w, ctx: ctx, cancel: cancel, key: key, cond: o.If, written: written{token: token}}, nil
}

// written is what both writers know of the version they wrote. On buckets
// with local preconditions the generation is the token the write stored in
// the object's metadata, which Stat reports. Otherwise it is the backend's
// ETag, which gocloud's writers do not return: such writes report none.
type written struct {
	token string // the generation token the write carries, if any
	gen   string // token, once Close returned nil
}

func (w *written) commit(err error) error {
	if err == nil {
		w.gen = w.token
	}
	return err
}

// WrittenGeneration implements blob.GenerationReporter.
func (w *written) WrittenGeneration() (string, bool) {
	return w.gen, w.gen != ""
}

// uploadWriter buffers a write and sends it with one Bucket.Upload at Close
// (see Options.BufferedUploads).
type uploadWriter struct {
	s      *Store
	ctx    context.Context
	key    string
	cond   blob.Condition
	wo     *gcblob.WriterOptions
	buf    bytes.Buffer
	closed bool
	written
}

func (w *uploadWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	return w.buf.Write(p)
}

func (w *uploadWriter) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if w.s.life.Closed() {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	wo := *w.wo
	if len(wo.ContentMD5) > 0 {
		// gocloud streams through a pipe when given an MD5 even on its
		// upload path; the sum is checked here instead.
		if sum := md5.Sum(w.buf.Bytes()); !bytes.Equal(sum[:], wo.ContentMD5) {
			return blob.Errorf(driver.OpWrite, w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the given %x", sum, wo.ContentMD5)
		}
		wo.ContentMD5 = nil
	}
	if wo.ContentType == "" {
		// Upload requires a content type; gocloud's writer would sniff one.
		wo.ContentType = http.DetectContentType(w.buf.Bytes())
	}
	if w.s.opts.LocalPreconditions {
		defer w.s.locks.lock(w.key)()
		if err := w.s.checkPrecondition(w.ctx, driver.OpWrite, w.key, w.cond); err != nil {
			return err
		}
	}
	err := w.s.b.Upload(w.ctx, w.key, bytes.NewReader(w.buf.Bytes()), &wo)
	return w.commit(w.s.writeError(w.key, err, driver.ClassifyWrite(classify, w.cond)))
}

// writer streams a write through gocloud's writer.
type writer struct {
	s      *Store
	w      *gcblob.Writer
	ctx    context.Context
	cancel context.CancelFunc
	key    string
	cond   blob.Condition
	closed bool
	failed error
	written
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	n, err := w.w.Write(p)
	if err != nil {
		w.failed = driver.WrapError(driver.OpWrite, w.key, err, classify)
		return n, w.failed
	}
	return n, nil
}

func (w *writer) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	defer w.cancel()
	if err := w.ctx.Err(); err != nil {
		w.abort()
		return driver.WrapError(driver.OpWrite, w.key, err, nil)
	}
	if w.failed != nil {
		w.abort()
		return w.failed
	}
	if w.s.life.Closed() {
		w.abort()
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	if w.s.opts.LocalPreconditions {
		unlock := w.s.locks.lock(w.key)
		defer unlock()
		if err := w.s.checkPrecondition(w.ctx, driver.OpWrite, w.key, w.cond); err != nil {
			w.abort()
			return err
		}
	}
	return w.commit(w.s.writeError(w.key, w.w.Close(), driver.ClassifyWrite(classify, w.cond)))
}

// abort makes gocloud discard what was written: a writer whose context is
// canceled commits nothing.
func (w *writer) abort() {
	w.cancel()
	w.w.Close()
}

// writeError wraps a failed write, naming a file tree's file/directory
// conflict for what it is.
func (s *Store) writeError(key string, err error, classify func(error) error) error {
	if s.opts.fileTree {
		if c := fileConflict(driver.OpWrite, key, err); c != err {
			return c
		}
	}
	return driver.WrapError(driver.OpWrite, key, err, classify)
}
