package azpremium

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/appendblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// CreateAppendBlob creates an empty append blob at key, the cheapest object
// to append to: each later append is one Append Block at a checked offset.
// opts' preconditions and attributes apply (ContentMD5 must be empty). When
// the account has no append blobs (some premium accounts) it fails with
// blob.ErrUnsupported, and NewAppender still appends to block blobs.
func (s *Store) CreateAppendBlob(ctx context.Context, key string, opts *blob.WriterOptions) error {
	if err := s.begin(ctx, driver.OpWrite, key, true); err != nil {
		return err
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate(driver.OpWrite, key); err != nil {
		return err
	}
	if o.ContentMD5 != nil {
		return blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "ContentMD5 on an empty append blob")
	}
	if s.noAppendBlobs.Load() {
		return blob.Errorf(driver.OpWrite, key, blob.ErrUnsupported, "the account does not support append blobs")
	}
	md, err := encodeMetadata(o.Metadata)
	if err != nil {
		return blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "metadata: %v", err)
	}
	_, err = s.client.NewAppendBlobClient(escapeKey(key)).Create(ctx, &appendblob.CreateOptions{
		HTTPHeaders:      s.opts.headers(&o),
		Metadata:         md,
		AccessConditions: accessConditions(o.If),
	})
	err = s.wrap(driver.OpWrite, key, err, writeClassifier(o.If))
	if errors.Is(err, blob.ErrUnsupported) {
		s.noAppendBlobs.Store(true)
	}
	return err
}

// NewAppender implements blob.Appender. Bytes are buffered and appended at
// Close. On an append blob that is Append Block requests of up to 4 MiB, each
// checked at its offset (a Close of more than 4 MiB is not atomic: a failure
// can leave a prefix appended). On a block blob it stages the bytes as blocks
// and commits the old block list plus the new blocks under If-Match, which is
// atomic; the first append to a blob written by a single Put Blob (which has
// no block list) first re-stages its content, once. Page blobs are
// unsupported.
func (s *Store) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	if err := s.begin(ctx, driver.OpAppend, key, true); err != nil {
		return nil, err
	}
	o, err := blob.CheckAppend(key, opts)
	if err != nil {
		return nil, err
	}
	a := &appender{s: s, ctx: ctx, key: key, opts: o}
	if err := a.load(); err != nil {
		return nil, err
	}
	return a, nil
}

type appender struct {
	s    *Store
	ctx  context.Context
	key  string
	opts blob.AppendOptions

	props  azblobblob.GetPropertiesResponse
	buf    []byte
	closed bool
}

// load reads the blob's current state and checks the preconditions early,
// so a stale caller learns before it writes.
func (a *appender) load() error {
	p, err := a.s.client.NewBlobClient(escapeKey(a.key)).GetProperties(a.ctx, nil)
	if err != nil {
		return a.s.wrap(driver.OpAppend, a.key, err, classify)
	}
	a.props = p
	etag := ""
	if p.ETag != nil {
		etag = string(*p.ETag)
	}
	if want, ok := a.opts.If.Generation(); ok && want != etag {
		return blob.Errorf(driver.OpAppend, a.key, blob.ErrPrecondition, "generation is %s, not %s", etag, want)
	}
	if a.opts.IfSizeMatch >= 0 && a.opts.IfSizeMatch != derefInt(p.ContentLength) {
		return blob.Errorf(driver.OpAppend, a.key, blob.ErrPrecondition, "size is %d, not %d", derefInt(p.ContentLength), a.opts.IfSizeMatch)
	}
	if p.BlobType == nil || (*p.BlobType != azblobblob.BlobTypeAppendBlob && *p.BlobType != azblobblob.BlobTypeBlockBlob) {
		return blob.Errorf(driver.OpAppend, a.key, blob.ErrUnsupported, "appending to a page blob")
	}
	return nil
}

func (a *appender) Write(p []byte) (int, error) {
	if a.closed {
		return 0, driver.ClosedError(driver.OpAppend, a.key)
	}
	if err := a.ctx.Err(); err != nil {
		return 0, a.s.wrap(driver.OpAppend, a.key, err, nil)
	}
	a.buf = append(a.buf, p...)
	return len(p), nil
}

func (a *appender) Close() error {
	if a.closed {
		return driver.ClosedError(driver.OpAppend, a.key)
	}
	a.closed = true
	if err := a.ctx.Err(); err != nil {
		return a.s.wrap(driver.OpAppend, a.key, err, nil)
	}
	if err := a.s.life.CheckOpen(driver.OpAppend, a.key); err != nil {
		return err
	}
	if len(a.buf) == 0 {
		return nil
	}
	// Without conditions the caller only wants the bytes at the end; a
	// concurrent append that moved the end is then worth a retry.
	free := a.opts.IfSizeMatch < 0 && a.opts.If.IsZero()
	for attempt := 0; ; attempt++ {
		var err error
		if *a.props.BlobType == azblobblob.BlobTypeAppendBlob {
			err = a.appendBlocks()
		} else {
			err = a.commitBlocks()
		}
		if err == nil || !free || attempt == 4 || !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
		if err := a.load(); err != nil {
			return err
		}
	}
}

