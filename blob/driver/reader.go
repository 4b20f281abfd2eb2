package driver

import (
	"io"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
)

// NewReader makes a blob.Reader of a backend's body for key: errors other than
// io.EOF are classified with classify and wrapped as OpRead errors, a Read
// after Close fails with ErrClosed, and attrs (called at most once, on the
// first Attributes call, since most readers never ask) describes the object.
func NewReader(key string, body io.ReadCloser, attrs func() *blob.Attributes, classify func(error) error) blob.Reader {
	return &reader{key: key, body: body, attrsFunc: attrs, classify: classify}
}

type reader struct {
	key       string
	body      io.ReadCloser
	classify  func(error) error
	attrsFunc func() *blob.Attributes
	attrsOnce sync.Once
	attrs     *blob.Attributes
	closed    bool
}

func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, ClosedError(OpRead, r.key)
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = WrapError(OpRead, r.key, err, r.classify)
	}
	return n, err
}

func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.body.Close()
}

func (r *reader) Attributes() *blob.Attributes {
	r.attrsOnce.Do(func() { r.attrs = r.attrsFunc() })
	return r.attrs
}

// EmptyReader returns a Reader with no bytes that describes attrs: what a
// driver returns for a read at or past the end of an object.
func EmptyReader(attrs *blob.Attributes) blob.Reader { return emptyReader{attrs} }

type emptyReader struct{ attrs *blob.Attributes }

func (emptyReader) Read([]byte) (int, error)       { return 0, io.EOF }
func (emptyReader) Close() error                   { return nil }
func (r emptyReader) Attributes() *blob.Attributes { return r.attrs }
