package fault

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// memStore is a minimal map-backed blob.Store for these tests, with no
// optional interfaces.
type memStore struct {
	mu     sync.Mutex
	objs   map[string]memObj
	gen    int64
	closed bool
}

type memObj struct {
	data  []byte
	attrs blob.Attributes
}

var _ blob.Store = (*memStore)(nil)

func newMem() *memStore { return &memStore{objs: map[string]memObj{}} }

func (m *memStore) get(op, key string) (memObj, error) {
	if err := blob.ValidateKey(op, key); err != nil {
		return memObj{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return memObj{}, &blob.Error{Op: op, Key: key, Kind: blob.ErrClosed}
	}
	o, ok := m.objs[key]
	if !ok {
		return memObj{}, &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound}
	}
	return o, nil
}

func (m *memStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	o, err := m.get("read", key)
	if err != nil {
		return nil, err
	}
	d := o.data[min(offset, int64(len(o.data))):]
	if length >= 0 && length < int64(len(d)) {
		d = d[:length]
	}
	a := o.attrs
	return &memReader{Reader: bytes.NewReader(d), attrs: &a}, nil
}

type memReader struct {
	*bytes.Reader
	attrs *blob.Attributes
}

func (r *memReader) Close() error                 { return nil }
func (r *memReader) Attributes() *blob.Attributes { return r.attrs }

func (m *memStore) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := blob.ValidateKey("write", key); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &blob.WriterOptions{}
	}
	return &memWriter{m: m, ctx: ctx, key: key, opts: *opts}, nil
}

type memWriter struct {
	m      *memStore
	ctx    context.Context
	key    string
	opts   blob.WriterOptions
	buf    bytes.Buffer
	closed bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	return w.buf.Write(p)
}

func (w *memWriter) Close() error {
	if w.closed {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return driver.WrapError("write", w.key, err, nil)
	}
	return w.m.commit(w.key, w.buf.Bytes(), w.opts)
}

func (m *memStore) commit(key string, data []byte, opts blob.WriterOptions) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return &blob.Error{Op: "write", Key: key, Kind: blob.ErrClosed}
	}
	old, exists := m.objs[key]
	switch {
	case opts.If.NotExist() && exists:
		return &blob.Error{Op: "write", Key: key, Kind: blob.ErrExists}
	case opts.If.GenerationMatch() != "" && (!exists || old.attrs.Generation != opts.If.GenerationMatch()):
		return &blob.Error{Op: "write", Key: key, Kind: blob.ErrPrecondition}
	}
	m.gen++
	now := time.Now()
	m.objs[key] = memObj{data: bytes.Clone(data), attrs: blob.Attributes{
		Key: key, Size: int64(len(data)), ContentType: opts.ContentType,
		Metadata: opts.Metadata, Generation: strconv.FormatInt(m.gen, 10),
		CreateTime: now, ModTime: now,
	}}
	return nil
}

func (m *memStore) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	o, err := m.get("stat", key)
	if err != nil {
		return nil, err
	}
	return &o.attrs, nil
}

// List pages with the last key of a page as its token; no delimiter support,
// which these tests do not need.
func (m *memStore) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	if o.PageSize == 0 {
		o.PageSize = blob.DefaultPageSize
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, o.Prefix) && k > o.StartAfter && k > o.PageToken {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	page := &blob.ListPage{}
	for i, k := range keys {
		if i == o.PageSize {
			page.NextPageToken = keys[i-1]
			break
		}
		a := m.objs[k].attrs
		page.Objects = append(page.Objects, blob.ListObject{Key: k, Size: a.Size, ModTime: a.ModTime, Generation: a.Generation})
	}
	return page, nil
}

func (m *memStore) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	o, err := m.get("delete", key)
	if err != nil {
		return err
	}
	if g, ok := cond.Generation(); ok && g != o.attrs.Generation {
		return &blob.Error{Op: "delete", Key: key, Kind: blob.ErrPrecondition}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

func (m *memStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// fullMem adds every optional interface to memStore and counts native calls,
// so tests can see that the wrapper used them.
type fullMem struct {
	*memStore
	nmu    sync.Mutex
	native map[string]int
}

var (
	_ blob.Prewarmer      = (*fullMem)(nil)
	_ blob.Creator        = (*fullMem)(nil)
	_ blob.Appender       = (*fullMem)(nil)
	_ blob.Copier         = (*fullMem)(nil)
	_ blob.ReaderAtOpener = (*fullMem)(nil)
)

func newFullMem() *fullMem { return &fullMem{memStore: newMem(), native: map[string]int{}} }

func (f *fullMem) count(op string) {
	f.nmu.Lock()
	f.native[op]++
	f.nmu.Unlock()
}

func (f *fullMem) calls(op string) int {
	f.nmu.Lock()
	defer f.nmu.Unlock()
	return f.native[op]
}

func (f *fullMem) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	f.count("prewarm")
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	o.If = blob.IfNotExist()
	return f.NewWriter(ctx, key, &o)
}

func (f *fullMem) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	f.count("create")
	key := blob.NewName(prefix)
	w, err := f.Prewarm(ctx, key, opts)
	return key, w, err
}

func (f *fullMem) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	ao, err := blob.CheckAppend(key, opts)
	if err != nil {
		return nil, err
	}
	f.count("append")
	o, err := f.get("append", key)
	if err != nil {
		return nil, err
	}
	if g, ok := ao.If.Generation(); ok && g != o.attrs.Generation {
		return nil, &blob.Error{Op: "append", Key: key, Kind: blob.ErrPrecondition}
	}
	w := &memWriter{m: f.memStore, ctx: ctx, key: key, opts: blob.WriterOptions{ContentType: o.attrs.ContentType, If: blob.IfGenerationMatch(o.attrs.Generation)}}
	w.buf.Write(o.data)
	return w, nil
}

func (f *fullMem) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	cond, err := blob.CheckCopy(dstKey, opts, true)
	if err != nil {
		return err
	}
	f.count("copy")
	o, err := f.get("copy", srcKey)
	if err != nil {
		return err
	}
	wo := blob.WriterOptionsFrom(&o.attrs)
	wo.If = cond
	return f.commit(dstKey, o.data, wo)
}

func (f *fullMem) OpenReaderAt(ctx context.Context, key string) (blob.ReaderAt, error) {
	f.count("reader-at")
	o, err := f.get("read", key)
	if err != nil {
		return nil, err
	}
	return memReaderAt{bytes.NewReader(o.data)}, nil
}

type memReaderAt struct{ *bytes.Reader }

func (memReaderAt) Close() error { return nil }

func (r memReaderAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return r.ReadAt(p, off)
}
