// Package blob is the core of zonalblob: a small Store interface over object
// storage, the errors and options every backend shares, package helpers over the
// interface, optional capabilities found by type assertion, and a URL registry.
//
// A Store has five operations and Close: NewRangeReader, NewWriter, Stat, List and
// Delete. Everything else is either a package function over those (Put, ReadAll,
// Exists, Create, All) or an optional interface that a helper detects and falls
// back from (Prewarmer, Creator, Appender, Copier, ReaderAtOpener, Finalizer), as
// io/fs does with StatFS. CapabilitiesOf says which of them a Store, or a chain
// of wrappers, serves natively. Driver authors find their kit in blob/driver.
//
// Stores are opened by URL with Open ("mem://", "file:///tmp/x", "gcsrapid://b",
// ...): each driver package registers its scheme in init, so import the driver
// for its side effect. Importing a driver also registers the scheme on gocloud's
// blob.DefaultURLMux, and Bucket turns any Store into a *gocloud.dev/blob.Bucket.
//
// Guarantees every Store gives (and conformance.Run checks):
//
//   - Keys are valid UTF-8, 1 to 1024 bytes, without NUL; anything else fails
//     with ErrInvalidKey before any I/O.
//   - A write becomes visible, atomically and whole, when Close returns nil.
//     Cancelling the writer's context before Close commits nothing.
//   - A write's condition (WriterOptions.If) is one value: IfNotExist() fails
//     with ErrExists when the key exists, and of any number of concurrent
//     IfNotExist writers of one key at most one succeeds; IfGenerationMatch(g)
//     fails with ErrPrecondition when the generation differs. Deletes,
//     appends and copies (on their destination) take the same Condition,
//     and a condition an operation cannot take (IfNotExist on a delete or an
//     append, IfGenerationMatch("") anywhere, IfGenerationMatch on a copy the
//     store cannot make conditional) fails with ErrInvalidArgument before any
//     I/O, never ignored: CheckDelete, CheckAppend and CheckCopy.
//   - List is lexicographic by key (byte order) across pages.
//   - Errors wrap a sentinel (ErrNotFound, ErrExists, ...) in an *Error naming the
//     operation and key, and still unwrap to the backend's own error.
//
// Open takes options (WithMeterProvider, WithTracerProvider, WithLogger) that
// reach every store it opens, nested ones included (OpenOptionsFrom); with a
// TracerProvider every store it opens is wrapped in a TracedStore, which
// makes a span of every call and keeps every capability of the store below.
package blob
