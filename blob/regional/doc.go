// Package regional opens any gocloud.dev/blob bucket as a blob.Store: the
// compaction target of a tiered store and the embedded default.
//
// URLs are gocloud's own, registered on blob.Open by importing this package:
//
//	mem://                         an in-memory bucket, new and empty on every Open
//	file:///abs/dir                a directory (created if missing; ?create_dir etc. as gocloud's fileblob)
//	gs://bucket                    Google Cloud Storage (gocloud's gcsblob)
//	s3://bucket?region=...         Amazon S3 and compatibles (gocloud's s3blob)
//	azblob://container             Azure Blob Storage (gocloud's azureblob)
//
// Query parameters are those of the gocloud driver, which rejects unknown ones.
//
// Guarantees beyond what gocloud gives: keys are validated before any I/O;
// List is in byte order and honours StartAfter on every backend; IfNotExist
// races have at most one winner; and on mem:// and file:// buckets generation
// preconditions (IfGenerationMatch on writes and deletes) are enforced under a
// lock held by this process, with a generation token kept in the object's
// metadata (key "zonalblob-generation", hidden from Attributes). On file://
// those guarantees hold among the Stores of one process only, and keys with a
// "." path segment or a final ".." are refused (the file system would alias them). On cloud buckets
// the generation is the backend's ETag and generation preconditions are not
// supported yet (ErrUnsupported).
package regional
