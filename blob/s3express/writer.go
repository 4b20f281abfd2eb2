package s3express

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"hash"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter implements blob.Store. Bytes are buffered up to
// MultipartThreshold and sent by Close in one PutObject; a larger write
// becomes a multipart upload whose parts are sent as they fill, completed by
// Close and aborted if the write fails or ctx ends first.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.life.Check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	w := &writer{s: s, ctx: ctx, key: key, op: driver.OpWrite}
	if opts != nil {
		if err := opts.If.Validate(driver.OpWrite, key); err != nil {
			return nil, err
		}
		w.opts = *opts
		if len(opts.ContentMD5) > 0 {
			w.md5 = md5.New()
		}
	}
	return w, nil
}

// NewAppender implements blob.Appender with PutObject and
// x-amz-write-offset-bytes: the appended bytes are sent by Close in one
// request at the offset the caller expects (IfSizeMatch) or, with
// IfSizeMatch < 0, at the size a HeadObject finds now. An offset that is no
// longer the object's size fails with ErrPrecondition.
func (s *Store) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	if err := s.life.Check(driver.OpAppend, key); err != nil {
		return nil, err
	}
	o, err := blob.CheckAppend(key, opts)
	if err != nil {
		return nil, err
	}
	if err := s.waitWarm(ctx, driver.OpAppend, key); err != nil {
		return nil, err
	}
	w := &writer{s: s, ctx: ctx, key: key, op: driver.OpAppend, offset: o.IfSizeMatch}
	// The PutObject that appends carries the generation as If-Match.
	w.opts.If = o.If
	if o.IfSizeMatch <= 0 {
		// Offset 0 would create a missing object; appending needs one.
		head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}, s.session)
		if err != nil {
			return nil, driver.WrapError(driver.OpAppend, key, err, s.classify)
		}
		if o.IfSizeMatch < 0 {
			w.offset = aws.ToInt64(head.ContentLength)
		}
	}
	return w, nil
}

// writer buffers a write (or an append) and commits it at Close.
type writer struct {
	s      *Store
	ctx    context.Context
	key    string
	op     string
	opts   blob.WriterOptions
	offset int64 // append offset; appends only

	buf    bytes.Buffer
	md5    hash.Hash
	mp     *multipart // once the write outgrew MultipartThreshold
	etag   string     // of the version written, once Close returned nil
	busy   atomic.Bool
	closed bool
	err    error
}

var errConcurrentUse = errors.New("s3express: concurrent use of one writer")

func (w *writer) enter() error {
	if !w.busy.CompareAndSwap(false, true) {
		return &blob.Error{Op: w.op, Key: w.key, Err: errConcurrentUse}
	}
	if w.closed {
		w.busy.Store(false)
		return driver.ClosedError(w.op, w.key)
	}
	return nil
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.enter(); err != nil {
		return 0, err
	}
	defer w.busy.Store(false)
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.fail(driver.WrapError(w.op, w.key, err, nil))
		return 0, w.err
	}
	if w.md5 != nil {
		w.md5.Write(p)
	}
	w.buf.Write(p)
	if w.op == driver.OpAppend || w.buf.Len() <= w.s.opts.MultipartThreshold && w.mp == nil {
		return len(p), nil
	}
	if w.mp == nil {
		mp, err := w.s.startMultipart(w.ctx, w.key, &w.opts)
		if err != nil {
			w.fail(err)
			return 0, err
		}
		w.mp = mp
	}
	for w.buf.Len() >= w.s.opts.PartSize {
		if err := w.mp.upload(w.ctx, w.buf.Next(w.s.opts.PartSize)); err != nil {
			w.fail(err)
			return 0, err
		}
	}
	// Keep the unsent tail at the front so the buffer does not grow.
	rest := bytes.Clone(w.buf.Bytes())
	w.buf.Reset()
	w.buf.Write(rest)
	return len(p), nil
}

// fail records the writer's error and aborts a multipart upload.
func (w *writer) fail(err error) {
	w.err = err
	if w.mp != nil {
		w.mp.abort()
		w.mp = nil
	}
}

func (w *writer) Close() error {
	if err := w.enter(); err != nil {
		return err
	}
	defer w.busy.Store(false)
	w.closed = true
	if err := w.commit(); err != nil {
		w.fail(err)
		return err
	}
	return nil
}