func (a *appender) fail(err error) error {
	err = a.s.wrap(driver.OpAppend, a.key, err, classifyAppend)
	if errors.Is(err, blob.ErrUnsupported) {
		a.s.noAppendBlobs.Store(true)
	}
	return err
}

// classifyAppend is classify for an append, where a missing blob is a failed
// precondition: it was deleted since NewAppender, so the state the caller
// appended to is gone.
func classifyAppend(err error) error {
	kind := classify(err)
	if kind == blob.ErrNotFound && !bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return blob.ErrPrecondition
	}
	return kind
}

func (a *appender) appendBlocks() error {
	ab := a.s.client.NewAppendBlobClient(escapeKey(a.key))
	// The position is always checked: even an unconditional append must not
	// interleave its chunks with another writer's.
	pos := derefInt(a.props.ContentLength)
	etag := a.props.ETag
	for off := 0; off < len(a.buf); off += maxAppendBlock {
		chunk := a.buf[off:min(off+maxAppendBlock, len(a.buf))]
		p := pos
		o := &appendblob.AppendBlockOptions{
			AppendPositionAccessConditions: &appendblob.AppendPositionAccessConditions{AppendPosition: &p},
		}
		if off == 0 && etag != nil {
			e := *etag
			o.AccessConditions = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &e}}
		}
		resp, err := ab.AppendBlock(a.ctx, nopCloser(chunk), o)
		if err != nil {
			return a.fail(err)
		}
		if resp.BlobAppendOffset != nil {
			if at, err := strconv.ParseInt(*resp.BlobAppendOffset, 10, 64); err == nil && at != pos {
				return blob.Errorf(driver.OpAppend, a.key, blob.ErrPrecondition, "service appended at %d, not %d", at, pos)
			}
		}
		pos += int64(len(chunk))
	}
	return nil
}

func (a *appender) commitBlocks() error {
	bb := a.s.client.NewBlockBlobClient(escapeKey(a.key))
	etag := *a.props.ETag
	ifMatch := &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}}
	list, err := bb.GetBlockList(a.ctx, blockblob.BlockListTypeCommitted, &blockblob.GetBlockListOptions{AccessConditions: ifMatch})
	if err != nil {
		return a.fail(err)
	}
	var ids []string
	var listed int64
	idBytes := blockIDBytes
	for _, b := range list.CommittedBlocks {
		ids = append(ids, deref(b.Name))
		listed += derefInt(b.Size)
	}
	if len(ids) > 0 {
		raw, err := base64.StdEncoding.DecodeString(ids[0])
		if err != nil || len(raw) < 16 {
			return blob.Errorf(driver.OpAppend, a.key, blob.ErrUnsupported, "the blob's block IDs are not ones this package can extend")
		}
		idBytes = len(raw)
	}
	size := derefInt(a.props.ContentLength)
	if listed != size {
		// Written by a single Put Blob: its bytes belong to no block yet.
		ids = ids[:0]
		idBytes = blockIDBytes
		old, err := a.download(size, etag)
		if err != nil {
			return a.fail(err)
		}
		if ids, err = a.stageAll(bb, ids, old, idBytes); err != nil {
			return err
		}
	}
	if ids, err = a.stageAll(bb, ids, a.buf, idBytes); err != nil {
		return err
	}
	p := &a.props
	h := &azblobblob.HTTPHeaders{
		BlobContentType:        p.ContentType,
		BlobCacheControl:       p.CacheControl,
		BlobContentDisposition: p.ContentDisposition,
		BlobContentEncoding:    p.ContentEncoding,
		BlobContentLanguage:    p.ContentLanguage,
	}
	if len(ids) > 50000 {
		return blob.Errorf(driver.OpAppend, a.key, blob.ErrUnsupported, "a block blob holds at most 50000 blocks")
	}
	_, err = bb.CommitBlockList(a.ctx, ids, &blockblob.CommitBlockListOptions{HTTPHeaders: h, Metadata: p.Metadata, AccessConditions: ifMatch})
	if err != nil {
		return a.fail(err)
	}
	return nil
}

func (a *appender) download(size int64, etag azcore.ETag) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	resp, err := a.s.client.NewBlobClient(escapeKey(a.key)).DownloadStream(a.ctx, &azblobblob.DownloadStreamOptions{
		AccessConditions: &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}},
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && int64(len(b)) != size {
		err = fmt.Errorf("read %d bytes of %d", len(b), size)
	}
	return b, err
}

func (a *appender) stageAll(bb *blockblob.Client, ids []string, data []byte, idBytes int) ([]string, error) {
	bs := int(a.s.opts.PartSize)
	for off := 0; off < len(data); off += bs {
		id := newBlockID(idBytes)
		_, err := bb.StageBlock(a.ctx, id, nopCloser(data[off:min(off+bs, len(data))]), nil)
		if err != nil {
			return nil, a.fail(err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
