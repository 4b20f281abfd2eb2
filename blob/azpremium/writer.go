package azpremium

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"hash"
	"io"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewWriter implements blob.Store. Up to MultipartThreshold bytes are buffered and
// sent as one Put Blob at Close; past it, blocks are staged as they fill and
// the block list is committed at Close.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.begin(ctx, driver.OpWrite, key, true); err != nil {
		return nil, err
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if o.ContentMD5 != nil && len(o.ContentMD5) != md5.Size {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "ContentMD5 has %d bytes, want %d", len(o.ContentMD5), md5.Size)
	}
	md, err := encodeMetadata(o.Metadata)
	if err != nil {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "metadata: %v", err)
	}
	return &writer{s: s, ctx: ctx, key: key, opts: o, md: md}, nil
}

func (o *Options) headers(wo *blob.WriterOptions) *azblobblob.HTTPHeaders {
	h := &azblobblob.HTTPHeaders{}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = &v
		}
	}
	set(&h.BlobContentType, wo.ContentType)
	set(&h.BlobCacheControl, wo.CacheControl)
	set(&h.BlobContentDisposition, wo.ContentDisposition)
	set(&h.BlobContentEncoding, wo.ContentEncoding)
	set(&h.BlobContentLanguage, wo.ContentLanguage)
	return h
}

// writer buffers up to MultipartThreshold bytes for one Put Blob at Close.
// Past the threshold it stages blocks of PartSize as they fill, Concurrency
// at a time, and commits the list at Close. Staged but uncommitted blocks are invisible and the
// service discards them, so an abandoned writer commits nothing.
type writer struct {
	s    *Store
	ctx  context.Context
	key  string
	opts blob.WriterOptions
	md   map[string]*string

	buf     []byte
	staging bool
	sum     hash.Hash // of every byte, once staging (a block list has no MD5 of its own)
	ids     []string
	wg      sync.WaitGroup
	sem     chan struct{}
	mu      sync.Mutex
	failed  error
	closed  bool
	etag    string // of the version written, once Close returned nil
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	if err := w.err(); err != nil {
		return 0, err
	}
	if err := w.ctx.Err(); err != nil {
		return 0, w.s.wrap(driver.OpWrite, w.key, err, nil)
	}
	w.buf = append(w.buf, p...)
	if !w.staging && int64(len(w.buf)) > w.s.opts.MultipartThreshold {
		w.staging = true
		w.sum = md5.New()
		w.sem = make(chan struct{}, w.s.opts.Concurrency)
	}
	if w.staging {
		bs := int(w.s.opts.PartSize)
		for len(w.buf) >= bs {
			w.stage(w.buf[:bs:bs])
			w.buf = bytes.Clone(w.buf[bs:])
		}
	}
	return len(p), nil
}

func (w *writer) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed == nil {
		w.failed = err
	}
}

// stage uploads one block in the background; block order is the order of
// the ids, not of completion.
func (w *writer) stage(block []byte) {
	w.sum.Write(block)
	id := newBlockID(blockIDBytes)
	w.ids = append(w.ids, id)
	w.sem <- struct{}{}
	w.wg.Go(func() {
		defer func() { <-w.sem }()
		if w.err() != nil {
			return
		}
		_, err := w.s.client.NewBlockBlobClient(escapeKey(w.key)).StageBlock(w.ctx, id, nopCloser(block), nil)
		if err != nil {
			w.fail(w.s.wrap(driver.OpWrite, w.key, err, classify))
		}
	})
}

func (w *writer) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	if w.staging && len(w.buf) > 0 {
		w.stage(w.buf)
	}
	w.wg.Wait()
	if err := w.ctx.Err(); err != nil {
		return w.s.wrap(driver.OpWrite, w.key, err, nil)
	}
	if err := w.err(); err != nil {
		return err
	}
	if err := w.s.life.CheckOpen(driver.OpWrite, w.key); err != nil {
		return err
	}
	var sum []byte
	if w.staging {
		sum = w.sum.Sum(nil)
	} else if w.opts.ContentMD5 != nil {
		s := md5.Sum(w.buf)
		sum = s[:]
	}
	if w.opts.ContentMD5 != nil && !bytes.Equal(sum, w.opts.ContentMD5) {
		return blob.Errorf(driver.OpWrite, w.key, blob.ErrInvalidArgument, "content MD5 %x does not match ContentMD5 %x", sum, w.opts.ContentMD5)
	}
	headers := w.s.opts.headers(&w.opts)
	conds := accessConditions(w.opts.If)
	bb := w.s.client.NewBlockBlobClient(escapeKey(w.key))
	var (
		etag *azcore.ETag
		err  error
	)
	if w.staging {
		headers.BlobContentMD5 = sum
		var resp blockblob.CommitBlockListResponse
		resp, err = bb.CommitBlockList(w.ctx, w.ids, &blockblob.CommitBlockListOptions{
			HTTPHeaders:      headers,
			Metadata:         w.md,
			AccessConditions: conds,
		})
		etag = resp.ETag
	} else {
		var resp blockblob.UploadResponse
		resp, err = bb.Upload(w.ctx, nopCloser(w.buf), &blockblob.UploadOptions{
			HTTPHeaders:             headers,
			Metadata:                w.md,
			AccessConditions:        conds,
			TransactionalContentMD5: w.opts.ContentMD5,
		})
		etag = resp.ETag
	}
	w.buf = nil
	if err != nil {
		return w.s.wrap(driver.OpWrite, w.key, err, writeClassifier(w.opts.If))
	}
	// The reply's ETag header is the one Get Blob Properties returns for
	// this version, verbatim, which Stat reports as the generation.
	if etag != nil {
		w.etag = string(*etag)
	}
	return nil
}

// WrittenGeneration implements blob.GenerationReporter.
func (w *writer) WrittenGeneration() (string, bool) {
	return w.etag, w.etag != ""
}

// newBlockID returns a random block ID of n bytes, base64: IDs must be unique
// within a blob and of one length in it.
func newBlockID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// blockIDBytes is the length of the block IDs this package makes.
const blockIDBytes = 48

func nopCloser(b []byte) io.ReadSeekCloser { return streaming.NopCloser(bytes.NewReader(b)) }