func (w *writer) commit() error {
	if w.err != nil {
		return w.err
	}
	if err := w.s.life.CheckOpen(w.op, w.key); err != nil {
		return err
	}
	if err := w.ctx.Err(); err != nil {
		return driver.WrapError(w.op, w.key, err, nil)
	}
	if w.md5 != nil {
		if sum := w.md5.Sum(nil); !bytes.Equal(sum, w.opts.ContentMD5) {
			return blob.Errorf(w.op, w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the given %x", sum, w.opts.ContentMD5)
		}
	}
	if err := w.s.waitWarm(w.ctx, w.op, w.key); err != nil {
		return err
	}
	if w.mp != nil {
		if w.buf.Len() > 0 {
			if err := w.mp.upload(w.ctx, w.buf.Bytes()); err != nil {
				return err
			}
		}
		// On failure w.mp stays set, so Close's fail aborts the upload.
		var etag *string
		if err := w.s.retryConflicts(w.ctx, func() error {
			var err error
			etag, err = w.mp.complete(w.ctx, &w.opts)
			return err
		}); err != nil {
			return driver.WrapError(w.op, w.key, err, driver.ClassifyWrite(w.s.classify, w.opts.If))
		}
		w.mp = nil
		w.written(etag)
		return nil
	}
	in := w.s.putInput(w.key, &w.opts, w.buf.Bytes())
	if w.op == driver.OpAppend {
		in.WriteOffsetBytes = aws.Int64(w.offset)
	}
	var etag *string
	err := w.s.retryConflicts(w.ctx, func() error {
		// A fresh reader per attempt: the SDK may have read the last one.
		in.Body = bytes.NewReader(w.buf.Bytes())
		out, err := w.s.client.PutObject(w.ctx, in, w.s.session)
		if err == nil {
			etag = out.ETag
		}
		return err
	})
	if err != nil {
		return driver.WrapError(w.op, w.key, err, driver.ClassifyWrite(w.s.classify, w.opts.If))
	}
	if w.op == driver.OpWrite {
		w.written(etag)
	}
	return nil
}

// written keeps the ETag the service replied with, which is the object's
// generation (see Stat). Only a quoted entity tag, the form HeadObject
// returns, is kept: a reply in another form could not be trusted to be
// the string Stat reports, and a caller that conditions on it would then
// fail. An append's reply is not kept: that the ETag it carries is the
// whole object's, after the append, is not something the service
// documents.
func (w *writer) written(etag *string) {
	if e := aws.ToString(etag); len(e) >= 2 && strings.HasPrefix(e, `"`) && strings.HasSuffix(e, `"`) {
		w.etag = e
	}
}

// WrittenGeneration implements blob.GenerationReporter.
func (w *writer) WrittenGeneration() (string, bool) {
	return w.etag, w.etag != ""
}

// putInput is a PutObject of data to key with opts' attributes and
// preconditions, checksummed with CRC32C (the SDK's default is CRC32). The
// body is a bytes.Reader because over plain HTTP the SDK must seek it to
// compute the checksum header.
func (s *Store) putInput(key string, o *blob.WriterOptions, data []byte) *s3.PutObjectInput {
	in := &s3.PutObjectInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(key),
		Body:              bytes.NewReader(data),
		ContentLength:     aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	}
	setAttributes(o, &in.ContentType, &in.CacheControl, &in.ContentDisposition, &in.ContentEncoding, &in.ContentLanguage, &in.Metadata)
	switch {
	case o.If.NotExist():
		in.IfNoneMatch = aws.String("*")
	case o.If.GenerationMatch() != "":
		in.IfMatch = aws.String(o.If.GenerationMatch())
	}
	return in
}

func setAttributes(o *blob.WriterOptions, ct, cc, cd, ce, cl **string, md *map[string]string) {
	opt := func(v string) *string {
		if v == "" {
			return nil
		}
		return aws.String(v)
	}
	*ct, *cc, *cd, *ce, *cl = opt(o.ContentType), opt(o.CacheControl), opt(o.ContentDisposition), opt(o.ContentEncoding), opt(o.ContentLanguage)
	*md = escapeMetadata(o.Metadata)
}

// retryConflicts runs a conditional write again, up to Retries times, when
// S3 answers 409 ConditionalRequestConflict: another conditional write to the
// key was in flight, and only a new attempt learns whether it won (then ours
// fails with 412) or lost.
func (s *Store) retryConflicts(ctx context.Context, f func() error) error {
	for retry := 0; ; retry++ {
		err := f()
		if err == nil || !isConflict(err) || retry == s.opts.Retries {
			return err
		}
		backoff := time.Duration(1+rand.IntN(4<<retry)) * time.Millisecond
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
	}
}

// multipart is an upload in progress.
type multipart struct {
	s     *Store
	key   string
	id    string
	parts []types.CompletedPart
}

func (s *Store) startMultipart(ctx context.Context, key string, o *blob.WriterOptions) (*multipart, error) {
	in := &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(s.bucket),
		Key:               aws.String(key),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	}
	setAttributes(o, &in.ContentType, &in.CacheControl, &in.ContentDisposition, &in.ContentEncoding, &in.ContentLanguage, &in.Metadata)
	out, err := s.client.CreateMultipartUpload(ctx, in, s.session)
	if err != nil {
		return nil, driver.WrapError(driver.OpWrite, key, err, s.classify)
	}
	return &multipart{s: s, key: key, id: aws.ToString(out.UploadId)}, nil
}

func (m *multipart) upload(ctx context.Context, part []byte) error {
	n := int32(len(m.parts) + 1)
	out, err := m.s.client.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:            aws.String(m.s.bucket),
		Key:               aws.String(m.key),
		UploadId:          aws.String(m.id),
		PartNumber:        aws.Int32(n),
		Body:              bytes.NewReader(part),
		ContentLength:     aws.Int64(int64(len(part))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	}, m.s.session)
	if err != nil {
		return driver.WrapError(driver.OpWrite, m.key, err, m.s.classify)
	}
	m.parts = append(m.parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32C: out.ChecksumCRC32C})
	return nil
}

func (m *multipart) complete(ctx context.Context, o *blob.WriterOptions) (*string, error) {
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(m.s.bucket),
		Key:             aws.String(m.key),
		UploadId:        aws.String(m.id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: m.parts},
	}
	switch {
	case o.If.NotExist():
		in.IfNoneMatch = aws.String("*")
	case o.If.GenerationMatch() != "":
		in.IfMatch = aws.String(o.If.GenerationMatch())
	}
	out, err := m.s.client.CompleteMultipartUpload(ctx, in, m.s.session)
	if err != nil {
		return nil, err
	}
	return out.ETag, nil
}

// abort ends the upload in the background, so its parts stop costing
// storage; the caller's ctx may be the reason the write failed.
func (m *multipart) abort() {
	abort := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		m.s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(m.s.bucket), Key: aws.String(m.key), UploadId: aws.String(m.id),
		}, m.s.session)
	}
	if !m.s.bg.Go(abort) {
		abort() // Close has begun: on the caller's time
	}
}
