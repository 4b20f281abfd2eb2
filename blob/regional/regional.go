// Package regional opens any gocloud.dev/blob bucket as a blob.Store: the
// compaction target of a tiered store and the embedded default.
//
// URLs are gocloud's own, registered on blob.Open by importing this package:
//
//	mem://                         an in-memory bucket, new and empty on every Open
//	file:///abs/dir                a directory (created if missing; ?create_dir etc. as gocloud's fileblob)
//	gs://bucket                    Google Cloud Storage (gocloud's gcsblob)
//	s3://bucket?region=...         Amazon S3 and compatibles (gocloud's s3blob)
//	azblob://container             Azure Blob Storage (gocloud's azureblob)
//
// Query parameters are those of the gocloud driver, which rejects unknown ones.
//
// Guarantees beyond what gocloud gives: keys are validated before any I/O;
// List is in byte order and honours StartAfter on every backend; IfNotExist
// races have at most one winner; and on mem:// and file:// buckets generation
// preconditions (IfGenerationMatch on writes and deletes) are enforced under a
// lock held by this process, with a generation token kept in the object's
// metadata (key "zonalblob-generation", hidden from Attributes). On file://
// those guarantees hold among the Stores of one process only, and keys with a
// "." path segment or a final ".." are refused (the file system would alias them). On cloud buckets
// the generation is the backend's ETag and generation preconditions are not
// supported yet (ErrUnsupported).
package regional

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// The gocloud drivers whose URLs this package serves.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Schemes are the URL schemes this package registers on blob.Open.
var Schemes = []string{"mem", "file", "gs", "s3", "azblob"}

func init() {
	for _, s := range Schemes {
		// gocloud serves these schemes itself, so only our registry learns them.
		blob.Register(s, func(ctx context.Context, u *url.URL) (blob.Store, error) { return open(ctx, u) })
	}
}

// Open opens a gocloud bucket URL as a Store.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "malformed URL %s", blob.Redact(rawURL))
	}
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	b, err := gcblob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, &blob.Error{Op: "open", Kind: blob.ErrInvalidArgument, Err: err}
	}
	opts := Options{}
	switch u.Scheme {
	case "mem":
		opts.LocalPreconditions = true
	case "file":
		opts.LocalPreconditions = true
		opts.SortListings = true
		opts.fileTree = true
		// Stores on one directory share one lock table, so preconditions hold
		// across them within this process.
		opts.lockDomain = "file:" + filepath.Clean(u.Path)
	case "azblob":
		opts.BufferedUploads = true
	}
	return New(b, opts), nil
}

// Options configure New.
type Options struct {
	// LocalPreconditions enforces IfNotExist and IfGenerationMatch under a lock
	// in this process, for buckets that only this process uses (mem://, or a
	// directory). Off, they are passed to the backend.
	LocalPreconditions bool
	// SortListings lists the whole prefix and sorts it for every page, for
	// backends that do not list in byte order (gocloud's fileblob walks the
	// directory tree, which is not byte order).
	SortListings bool
	// BufferedUploads buffers each write in memory and sends it with one
	// Bucket.Upload at Close, instead of gocloud's streaming writer. gocloud
	// v0.47's azureblob writer panics when a streamed upload fails (an
	// IfNotExist loser, say), so azblob:// sets it.
	BufferedUploads bool

	lockDomain string
	fileTree   bool
}

// Store is a gocloud bucket as a blob.Store.
type Store struct {
	b      *gcblob.Bucket
	opts   Options
	locks  *keyLocks
	closed atomic.Bool
}

var (
	_ blob.Store  = (*Store)(nil)
	_ blob.Copier = (*Store)(nil)
)

// New wraps b. Closing the Store closes b.
func New(b *gcblob.Bucket, opts Options) *Store {
	s := &Store{b: b, opts: opts}
	if opts.LocalPreconditions {
		s.locks = locksFor(opts.lockDomain)
	}
	return s
}

// Bucket returns the underlying gocloud bucket.
func (s *Store) Bucket() *gcblob.Bucket { return s.b }

// generationKey is the metadata key holding the generation token on buckets
// with local preconditions.
const generationKey = "zonalblob-generation"

func classify(err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return blob.ErrNotFound
	case gcerrors.FailedPrecondition:
		return blob.ErrPrecondition
	case gcerrors.InvalidArgument:
		return blob.ErrInvalidArgument
	case gcerrors.Unimplemented:
		return blob.ErrUnsupported
	}
	return nil
}

