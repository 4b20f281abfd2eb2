package blob

import (
	"context"
	"io"
)

// Prewarmer is a Store that can open a key for writing ahead of time, so that
// the first Write and Close later cost one data round trip. The key must not
// exist (the write is IfNotExist). The returned Writer holds the warm handle;
// closing it commits as NewWriter's writer does, and a Writer abandoned by
// cancelling ctx leaves at most an empty object for a reconciler to remove.
type Prewarmer interface {
	Prewarm(ctx context.Context, key string, opts *WriterOptions) (Writer, error)
}

// Creator is a Store that picks object names itself (see Create), typically
// from a pool of prewarmed writers.
type Creator interface {
	Create(ctx context.Context, prefix string, opts *WriterOptions) (key string, w Writer, err error)
}

// Appender is a Store that can append to an existing object.
type Appender interface {
	// NewAppender opens key for appending. Appended bytes become visible when
	// Close returns nil. opts.IfGenerationMatch, if set, must match.
	NewAppender(ctx context.Context, key string, opts *AppendOptions) (Writer, error)
}

// AppendOptions control an append.
type AppendOptions struct {
	// IfGenerationMatch makes the append fail with ErrPrecondition unless the
	// object's current generation is this one.
	IfGenerationMatch string
	// IfSizeMatch, when >= 0, makes the append fail with ErrPrecondition unless
	// the object is exactly this long (the offset the caller believes it writes at).
	// Set it to -1 to append at whatever the end is.
	IfSizeMatch int64
}

// Copier is a Store that copies objects without moving the bytes through the client.
type Copier interface {
	// Copy copies srcKey to dstKey, replacing dstKey. A missing srcKey fails with
	// ErrNotFound.
	Copy(ctx context.Context, dstKey, srcKey string, opts *CopyOptions) error
}

// CopyOptions control a copy.
type CopyOptions struct {
	// IfNotExist makes the copy fail with ErrExists if dstKey exists.
	IfNotExist bool
}

// ReaderAt reads an object at arbitrary offsets, concurrently. It stays
// usable until Close, whatever becomes of the context it was opened with:
// ReadAtContext reads under the caller's context, so a reader held in a
// cache serves callers that each bring their own (as an LSM engine's table
// cache does); ReadAt reads under the context of the open.
type ReaderAt interface {
	io.ReaderAt
	io.Closer
	// Size is the object's size.
	Size() int64
	// ReadAtContext is ReadAt under ctx: it returns ctx's error once ctx
	// ends, and the reader, and any stream it holds, stays open for other
	// calls.
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
}

// ReaderAtOpener is a Store with a native random-access reader (for example a
// multi-range download on one stream).
type ReaderAtOpener interface {
	OpenReaderAt(ctx context.Context, key string) (ReaderAt, error)
}

// Finalizer is a Store whose objects stay open for appends until sealed
// (gcsrapid leaves appendable objects unfinalized on the write path). Finalize
// seals key: its bytes are final, later appends fail, and the object is an
// ordinary one. Finalizing an object that is already final is not an error.
type Finalizer interface {
	Finalize(ctx context.Context, key string) error
}
