// Package s3express is a blob.Store over an Amazon S3 Express One Zone
// directory bucket (NAME--AZID--x-s3), built on the AWS SDK for Go v2.
//
// URL form, registered on blob.Open and on gocloud's blob.DefaultURLMux:
//
//	s3express://logs--use1-az4--x-s3?region=us-east-1
//	s3express://logs--use1-az4--x-s3?region=us-east-1&endpoint=http://127.0.0.1:9000
//
// Parameters (sizes are bytes, optionally with a KiB, MiB or GiB suffix):
//
//	region               the bucket's region (required)
//	endpoint             an emulator's base URL (path-style addressing)
//	multipart_threshold  one PutObject up to this size, multipart above (default 16MiB)
//	part_size            part size of a multipart upload (default 8MiB, at least 5MiB)
//	warm_conns           connections opened in the background at open (default 4; 0: none)
//	retries              retries of a conditional write after the first attempt on 409
//	                     ConditionalRequestConflict (default 2; 0: none)
//	connect_timeout      bound of the first request, which creates the session (default 10s)
//
// Unknown parameters are an error. Credentials come from the SDK's default
// chain and never appear in errors. In Options, New's form, a zero field
// means its default and a negative WarmConns or Retries means none.
//
// Guarantees and costs:
//
//   - Opening a Store starts one CreateSession and then warm_conns
//     connections in the background; the first call waits for that session
//     instead of starting its own, so many concurrent first calls make one
//     CreateSession. OpenURL waits for that session: an endpoint that does
//     not answer within connect_timeout, or a missing bucket, fails the open
//     with an error naming it. New does not wait; a failed warm-up is
//     returned by its first call.
//   - Writes are one PutObject with a CRC32C checksum up to
//     multipart_threshold, multipart above; IfNotExist is If-None-Match: *,
//     IfGenerationMatch is If-Match on the ETag (the generation), on writes,
//     appends, deletes and CopyObject's destination alike. Nothing is
//     sent before Close, so cancelling a writer's ctx commits nothing; a
//     multipart upload in progress is aborted.
//   - List returns byte order for any prefix, delimiter and StartAfter,
//     although directory buckets list unordered, accept only prefixes ending
//     in "/" and no start-after: it lists the directory enclosing the prefix
//     completely and sorts it in memory. A page therefore costs
//     ceil(entries in that directory / 1000) ListObjectsV2 calls; continuation
//     pages are served from the first page's snapshot while it is fresh.
//   - Delete of a missing key fails with ErrNotFound, which costs a HeadObject
//     before the DeleteObject (S3 answers 204 for missing keys). DeleteMany
//     deletes up to 1000 keys per request and does not report missing keys.
//   - Appender appends with x-amz-write-offset-bytes.
//
// Options.MeterProvider receives request metrics (zonalblob.s3express.*:
// operations by name and outcome, their latency, the SDK's retries),
// Options.TracerProvider a client span per S3 operation, and an
// s3express:// URL takes both, and Logger, from blob.Open's options.
package s3express
