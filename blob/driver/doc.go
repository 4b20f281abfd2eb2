// Package driver is the kit for Store authors: the plumbing every driver and
// wrapper needs, written once so that each implements only what differs.
//
//   - Op* constants name operations in *blob.Error.
//   - Lifecycle is a Store's closed state; Check refuses a call on a closed
//     Store (ErrClosed) and an invalid key (ErrInvalidKey) before any I/O.
//   - WrapError classifies a backend's error into a blob sentinel once;
//     ClassifyWrite adapts the classification to a write's Condition.
//   - NewReader wraps a backend body as a blob.Reader whose errors are
//     classified; EmptyReader serves reads at or past the end.
//   - The checks of a Delete's, an append's and a copy's Condition are
//     blob.CheckDelete, blob.CheckAppend and blob.CheckCopy, in package
//     blob since its helpers and wrappers make them too: call them after
//     Lifecycle.Check, before any I/O.
//   - Lifecycle.CheckList is List's preamble; CheckListOptions, Paginate,
//     EncodePageToken, DecodePageToken and FilterAfter implement List's
//     contract for backends that cannot.
//   - Query reads URL parameters for an Opener (durations, byte sizes with
//     KiB/MiB/GiB suffixes) and rejects unknown ones.
//
// Users of a Store need package blob only; this package is for those who
// write one, as database/sql/driver is beside database/sql.
package driver
