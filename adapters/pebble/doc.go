// Package pebble lets a cockroachdb/pebble (v2) database keep its sstables in
// any zonalblob Store: New returns a blob.Store as pebble's shared-storage
// interface, remote.Storage, for Options.Experimental.RemoteStorage (through
// remote.MakeSimpleFactory) with CreateOnShared and CreateOnSharedLocator.
// Pebble's WAL, manifest and shared-object catalog stay on its local vfs.FS.
// Call DB.SetCreatorID right after Open, with a number unique among the DBs
// that share the Store: until then every flush fails (and pebble retries it).
//
// How the Storage maps remote.Storage onto the Store:
//
//   - CreateObject is one Store writer; the object appears, whole, when the
//     writer's Close returns nil. Closing a writer after a failed Write
//     commits nothing.
//   - ReadObject is blob.OpenReaderAt (on gcsrapid one multi-range stream
//     per object, shared by concurrent reads; elsewhere a Stat for the
//     size); each ReadAt of its reader is ReadAtContext under that ReadAt's
//     own context (elsewhere one ranged read), so a cancelled one ends only
//     its own read, and the reader outlives the context it was opened
//     under (pebble's table cache keeps it).
//   - Size is Stat; Delete is Delete; List is a paged List of the prefix,
//     with or without a delimiter, prefix cut off (see Storage.List).
//   - IsNotExistError is errors.Is(err, blob.ErrNotFound).
//   - Close closes the Store.
//
// Limits: remote.Storage's CreateObject, List, Delete and Size take no
// context, so they run under context.Background; bound them in the Store
// (its own timeouts) if a backend can hang. Pebble also closes a writer to
// abort it; when no Write failed, that commits what was written so far as
// an object no table refers to (pebble's own TODO: it does not delete it).
// A Store's native ReaderAt (OpenReaderAt) is not used, as it reads under
// the context it was opened with. Every block cache miss is a ranged read
// of the Store (pebble reads ahead for scans and compactions), unless pebble's
// on-disk cache for shared objects is on
// (Options.Experimental.SecondaryCacheSizeBytes).
package pebble
