package blob

import (
	"context"
	"io"
	"time"
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
	// Close returns nil. Options are checked with CheckAppend before any I/O;
	// opts.If and opts.IfSizeMatch, if set, must hold. nil opts append at
	// whatever the end is.
	NewAppender(ctx context.Context, key string, opts *AppendOptions) (Writer, error)
}

// AppendOptions control an append.
type AppendOptions struct {
	// If is the append's precondition: IfGenerationMatch(gen) makes it fail
	// with ErrPrecondition unless the object's current generation is gen.
	// The zero value appends to whatever version is there. IfNotExist() is
	// refused with ErrInvalidArgument before any I/O: an append extends an
	// existing object, and no Appender creates one (see CheckAppend).
	If Condition
	// IfSizeMatch, when >= 0, makes the append fail with ErrPrecondition unless
	// the object is exactly this long (the offset the caller believes it writes at).
	// Set it to -1 to append at whatever the end is. It is not part of If: it
	// names an offset, not a version, and holds alongside a generation.
	IfSizeMatch int64
}

// Copier is a Store that copies objects without moving the bytes through the client.
type Copier interface {
	// Copy copies srcKey to dstKey, replacing dstKey. A missing srcKey fails with
	// ErrNotFound. Options are checked with CheckCopy before any I/O.
	Copy(ctx context.Context, dstKey, srcKey string, opts *CopyOptions) error
}

// CopyOptions control a copy. The zero value replaces dstKey unconditionally.
type CopyOptions struct {
	// If is the precondition on dstKey. IfNotExist() makes the copy fail
	// with ErrExists if dstKey exists. IfGenerationMatch(gen) makes it fail
	// with ErrPrecondition unless dstKey's current generation is gen, on a
	// store that makes the copy itself conditional (a service-side If-Match,
	// or CopyBetween's conditional write); a store that cannot refuses it
	// with ErrInvalidArgument before any I/O, since checking the generation
	// and then copying would race a concurrent writer (see CheckCopy).
	If Condition
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

// Retirer is a Store that can remove a version it no longer needs to keep
// without a write of its own. A replicated store (package quorum) pays a
// consensus round for a Delete; a retirement deletes each replica's copy of
// a version, on condition of the replica's generation, and deletes are free.
// It is not atomic: until every copy is gone the store may show the version
// again. A caller that moved the version elsewhere (tiered, into a pack)
// must therefore never serve a version at or below one it moved, and
// confirms a retirement with a second Retire begun InFlightBound after the
// first ended (Retired.Complete with nothing deleted proves no copy is left
// and none can come back).
type Retirer interface {
	// Survey reads what each replica holds of key: the version a majority
	// holds (Holding.Attributes; nil when none) and each replica's object.
	Survey(ctx context.Context, key string) (Holding, error)
	// ReadHeld reads the bytes of the version h found, from one replica:
	// ErrPrecondition if that replica's object changed since the survey,
	// ErrNotFound if h found none.
	ReadHeld(ctx context.Context, h Holding) ([]byte, error)
	// Retire deletes, from every replica, the key's object if it holds
	// version or an older one, on condition of the replica's generation;
	// never a newer version.
	Retire(ctx context.Context, h Holding, version string) (Retired, error)
	// InFlightBound bounds how long after an operation begins its writes
	// may still land (a read settling a version may write a copy back).
	InFlightBound() time.Duration
	// GenerationTime returns when the version named by generation was
	// issued, on its writer's clock, if the generation says.
	GenerationTime(generation string) (time.Time, bool)
}

// Holding is what a Retirer's Survey found: opaque but for the attributes
// of the version a majority holds (nil when none), and whether a replica
// may hold an older one.
type Holding interface {
	Attributes() *Attributes
	// OlderLeft reports whether a replica may hold a version older than
	// the one found: it does not answer (replicas the survey did not hear
	// from are asked now), or it missed the version found. A retirement
	// of the version found leaves that older one, which the store may then
	// show again: a caller that keeps nothing elsewhere of what the version
	// meant retires it only when this is false.
	OlderLeft(ctx context.Context) bool
}

// Retired is what a Retire did.
type Retired struct {
	// Deleted counts the replica objects deleted.
	Deleted int
	// Newer reports that some replica holds a version newer than the one
	// retired: the key was written again.
	Newer bool
	// Complete reports that every replica answered and none holds a version
	// at or below the one retired any more.
	Complete bool
}

// fastestKey marks a context whose reads and Stats may be answered by the
// fastest replica of a replicated store.
type fastestKey struct{}

// WithFastestRead returns ctx with a hint for replicated stores: a read or
// Stat under it may be answered by the fastest replica alone, not a
// majority (for a caller that checks what it reads against a majority
// later, as a Retirer's Survey does). Stores with one copy ignore it.
func WithFastestRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, fastestKey{}, true)
}

// FastestRead reports whether ctx carries WithFastestRead's hint.
func FastestRead(ctx context.Context) bool {
	v, _ := ctx.Value(fastestKey{}).(bool)
	return v
}

// GenerationReporter is a Writer that knows, once its Close has returned
// nil, the generation of the version it wrote: the one a Stat would have
// returned just then. A caller that keeps it can later act on that version
// with IfGenerationMatch without asking for it first (a composite that
// deletes what it wrote pays one round trip, not two). Writers of stores
// whose service does not say (gocloud's buckets without local
// preconditions) do not implement it, or report false.
type GenerationReporter interface {
	WrittenGeneration() (generation string, ok bool)
}

// WrittenGeneration returns the generation of the version w wrote, if w is
// a GenerationReporter that knows it. Call it after Close returned nil.
func WrittenGeneration(w Writer) (string, bool) {
	if r, ok := w.(GenerationReporter); ok {
		return r.WrittenGeneration()
	}
	return "", false
}
