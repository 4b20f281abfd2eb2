package objstore

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/thanos-io/objstore"

	"github.com/zonalblob/zonalblob/blob"
)

// Provider is what Bucket.Provider reports.
const Provider objstore.ObjProvider = "ZONALBLOB"

// Bucket is an objstore.Bucket over a blob.Store. It is safe for concurrent
// use, as the Store is.
type Bucket struct {
	s    blob.Store
	name string
}

var (
	_ objstore.Bucket                   = (*Bucket)(nil)
	_ objstore.InstrumentedBucket       = (*Bucket)(nil)
	_ objstore.InstrumentedBucketReader = (*Bucket)(nil)
)

// New returns s as an objstore.Bucket that Name reports as name. The Bucket
// owns s: closing it closes s.
func New(s blob.Store, name string) *Bucket { return &Bucket{s: s, name: name} }

// Name implements objstore.Bucket.
func (b *Bucket) Name() string { return b.name }

// Provider implements objstore.Bucket.
func (b *Bucket) Provider() objstore.ObjProvider { return Provider }

// Close implements objstore.Bucket: it closes the Store.
func (b *Bucket) Close() error { return b.s.Close() }

// Upload implements objstore.Bucket. It streams r into one writer, so the
// object appears whole when r is drained, or not at all if reading r fails.
// An existing object is replaced.
func (b *Bucket) Upload(ctx context.Context, name string, r io.Reader, opts ...objstore.ObjectUploadOption) error {
	p := objstore.ApplyObjectUploadOptions(opts...)
	return blob.WriteFrom(ctx, b.s, name, r, &blob.WriterOptions{ContentType: p.ContentType})
}

// Delete implements objstore.Bucket. A missing object fails with an error
// that IsObjNotFoundErr recognises.
func (b *Bucket) Delete(ctx context.Context, name string) error {
	return b.s.Delete(ctx, name, nil)
}

// Exists implements objstore.BucketReader.
func (b *Bucket) Exists(ctx context.Context, name string) (bool, error) {
	return blob.Exists(ctx, b.s, name)
}

// Attributes implements objstore.BucketReader.
func (b *Bucket) Attributes(ctx context.Context, name string) (objstore.ObjectAttributes, error) {
	a, err := b.s.Stat(ctx, name)
	if err != nil {
		return objstore.ObjectAttributes{}, err
	}
	return objstore.ObjectAttributes{Size: a.Size, LastModified: a.ModTime}, nil
}

// IsObjNotFoundErr implements objstore.BucketReader: err wraps blob.ErrNotFound.
// A missing bucket (blob.ErrBucketNotFound) is not a missing object.
func (b *Bucket) IsObjNotFoundErr(err error) bool { return errors.Is(err, blob.ErrNotFound) }

// IsAccessDeniedErr implements objstore.BucketReader: err wraps blob.ErrPermission.
func (b *Bucket) IsAccessDeniedErr(err error) bool { return errors.Is(err, blob.ErrPermission) }

// WithExpectedErrs implements objstore.InstrumentedBucket. The Bucket records
// no metrics, so there is nothing to filter; objstore.WrapWithMetrics adds them.
func (b *Bucket) WithExpectedErrs(objstore.IsOpFailureExpectedFunc) objstore.Bucket { return b }

// ReaderWithExpectedErrs implements objstore.InstrumentedBucket (see WithExpectedErrs).
func (b *Bucket) ReaderWithExpectedErrs(objstore.IsOpFailureExpectedFunc) objstore.BucketReader {
	return b
}

// SupportedIterOptions implements objstore.BucketReader.
func (b *Bucket) SupportedIterOptions() []objstore.IterOptionType {
	return []objstore.IterOptionType{objstore.Recursive, objstore.UpdatedAt}
}

// Iter implements objstore.BucketReader (see IterWithAttributes).
func (b *Bucket) Iter(ctx context.Context, dir string, f func(string) error, options ...objstore.IterOption) error {
	return b.IterWithAttributes(ctx, dir, func(a objstore.IterObjectAttributes) error { return f(a.Name) }, options...)
}

// IterWithAttributes implements objstore.BucketReader. dir names a directory
// with or without its trailing "/" ("" is the top). Without
// objstore.WithRecursiveIter, the objects directly in dir come with one
// entry, ending in "/", per subdirectory; with it, every object below dir.
// Entries come in byte order of their names, one List page at a time; an
// object equal to dir itself (a directory marker) is skipped.
// objstore.WithUpdatedAt reports objects' modification times, not
// subdirectories'.
func (b *Bucket) IterWithAttributes(ctx context.Context, dir string, f func(objstore.IterObjectAttributes) error, options ...objstore.IterOption) error {
	if err := objstore.ValidateIterOptions(b.SupportedIterOptions(), options...); err != nil {
		return err
	}
	params := objstore.ApplyIterOptions(options...)
	if dir != "" && !strings.HasSuffix(dir, objstore.DirDelim) {
		dir += objstore.DirDelim
	}
	opts := &blob.ListOptions{Prefix: dir}
	if !params.Recursive {
		opts.Delimiter = objstore.DirDelim
	}
	for obj, err := range blob.All(ctx, b.s, opts) {
		if err != nil {
			return err
		}
		if obj.Key == dir {
			continue
		}
		a := objstore.IterObjectAttributes{Name: obj.Key}
		if params.LastModified && !obj.IsDir {
			a.SetLastModified(obj.ModTime)
		}
		if err := f(a); err != nil {
			return err
		}
	}
	return nil
}

// Get implements objstore.BucketReader. A missing object fails here, not at
// the first Read. The reader is an objstore.ObjectSizer.
func (b *Bucket) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	return b.open(ctx, name, 0, -1)
}

// GetRange implements objstore.BucketReader: length bytes from off, or to the
// end when length is -1; a range past the end is cut at it. ObjectSize
// reports the bytes the range holds.
func (b *Bucket) GetRange(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	return b.open(ctx, name, off, length)
}

// peekSize is how much open reads before returning.
const peekSize = 512

func (b *Bucket) open(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	r, err := b.s.NewRangeReader(ctx, name, off, length)
	if err != nil {
		return nil, err
	}
	// A Store may report a missing object only at the first Read, while
	// objstore callers decide on Get's error (a missing meta.json, say), so
	// one Read happens here and its bytes are served first.
	peek := make([]byte, peekSize)
	n, err := io.ReadAtLeast(r, peek, 1)
	if err != nil && err != io.EOF {
		r.Close()
		return nil, err
	}
	sr := &reader{r: r, peek: peek[:n], eof: err == io.EOF, size: -1}
	if a := r.Attributes(); a != nil {
		sr.size = max(a.Size-off, 0)
		if length >= 0 {
			sr.size = min(sr.size, length)
		}
	}
	return sr, nil
}

// reader serves the bytes open read ahead, then the rest of the object.
type reader struct {
	r    blob.Reader
	peek []byte
	eof  bool  // the Read that filled peek reached the end
	size int64 // of the range; -1 if the Store did not say
}

var _ objstore.ObjectSizer = (*reader)(nil)

func (r *reader) Read(p []byte) (int, error) {
	if len(r.peek) > 0 {
		n := copy(p, r.peek)
		r.peek = r.peek[n:]
		return n, nil
	}
	if r.eof {
		return 0, io.EOF
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.r.Close() }

// ObjectSize implements objstore.ObjectSizer: the size of the range read.
func (r *reader) ObjectSize() (int64, error) {
	if r.size < 0 {
		return 0, errors.New("objstore: the store gave no object size")
	}
	return r.size, nil
}
