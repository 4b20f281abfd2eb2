// Package regional opens any gocloud.dev/blob bucket as a blob.Store: the
// compaction target of a tiered store and the embedded default.
//
// URLs are gocloud's own, registered on blob.Open by importing this package:
//
//	mem://                         an in-memory bucket, new and empty on every Open
//	file:///abs/dir                a directory (?create_dir etc. as gocloud's fileblob)
//	gs://bucket[/prefix/]          Google Cloud Storage (gocloud's gcsblob)
//	gs://bucket[/prefix/]?endpoint=HOST:PORT
//	                               a GCS emulator's google.storage.v2 gRPC service
//	s3://bucket[/prefix/]?region=  Amazon S3 and compatibles (gocloud's s3blob)
//	azblob://container[/prefix/]   Azure Blob Storage (gocloud's azureblob)
//
// Every URL is checked before any I/O: a file: URL must be file:///ABSOLUTE
// (or file://localhost/ABSOLUTE), never relative or with another host; a
// cloud URL must name its bucket, and s3:// its region (or AWS_REGION); a
// path in a cloud URL is the key prefix and must end in "/". A file://
// store keeps temporary files beside their objects (fileblob's no_tmp_dir,
// the default here), so a directory on another file system than TMPDIR
// takes writes.
//
// Query parameters are those of the gocloud driver, which rejects unknown ones.
//
// With endpoint=HOST:PORT a gs:// URL reaches an emulator instead of Google
// (gcsrapidtest, or the regional buckets of `zonalblob serve`): gocloud's
// gcsblob over a storage gRPC client (gcsblob.OpenBucketGRPC) on a plaintext
// connection with no credentials. The endpoint must be HOST:PORT, without a
// scheme, path, query or user information, and is checked before any dial;
// its errors never repeat a refused value. It takes only connect_timeout
// (default 10s) besides: gocloud's gs:// parameters choose credentials and
// transports, which such a connection does not use. Opening reads the
// bucket's metadata once: an endpoint that does not answer within
// connect_timeout fails the open naming it, and a missing bucket fails it
// with ErrBucketNotFound. Writes are ordinary (non-appendable) uploads, so
// the bucket must be a regional one; zonal buckets are gcsrapid:// stores.
// Without endpoint nothing changes: gocloud's own opener, with Google's
// endpoint and credentials from the environment.
//
// Guarantees beyond what gocloud gives: keys are validated before any I/O;
// List is in byte order and honours StartAfter on every backend (except, on
// s3://, gs:// and azblob://, for keys holding a character gocloud's driver
// hex-escapes, such as a control character, or "\" "#" "%" "?" on azblob://:
// such a key round-trips but lists where its escaped form sorts); IfNotExist
// races have at most one winner; and on mem:// and file:// buckets generation
// preconditions (IfGenerationMatch on writes, deletes and copies'
// destinations) are enforced under a lock held by this process, with a
// generation token kept in the object's metadata (key
// "zonalblob-generation", hidden from Attributes). Elsewhere they are
// refused: ErrUnsupported for writes and deletes, ErrInvalidArgument, before
// any I/O, for copies. On file://
// those guarantees hold among the Stores of one process only, and the keys a
// file tree would alias or cannot hold are refused with ErrInvalidKey before
// any I/O (see checkFileKey: a leading "/", a "." segment, a final "..", a
// final ".attrs" or temporary-file name, a segment over 234 bytes once
// escaped), so that every key accepted round-trips exactly. On cloud buckets
// the generation is the backend's ETag and generation preconditions are not
// supported yet (ErrUnsupported).
package regional
