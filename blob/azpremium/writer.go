package azpremium

import (
	"bytes"
	"context"
	"crypto/md5"
	"hash"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/zonalblob/zonalblob/blob"
)

// writer buffers up to PutThreshold bytes for one Put Blob at Close. Past the
// threshold it stages blocks as they fill, Concurrency at a time, and commits
// the list at Close. Staged but uncommitted blocks are invisible and the
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
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	if err := w.err(); err != nil {
		return 0, err
	}
	if err := w.ctx.Err(); err != nil {
		return 0, w.s.wrap("write", w.key, err, nil)
	}
	w.buf = append(w.buf, p...)
	if !w.staging && int64(len(w.buf)) > w.s.opts.PutThreshold {
		w.staging = true
		w.sum = md5.New()
		w.sem = make(chan struct{}, w.s.opts.Concurrency)
	}
	if w.staging {
		bs := int(w.s.opts.BlockSize)
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
			w.fail(w.s.wrap("write", w.key, err, classify))
		}
	})
}

func (w *writer) Close() error {
	if w.closed {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	w.closed = true
	if w.staging && len(w.buf) > 0 {
		w.stage(w.buf)
	}
	w.wg.Wait()
	if err := w.ctx.Err(); err != nil {
		return w.s.wrap("write", w.key, err, nil)
	}
	if err := w.err(); err != nil {
		return err
	}
	if w.s.closed.Load() {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	var sum []byte
	if w.staging {
		sum = w.sum.Sum(nil)
	} else if w.opts.ContentMD5 != nil {
		s := md5.Sum(w.buf)
		sum = s[:]
	}
	if w.opts.ContentMD5 != nil && !bytes.Equal(sum, w.opts.ContentMD5) {
		return blob.Errorf("write", w.key, blob.ErrInvalidArgument, "content MD5 %x does not match ContentMD5 %x", sum, w.opts.ContentMD5)
	}
	headers := w.s.opts.headers(&w.opts)
	conds := accessConditions(w.opts.If.NotExist(), w.opts.If.GenerationMatch())
	bb := w.s.client.NewBlockBlobClient(escapeKey(w.key))
	var err error
	if w.staging {
		headers.BlobContentMD5 = sum
		_, err = bb.CommitBlockList(w.ctx, w.ids, &blockblob.CommitBlockListOptions{
			HTTPHeaders:      headers,
			Metadata:         w.md,
			AccessConditions: conds,
		})
	} else {
		_, err = bb.Upload(w.ctx, nopCloser(w.buf), &blockblob.UploadOptions{
			HTTPHeaders:             headers,
			Metadata:                w.md,
			AccessConditions:        conds,
			TransactionalContentMD5: w.opts.ContentMD5,
		})
	}
	w.buf = nil
	if err != nil {
		kind := ctxKind(err, writeKind(err, w.opts.If.NotExist(), w.opts.If.GenerationMatch()))
		return redact(&blob.Error{Op: "write", Key: w.key, Kind: kind, Err: err}, w.s.secrets)
	}
	return nil
}
