package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
)

// Put writes data to key in one call.
func Put(ctx context.Context, s Store, key string, data []byte, opts *WriterOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	return writeAndClose(w, data, cancel)
}

// writeAndClose writes data and commits, cancelling (so committing nothing) if
// the write fails.
func writeAndClose(w Writer, data []byte, cancel context.CancelFunc) error {
	if _, err := w.Write(data); err != nil {
		cancel()
		w.Close()
		return err
	}
	return w.Close()
}

// ReadAll reads the whole of key.
func ReadAll(ctx context.Context, s Store, key string) ([]byte, error) {
	return ReadRange(ctx, s, key, 0, -1)
}

// ReadRange reads length bytes of key from offset (length < 0: to the end).
func ReadRange(ctx context.Context, s Store, key string, offset, length int64) ([]byte, error) {
	r, err := s.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	// Sized by what the object holds, not by length alone: a bound far past
	// the end (a reader of an object being appended to asks for more than
	// it may find) would allocate and clear it all for nothing.
	if n := r.Attributes().Size - offset; n > 0 {
		if length >= 0 {
			n = min(n, length)
		}
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Exists reports whether key exists.
func Exists(ctx context.Context, s Store, key string) (bool, error) {
	_, err := s.Stat(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// Create opens a writer for a new object whose name the store picks under
// prefix (see NewName: unique, reservation time recoverable with NameTime). It
// returns the key it chose. A Creator serves it natively (from a pool of
// prewarmed writers, one data round trip); any other Store gets a plain
// IfNotExist write.
//
// The object does not exist for anyone (List, Stat, reads) until the writer's
// Close returns nil, even where the store created it ahead of time. Names sort
// by reservation time, not commit time: a pooled name may be reserved up to
// the pool's MaxItemAge before its write, so an object can appear in a listing
// after later names did. Listing from a checkpoint misses such objects; code
// that reads in commit order must allow for that window.
func Create(ctx context.Context, s Store, prefix string, opts *WriterOptions) (string, Writer, error) {
	if err := validatePrefix("create", prefix); err != nil {
		return "", nil, err
	}
	if c, ok := s.(Creator); ok {
		return c.Create(ctx, prefix, opts)
	}
	return CreateInline(ctx, s, prefix, opts)
}

// CreateInline is Create without a Creator's pool: a new name under prefix
// written with IfNotExist. Creators use it for what they do not pool.
func CreateInline(ctx context.Context, s Store, prefix string, opts *WriterOptions) (string, Writer, error) {
	if err := validatePrefix("create", prefix); err != nil {
		return "", nil, err
	}
	key := NewName(prefix)
	o := withIfNotExist(opts)
	w, err := s.NewWriter(ctx, key, &o)
	if err != nil {
		return "", nil, err
	}
	return key, w, nil
}

// CreateBytes is Create followed by one Write and Close.
func CreateBytes(ctx context.Context, s Store, prefix string, data []byte, opts *WriterOptions) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key, w, err := Create(ctx, s, prefix, opts)
	if err != nil {
		return "", err
	}
	return key, writeAndClose(w, data, cancel)
}

func withIfNotExist(opts *WriterOptions) WriterOptions {
	var o WriterOptions
	if opts != nil {
		o = *opts
	}
	o.If = IfNotExist()
	return o
}

// Prewarm opens key for writing ahead of time (see Prewarmer). Over a Store
// that is not a Prewarmer it returns an ordinary IfNotExist writer, so callers
// need not care which they got.
func Prewarm(ctx context.Context, s Store, key string, opts *WriterOptions) (Writer, error) {
	if p, ok := s.(Prewarmer); ok {
		return p.Prewarm(ctx, key, opts)
	}
	if err := ValidateKey("prewarm", key); err != nil {
		return nil, err
	}
	o := withIfNotExist(opts)
	return s.NewWriter(ctx, key, &o)
}

// Append opens key for appending (see Appender), or fails with an error
// wrapping ErrUnsupported. Options CheckAppend refuses fail with
// ErrInvalidArgument whether or not s can append.
func Append(ctx context.Context, s Store, key string, opts *AppendOptions) (Writer, error) {
	if _, err := CheckAppend(key, opts); err != nil {
		return nil, err
	}
	if a, ok := s.(Appender); ok {
		return a.NewAppender(ctx, key, opts)
	}
	return nil, &Error{Op: "append", Key: key, Kind: ErrUnsupported, Err: fmt.Errorf("%T cannot append", s)}
}

// Finalize seals key (see Finalizer). On a Store without appendable objects
// every committed object is final already, so it only checks that key exists
// (ErrNotFound otherwise).
func Finalize(ctx context.Context, s Store, key string) error {
	if f, ok := s.(Finalizer); ok {
		return f.Finalize(ctx, key)
	}
	_, err := s.Stat(ctx, key)
	return err
}

// Copy copies srcKey to dstKey: server-side on a Copier, otherwise by streaming
// the bytes and attributes through this process (CopyBetween). A Copier says
// which conditions on dstKey it takes (see CopyOptions); the streaming copy
// takes those its write does.
func Copy(ctx context.Context, s Store, dstKey, srcKey string, opts *CopyOptions) error {
	if c, ok := s.(Copier); ok {
		return c.Copy(ctx, dstKey, srcKey, opts)
	}
	return CopyBetween(ctx, s, dstKey, s, srcKey, opts)
}

// CopyBetween streams srcKey of src to dstKey of dst with its attributes.
// The copy commits as one write of dstKey under opts.If, so IfGenerationMatch
// is as atomic as dst's conditional writes are, and a dst that cannot
// enforce it refuses the write, as it does any such write.
func CopyBetween(ctx context.Context, dst Store, dstKey string, src Store, srcKey string, opts *CopyOptions) error {
	if err := ValidateKey("copy", dstKey); err != nil {
		return err
	}
	cond, err := CheckCopy(dstKey, opts, true)
	if err != nil {
		return err
	}
	// Readers need not carry every attribute, so take them from Stat; the MD5
	// it returns guards against the source changing before the read.
	a, err := src.Stat(ctx, srcKey)
	if err != nil {
		return err
	}
	r, err := src.NewRangeReader(ctx, srcKey, 0, -1)
	if err != nil {
		return err
	}
	defer r.Close()
	wo := WriterOptionsFrom(a)
	wo.If = cond
	return WriteFrom(ctx, dst, dstKey, r, &wo)
}

// WriteFrom streams r into key and commits only if all of r was read: a
// failed read cancels the write, so nothing is committed.
func WriteFrom(ctx context.Context, s Store, key string, r io.Reader, opts *WriterOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.NewWriter(ctx, key, opts)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		w.Close()
		return err
	}
	return w.Close()
}

// WriterOptionsFrom returns options that recreate an object with attrs.
func WriterOptionsFrom(a *Attributes) WriterOptions {
	if a == nil {
		return WriterOptions{}
	}
	return WriterOptions{
		ContentType:        a.ContentType,
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		Metadata:           a.Metadata,
		ContentMD5:         a.MD5,
	}
}

// OpenReaderAt opens key for random access: natively on a ReaderAtOpener,
// otherwise with one range request per ReadAt call (under the context of
// the call, for ReadAtContext, or of the open, for ReadAt).
func OpenReaderAt(ctx context.Context, s Store, key string) (ReaderAt, error) {
	if o, ok := s.(ReaderAtOpener); ok {
		return o.OpenReaderAt(ctx, key)
	}
	a, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return &rangeReaderAt{ctx: ctx, s: s, key: key, size: a.Size}, nil
}

type rangeReaderAt struct {
	ctx    context.Context
	s      Store
	key    string
	size   int64
	mu     sync.Mutex
	closed bool
}

func (r *rangeReaderAt) Size() int64 { return r.size }

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadAtContext(r.ctx, p, off)
}

func (r *rangeReaderAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return 0, &Error{Op: "read", Key: r.key, Kind: ErrClosed}
	}
	if off < 0 {
		return 0, Errorf("read", r.key, ErrInvalidArgument, "negative offset %d", off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return 0, &Error{Op: "read", Key: r.key, Err: err}
	}
	rd, err := r.s.NewRangeReader(ctx, r.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	n, err := io.ReadFull(rd, p)
	if err == io.ErrUnexpectedEOF || (err == nil && off+int64(n) >= r.size && n < len(p)) {
		err = io.EOF
	}
	return n, err
}

func (r *rangeReaderAt) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// All iterates over every entry selected by opts, fetching pages as needed.
// PageToken in opts is where it starts. Iteration stops at the first error,
// which is yielded with a zero ListObject.
func All(ctx context.Context, s Store, opts *ListOptions) iter.Seq2[ListObject, error] {
	return func(yield func(ListObject, error) bool) {
		var o ListOptions
		if opts != nil {
			o = *opts
		}
		for {
			page, err := s.List(ctx, &o)
			if err != nil {
				yield(ListObject{}, err)
				return
			}
			for _, obj := range page.Objects {
				if !yield(obj, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			o.PageToken = page.NextPageToken
		}
	}
}
