package blob

import (
	"context"
	"io"
	"time"
)

// Store is an object store: a flat namespace of keys mapping to immutable byte
// sequences with attributes. Implementations are safe for concurrent use.
//
// Every method validates its key (ValidateKey) before any I/O and returns errors
// that wrap the sentinels of this package in an *Error.
type Store interface {
	// NewRangeReader opens key for reading length bytes from offset. A negative
	// length reads to the end. An offset beyond the end is not an error: the
	// reader returns io.EOF at once. A missing key fails with ErrNotFound, at
	// the latest on the first Read. The reader sees the generation current when
	// it was opened.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (Reader, error)

	// NewWriter opens key for writing. Nothing is visible until Close returns
	// nil; then the whole object is, atomically, replacing any earlier generation.
	// If ctx is done before Close, Close fails and nothing is committed.
	// Preconditions in opts are checked at the latest by Close, which then
	// fails with ErrExists or ErrPrecondition. opts may be nil.
	NewWriter(ctx context.Context, key string, opts *WriterOptions) (Writer, error)

	// Stat returns the attributes of key, or ErrNotFound.
	Stat(ctx context.Context, key string) (*Attributes, error)

	// List returns one page of the objects selected by opts, in lexicographic
	// (byte) order of Key. Objects that exist for the whole of a paged listing
	// are returned exactly once; objects created or deleted between pages may
	// or may not appear. opts may be nil (all objects, default page size).
	List(ctx context.Context, opts *ListOptions) (*ListPage, error)

	// Delete removes key. A missing key fails with ErrNotFound; a generation
	// that does not match (opts.If) fails with ErrPrecondition. Options are
	// checked with CheckDelete before any I/O. opts may be nil.
	Delete(ctx context.Context, key string, opts *DeleteOptions) error

	// Close releases the store's resources. Later calls fail with ErrClosed.
	// Writers not yet closed are abandoned: nothing they wrote is committed.
	Close() error
}

// Reader reads one object. Close must be called.
type Reader interface {
	io.ReadCloser
	// Attributes describes the whole object being read: at least Size (the
	// object's size, not the range's), ContentType and ModTime; other fields
	// where the backend returns them with the read.
	Attributes() *Attributes
}

// Writer writes one object. The object is committed by a Close that returns nil.
type Writer interface {
	io.WriteCloser
}

// Attributes describes an object.
type Attributes struct {
	Key  string
	Size int64

	ContentType        string
	CacheControl       string
	ContentDisposition string
	ContentEncoding    string
	ContentLanguage    string
	// Metadata is user metadata. Keys are lower-cased by some backends.
	Metadata map[string]string
	// MD5 of the content, when the backend records it (empty otherwise).
	MD5 []byte
	// ETag as the backend reports it (opaque, not necessarily an MD5).
	ETag string
	// Generation identifies this version of the object. Pass it back in
	// IfGenerationMatch to act only if the object has not changed since. It is
	// opaque: a GCS generation number, an S3 or Azure ETag. It may be empty
	// where a store does not know it; IfGenerationMatch("") is then refused,
	// not read as unconditional.
	Generation string

	CreateTime time.Time
	ModTime    time.Time
}

// WriterOptions control a write. The zero value writes unconditionally.
type WriterOptions struct {
	ContentType        string
	CacheControl       string
	ContentDisposition string
	ContentEncoding    string
	ContentLanguage    string
	Metadata           map[string]string
	// ContentMD5, when set, is checked against the written bytes and the write
	// fails if they differ.
	ContentMD5 []byte

	// If is the write's precondition: IfNotExist() fails with ErrExists if
	// key exists, IfGenerationMatch(gen) with ErrPrecondition unless the
	// object's current generation is gen. The zero value writes
	// unconditionally.
	If Condition
}

// DeleteOptions control a delete. The zero value deletes unconditionally.
type DeleteOptions struct {
	// If is the delete's precondition: IfGenerationMatch(gen) deletes
	// generation gen only, failing with ErrPrecondition if the object holds
	// another. The zero value deletes whatever version is there.
	// IfNotExist() is refused with ErrInvalidArgument before any I/O (see
	// CheckDelete).
	If Condition
}

// DefaultPageSize is the page size used when ListOptions.PageSize is 0.
const DefaultPageSize = 1000

// ListOptions select what List returns.
type ListOptions struct {
	// Prefix keeps keys that start with it.
	Prefix string
	// Delimiter, if set, groups keys that contain it after Prefix into one
	// entry per common prefix (IsDir), as a directory listing does. "/" is
	// supported everywhere.
	Delimiter string
	// StartAfter keeps entries whose Key sorts strictly after it. A log's cold
	// start lists from its last checkpoint with it (not over names made by
	// Create, which sort by reservation time, not commit time: see Create).
	StartAfter string
	// PageSize bounds the entries per page; 0 means DefaultPageSize.
	PageSize int
	// PageToken continues a listing from the NextPageToken of the page before,
	// with the same other options.
	PageToken string
}

// ListPage is one page of a listing.
type ListPage struct {
	Objects []ListObject
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// ListObject is one entry of a listing.
type ListObject struct {
	Key        string
	Size       int64
	ModTime    time.Time
	MD5        []byte
	Generation string
	// IsDir marks a common prefix when listing with a Delimiter; Key then ends
	// with the delimiter and the other fields are zero.
	IsDir bool
}