func (s *Store) check(op, key string) error {
	if s.closed.Load() {
		return &blob.Error{Op: op, Key: key, Kind: blob.ErrClosed}
	}
	if err := blob.ValidateKey(op, key); err != nil {
		return err
	}
	if s.opts.fileTree {
		// A file tree cleans "." segments, so "./a" would silently be the
		// object "a"; fileblob escapes "../" but not a final "..". Refuse both.
		for seg := range strings.SplitSeq(key, "/") {
			if seg == "." {
				return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot have a "." path segment`)
			}
		}
		if key == ".." || strings.HasSuffix(key, "/..") {
			return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot end in a ".." path segment`)
		}
	}
	return nil
}

// NewRangeReader implements blob.Store. The reader's Attributes carry Size,
// ContentType and ModTime (what gocloud returns with a read).
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check("read", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf("read", key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	if s.opts.SortListings {
		// gocloud's fileblob rewrites an object's attribute file in place, so
		// opening while a commit runs can fail; commits hold the key lock.
		defer s.locks.lock(key)()
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil && offset > 0 && classify(err) != blob.ErrNotFound {
		// Some backends (Azure: 416) refuse a range that starts at or past
		// the end; our contract reads nothing there.
		if a, serr := s.b.Attributes(ctx, key); serr == nil && offset >= a.Size {
			return driver.EmptyReader(s.attrs(key, a)), nil
		}
	}
	if err != nil {
		return nil, driver.WrapError("read", key, err, classify)
	}
	return &reader{r: r, key: key}, nil
}

type reader struct {
	r     *gcblob.Reader
	key   string
	attrs *blob.Attributes
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = driver.WrapError("read", r.key, err, classify)
	}
	return n, err
}

func (r *reader) Close() error { return r.r.Close() }
func (r *reader) Attributes() *blob.Attributes {
	// Built on demand: most readers never ask, and a read is a hot path.
	if r.attrs == nil {
		r.attrs = &blob.Attributes{Key: r.key, Size: r.r.Size(), ContentType: r.r.ContentType(), ModTime: r.r.ModTime()}
	}
	return r.attrs
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check("stat", key); err != nil {
		return nil, err
	}
	if s.opts.SortListings {
		defer s.locks.lock(key)()
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return nil, driver.WrapError("stat", key, err, classify)
	}
	return s.attrs(key, a), nil
}

func (s *Store) attrs(key string, a *gcblob.Attributes) *blob.Attributes {
	out := &blob.Attributes{
		Key:                key,
		Size:               a.Size,
		ContentType:        a.ContentType,
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		MD5:                a.MD5,
		ETag:               a.ETag,
		Generation:         a.ETag,
		CreateTime:         a.CreateTime,
		ModTime:            a.ModTime,
	}
	if len(a.Metadata) > 0 {
		out.Metadata = make(map[string]string, len(a.Metadata))
		for k, v := range a.Metadata {
			if k == generationKey && s.opts.LocalPreconditions {
				out.Generation = v
				continue
			}
			out.Metadata[k] = v
		}
		if len(out.Metadata) == 0 {
			out.Metadata = nil
		}
	}
	return out
}

// generation returns key's current generation, or "" when it does not exist.
func (s *Store) generation(ctx context.Context, op, key string) (string, error) {
	a, err := s.b.Attributes(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return "", nil
	}
	if err != nil {
		return "", driver.WrapError(op, key, err, classify)
	}
	return s.attrs(key, a).Generation, nil
}

// NewWriter implements blob.Store.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check("write", key); err != nil {
		return nil, err
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate("write", key); err != nil {
		return nil, err
	}
	if o.If.GenerationMatch() != "" && !s.opts.LocalPreconditions {
		return nil, blob.Errorf("write", key, blob.ErrUnsupported, "generation preconditions on this bucket")
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
	if s.opts.LocalPreconditions {
		md := make(map[string]string, len(o.Metadata)+1)
		for k, v := range o.Metadata {
			md[k] = v
		}
		md[generationKey] = newGeneration()
		wo.Metadata = md
	}
	if s.opts.BufferedUploads {
		cancel()
		return &uploadWriter{s: s, ctx: ctx, key: key, opts: o, wo: wo}, nil
	}
	w, err := s.b.NewWriter(wctx, key, wo)
	if err != nil {
		cancel()
		return nil, driver.WrapError("write", key, err, classify)
	}
	return &writer{s: s, w: w, ctx: ctx, cancel: cancel, key: key, opts: o}, nil
}

// uploadWriter buffers a write and sends it with one Bucket.Upload at Close
// (see Options.BufferedUploads).
type uploadWriter struct {
	s      *Store
	ctx    context.Context
	key    string
	opts   blob.WriterOptions
	wo     *gcblob.WriterOptions
	buf    bytes.Buffer
	closed bool
}

func (w *uploadWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	return w.buf.Write(p)
}

func (w *uploadWriter) Close() error {
	if w.closed {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return driver.WrapError("write", w.key, err, nil)
	}
	if w.s.closed.Load() {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	wo := *w.wo
	if len(wo.ContentMD5) > 0 {
		// gocloud streams through a pipe when given an MD5 even on its
		// upload path; the sum is checked here instead.
		if sum := md5.Sum(w.buf.Bytes()); !bytes.Equal(sum[:], wo.ContentMD5) {
			return blob.Errorf("write", w.key, blob.ErrInvalidArgument, "content MD5 %x does not match the given %x", sum, wo.ContentMD5)
		}
		wo.ContentMD5 = nil
	}
	if wo.ContentType == "" {
		// Upload requires a content type; gocloud's writer would sniff one.
		wo.ContentType = http.DetectContentType(w.buf.Bytes())
	}
	if w.s.opts.LocalPreconditions {
		defer w.s.locks.lock(w.key)()
		if err := w.s.checkPrecondition(w.ctx, "write", w.key, w.opts.If.NotExist(), w.opts.If.GenerationMatch()); err != nil {
			return err
		}
	}
	err := w.s.b.Upload(w.ctx, w.key, bytes.NewReader(w.buf.Bytes()), &wo)
	if err == nil {
		return nil
	}
	kind := classify(err)
	if kind == blob.ErrPrecondition && w.opts.If.NotExist() {
		kind = blob.ErrExists
	}
	return &blob.Error{Op: "write", Key: w.key, Kind: kind, Err: err}
}

// generationSeed makes generations unique across processes sharing a
// directory; the counter makes them unique within one, without a random draw
// per write.
var (
	generationSeed = func() string {
		var b [8]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	generationCounter atomic.Uint64
)

func newGeneration() string {
	return generationSeed + strconv.FormatUint(generationCounter.Add(1), 36)
}

type writer struct {
	s      *Store
	w      *gcblob.Writer
	ctx    context.Context
	cancel context.CancelFunc
	key    string
	opts   blob.WriterOptions
	closed bool
	failed error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	n, err := w.w.Write(p)
	if err != nil {
		w.failed = driver.WrapError("write", w.key, err, classify)
		return n, w.failed
	}
	return n, nil
}

func (w *writer) Close() error {
	if w.closed {
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	w.closed = true
	defer w.cancel()
	if err := w.ctx.Err(); err != nil {
		w.abort()
		return driver.WrapError("write", w.key, err, nil)
	}
	if w.failed != nil {
		w.abort()
		return w.failed
	}
	if w.s.closed.Load() {
		w.abort()
		return &blob.Error{Op: "write", Key: w.key, Kind: blob.ErrClosed}
	}
	if w.s.opts.LocalPreconditions {
		unlock := w.s.locks.lock(w.key)
		defer unlock()
		if err := w.s.checkPrecondition(w.ctx, "write", w.key, w.opts.If.NotExist(), w.opts.If.GenerationMatch()); err != nil {
			w.abort()
			return err
		}
	}
	if err := w.w.Close(); err != nil {
		kind := classify(err)
		if kind == blob.ErrPrecondition && w.opts.If.NotExist() {
			kind = blob.ErrExists
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			kind = nil
		}
		return &blob.Error{Op: "write", Key: w.key, Kind: kind, Err: err}
	}
	return nil
}

// abort makes gocloud discard what was written: a writer whose context is
// canceled commits nothing.
func (w *writer) abort() {
	w.cancel()
	w.w.Close()
}

func (s *Store) checkPrecondition(ctx context.Context, op, key string, ifNotExist bool, ifGen string) error {
	if !ifNotExist && ifGen == "" {
		return nil
	}
	gen, err := s.generation(ctx, op, key)
	if err != nil {
		return err
	}
	switch {
	case ifNotExist && gen != "":
		return &blob.Error{Op: op, Key: key, Kind: blob.ErrExists}
	case ifGen != "" && gen == "":
		return blob.Errorf(op, key, blob.ErrPrecondition, "object does not exist")
	case ifGen != "" && gen != ifGen:
		return blob.Errorf(op, key, blob.ErrPrecondition, "generation is %s, not %s", gen, ifGen)
	}
	return nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	var ifGen string
	if opts != nil {
		ifGen = opts.IfGenerationMatch
	}
	if ifGen != "" && !s.opts.LocalPreconditions {
		return blob.Errorf("delete", key, blob.ErrUnsupported, "generation preconditions on this bucket")
	}
	if s.opts.LocalPreconditions {
		unlock := s.locks.lock(key)
		defer unlock()
		if err := s.checkPrecondition(ctx, "delete", key, false, ifGen); err != nil {
			return err
		}
	}
	return driver.WrapError("delete", key, s.b.Delete(ctx, key), classify)
}

// Copy implements blob.Copier with the backend's server-side copy.
func (s *Store) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	if err := s.check("copy", srcKey); err != nil {
		return err
	}
	if err := blob.ValidateKey("copy", dstKey); err != nil {
		return err
	}
	ifNotExist := opts != nil && opts.IfNotExist
	if s.opts.LocalPreconditions || ifNotExist {
		// gocloud's Copy has no conditions and keeps the source's metadata
		// (our generation token included), so copy through a writer instead.
		return blob.CopyBetween(ctx, s, dstKey, s, srcKey, opts)
	}
	return driver.WrapError("copy", srcKey, s.b.Copy(ctx, dstKey, srcKey, nil), classify)
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	o, err := driver.CheckListOptions(opts)
	if err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, &blob.Error{Op: "list", Key: o.Prefix, Kind: blob.ErrClosed}
	}
	if s.opts.SortListings {
		return s.listSorted(ctx, &o)
	}
	return s.listPaged(ctx, &o)
}

// listPaged relies on the backend's byte-ordered pages and filters StartAfter
// itself, asking for no more than the page still needs so that the backend's
// token always marks exactly where this page ends.
func (s *Store) listPaged(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	size := o.PageSize
	if size == 0 {
		size = blob.DefaultPageSize
	}
	token := gcblob.FirstPageToken
	if o.PageToken != "" {
		t, err := driver.DecodePageToken(o.PageToken)
		if err != nil {
			return nil, err
		}
		token = []byte(t)
	}
	page := &blob.ListPage{}
	for {
		objs, next, err := s.b.ListPage(ctx, token, size-len(page.Objects), &gcblob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter})
		if err != nil {
			return nil, driver.WrapError("list", o.Prefix, err, classify)
		}
		batch := make([]blob.ListObject, 0, len(objs))
		for _, obj := range objs {
			batch = append(batch, blob.ListObject{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5, IsDir: obj.IsDir})
		}
		page.Objects = append(page.Objects, driver.FilterAfter(batch, o.StartAfter)...)
		if len(next) == 0 {
			return page, nil
		}
		if len(page.Objects) >= size {
			page.NextPageToken = driver.EncodePageToken(string(next))
			return page, nil
		}
		token = next
	}
}

// listSorted lists the whole prefix, then pages it in memory (see Options.SortListings).
func (s *Store) listSorted(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	var all []blob.ListObject
	it := s.b.List(&gcblob.ListOptions{Prefix: o.Prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, driver.WrapError("list", o.Prefix, err, classify)
		}
		all = append(all, blob.ListObject{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime, MD5: obj.MD5})
	}
	return driver.Paginate(all, o)
}

// Close implements blob.Store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return &blob.Error{Op: "close", Kind: blob.ErrClosed}
	}
	return s.b.Close()
}

// keyLocks serializes commits of one key, so that a precondition check and the
// write it guards are atomic within the process.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

var domains struct {
	sync.Mutex
	m map[string]*keyLocks
}

func locksFor(domain string) *keyLocks {
	if domain == "" {
		return &keyLocks{m: map[string]*keyLock{}}
	}
	domains.Lock()
	defer domains.Unlock()
	if domains.m == nil {
		domains.m = map[string]*keyLocks{}
	}
	l := domains.m[domain]
	if l == nil {
		l = &keyLocks{m: map[string]*keyLock{}}
		domains.m[domain] = l
	}
	return l
}

func (l *keyLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}
