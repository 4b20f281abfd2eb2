// Package objstore lets engines written against thanos-io/objstore (Thanos,
// Loki, Mimir, Cortex) keep their data in any zonalblob Store: New returns a
// blob.Store as an objstore.Bucket, so a quorum:// or tiered:// store serves
// them as an S3 or GCS bucket would.
//
// How the Bucket maps the objstore API onto the Store:
//
//   - Get and GetRange are one NewRangeReader each. A missing object fails
//     there, not at the first Read, as objstore callers expect (a Store may
//     report it only at the first Read, so they read up to 512 bytes before
//     returning). Their readers are objstore.ObjectSizers.
//   - Upload streams into one Store writer, replacing any earlier object; if
//     reading its io.Reader fails nothing is committed.
//   - Iter and IterWithAttributes are paged Lists with the "/" delimiter, or
//     without it for objstore.WithRecursiveIter; objstore.WithUpdatedAt is
//     supported. Names come in byte order.
//   - Attributes and Exists are Stat; Delete is Delete (a missing object is
//     an error, as objstore asks).
//   - IsObjNotFoundErr is errors.Is(err, blob.ErrNotFound), IsAccessDeniedErr
//     errors.Is(err, blob.ErrPermission). A missing bucket is neither.
//   - Close closes the Store.
//
// Limits: Upload's only option, a content type, is kept; objstore has no
// conditional writes, so none are made (two uploads of one name race, and
// the last to commit wins). The Bucket is an objstore.InstrumentedBucket that
// records nothing: wrap it with objstore.WrapWithMetrics for the usual
// Prometheus metrics. Keys must be valid blob keys (an empty name fails with
// blob.ErrInvalidKey). How consistent reads and listings are after a write
// is the Store's guarantee (objstore assumes read-after-write).
package objstore
