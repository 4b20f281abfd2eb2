// Package s3expresstest runs an in-process S3 server on loopback that behaves
// like an S3 Express One Zone directory bucket, so the real AWS SDK for Go v2
// (and drivers built on it) can be tested without a cloud account.
//
// It is built on github.com/johannesboyne/gofakes3 and its in-memory backend,
// wrapped by a handler that adds what a directory bucket does differently:
//
//   - Session auth: CreateSession (GET /BUCKET?session) issues credentials,
//     and every data-plane request to a directory bucket must carry an
//     x-amz-s3session-token issued by this server (403 AccessDenied
//     otherwise) and a SigV4 signature made with that session's secret (403
//     SignatureDoesNotMatch otherwise). CopyObject is the exception: the SDK
//     signs it with the caller's own credentials and no session.
//   - ListObjectsV2 returns keys in a seeded pseudo-random order that is the
//     same for every page of a listing (directory buckets list unordered),
//     rejects start-after and prefixes not ending in "/" with 400
//     InvalidArgument, and pages with opaque continuation tokens.
//   - ETags are random, not MD5s. If-None-Match: * and If-Match are honoured
//     on PutObject and CompleteMultipartUpload (412 PreconditionFailed) and
//     If-Match on DeleteObject.
//   - x-amz-write-offset-bytes appends to an existing object; the offset must
//     equal the current size (400 InvalidWriteOffset otherwise). Each append
//     is a part of the object, which may have 10,000 (Options.MaxObjectParts):
//     the append past them fails with 400 TooManyParts; a copy starts again.
//   - x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256} are verified (400
//     BadDigest on mismatch), stored, and returned on GET/HEAD when the
//     request sends x-amz-checksum-mode: ENABLED.
//
// Buckets whose names end in "--x-s3" (for example "logs--use1-az4--x-s3")
// are directory buckets; any other name is a plain general purpose bucket:
// no session needed, lexicographic listing, start-after supported, MD5 ETags,
// which is what gocloud.dev/blob/s3blob expects of regional S3.
//
// Every request must be SigV4-signed (header or presigned URL), with
// DefaultAccessKeyID or Options.Credentials, or with session credentials on
// a directory bucket's data plane. The signature, and the body against a
// signed x-amz-content-sha256, are verified; aws-chunked chunk signatures
// are not.
//
// Usage, in the spirit of net/http/httptest:
//
//	srv, err := s3expresstest.NewServer(s3expresstest.Options{
//		Buckets: []string{"logs--use1-az4--x-s3"},
//		Profile: s3expresstest.MustProfile("express"),
//	})
//	defer srv.Close()
//	client := srv.Client() // path style, static credentials, us-east-1
//
// In a test, Start(t, opts) starts the server, fails t if it cannot, and
// closes it when t ends.
//
// The server listens on 127.0.0.1:0; URL returns "http://127.0.0.1:PORT".
// Every operation is delayed by the Profile's seeded latency distribution,
// counted in Stats, and can be made to fail on its Nth call with a Fault.
//
// Guarantees: every request is answered after the state change it makes is
// visible to all later requests (strong read-after-write, as on S3);
// conditional writes to one key are serialized, so of N racing
// If-None-Match: * writers exactly one succeeds; Close waits for all
// outstanding requests. Not emulated: versioning, ACLs, encryption,
// UploadPartCopy, composite multipart checksums (a completed multipart
// upload gets a full-object checksum of the algorithm it was created with).
package s3expresstest
