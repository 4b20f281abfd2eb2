package pebble

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/objstorage/remote"

	"github.com/zonalblob/zonalblob/blob"
)

// Storage is a remote.Storage over a blob.Store. It is safe for concurrent
// use, as the Store is.
type Storage struct {
	s blob.Store
}

var _ remote.Storage = (*Storage)(nil)

// New returns s as a pebble remote.Storage. The Storage owns s: closing it
// closes s (pebble itself never closes a remote.Storage).
func New(s blob.Store) *Storage { return &Storage{s: s} }

// Close implements remote.Storage: it closes the Store.
func (st *Storage) Close() error { return st.s.Close() }

// CreateObject implements remote.Storage. The object is written by one Store
// writer and appears, whole, when the writer's Close returns nil, replacing
// any object of that name. After a failed Write, Close commits nothing and
// returns the Write's error.
func (st *Storage) CreateObject(objName string) (io.WriteCloser, error) {
	// remote.Storage gives no context; cancelling this one abandons the write.
	ctx, cancel := context.WithCancel(context.Background())
	w, err := st.s.NewWriter(ctx, objName, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	return &writer{w: w, cancel: cancel}, nil
}

type writer struct {
	w      blob.Writer
	cancel context.CancelFunc
	err    error // of the first failed Write
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	if err != nil {
		w.err = err
	}
	return n, err
}

func (w *writer) Close() error {
	if w.err != nil {
		// Cancelled before Close, the Store commits none of the bytes
		// written before the failure.
		w.cancel()
		w.w.Close()
		return w.err
	}
	err := w.w.Close()
	w.cancel()
	return err
}

// ReadObject implements remote.Storage with the Store's random-access reader
// (blob.OpenReaderAt: gcsrapid's one multi-range stream per object, or a
// Stat and then one ranged read per ReadAt on other Stores), each ReadAt
// under that ReadAt's context: pebble keeps readers in its table cache and
// calls them under the contexts of later operations.
func (st *Storage) ReadObject(ctx context.Context, objName string) (remote.ObjectReader, int64, error) {
	ra, err := blob.OpenReaderAt(ctx, st.s, objName)
	if err != nil {
		return nil, 0, err
	}
	return &objectReader{ra: ra, key: objName, size: ra.Size()}, ra.Size(), nil
}

type objectReader struct {
	ra     blob.ReaderAt
	key    string
	size   int64
	closed atomic.Bool
}

// ReadAt fills p from offset or fails: a range past the end of the object
// is an error wrapping io.EOF, and an object shorter than when it was opened
// (replaced since) one wrapping io.ErrUnexpectedEOF.
func (r *objectReader) ReadAt(ctx context.Context, p []byte, offset int64) error {
	if r.closed.Load() {
		return &blob.Error{Op: "read", Key: r.key, Kind: blob.ErrClosed}
	}
	if offset < 0 || offset+int64(len(p)) > r.size {
		return blob.Errorf("read", r.key, blob.ErrInvalidArgument, "range [%d, %d) is past the end %d: %w", offset, offset+int64(len(p)), r.size, io.EOF)
	}
	if len(p) == 0 {
		return nil
	}
	n, err := r.ra.ReadAtContext(ctx, p, offset)
	if n == len(p) && (err == nil || err == io.EOF) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &blob.Error{Op: "read", Key: r.key, Err: err}
}

func (r *objectReader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.ra.Close()
}

// List implements remote.Storage with a paged Store listing: the names that
// start with prefix, with prefix cut off. With a delimiter, names that
// contain it after prefix are grouped into one entry, the text between
// prefix and the delimiter (so List("", "/") over a, b/4 and b/5 gives a and
// b, and List("b/", "/") gives 4 and 5; a delimiter right after prefix, as in
// List("b", "/"), groups them into one empty name). Names come in byte order.
func (st *Storage) List(prefix, delimiter string) ([]string, error) {
	var names []string
	for obj, err := range blob.All(context.Background(), st.s, &blob.ListOptions{Prefix: prefix, Delimiter: delimiter}) {
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if obj.IsDir {
			name = strings.TrimSuffix(name, delimiter)
		}
		names = append(names, name)
	}
	return names, nil
}

// Delete implements remote.Storage. A missing object fails with an error
// IsNotExistError recognises.
func (st *Storage) Delete(objName string) error {
	return st.s.Delete(context.Background(), objName, nil)
}

// Size implements remote.Storage with a Stat.
func (st *Storage) Size(objName string) (int64, error) {
	a, err := st.s.Stat(context.Background(), objName)
	if err != nil {
		return 0, err
	}
	return a.Size, nil
}

// IsNotExistError implements remote.Storage: err wraps blob.ErrNotFound. A
// missing bucket (blob.ErrBucketNotFound) is not a missing object.
func (st *Storage) IsNotExistError(err error) bool { return errors.Is(err, blob.ErrNotFound) }
