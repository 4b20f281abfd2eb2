// Package gcsrapidtest is an in-process google.storage.v2 gRPC service for
// testing and benchmarking code that uses GCS Rapid (zonal) and regional
// buckets through cloud.google.com/go/storage, with no cloud account.
//
// It speaks the zonal protocol that no other emulator does: appendable
// objects created, flushed, read before they are finalized, taken over by a
// new writer and finalized over BidiWriteObject, and multi-range reads over
// BidiReadObject. Regional buckets take ordinary one-shot and resumable
// uploads. Like net/http/httptest:
//
//	srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
//		Buckets: []gcsrapidtest.Bucket{{Name: "hot", Zonal: true}},
//		Profile: gcsrapidtest.Rapid(), // or Zero() for functional tests
//	})
//	defer srv.Close()
//	client, err := srv.Client(ctx) // gRPC, appendable uploads, bidi reads
//	defer client.Close()
//
// Callers that build their own client pass srv.ClientOptions(). In a test,
// Start(t, opts) starts the server, fails t if it cannot, and closes it when
// t ends.
//
// Guarantees: every operation on one object is atomic and immediately
// consistent; generations strictly increase; preconditions fail with
// FAILED_PRECONDITION, missing objects and buckets with NOT_FOUND, reads
// past the end with OUT_OF_RANGE, bad requests with INVALID_ARGUMENT and
// writes past Options.MaxBytes with RESOURCE_EXHAUSTED, never a panic.
// A zonal bucket accepts only appendable writes and a regional bucket only
// ordinary ones, as the real service does. A takeover makes the new stream
// the writer: the old one fails on its next message, and its flushes never
// report bytes the new writer appended, even once a newer generation has
// replaced the object (a stream still the writer when its generation was
// replaced keeps a flush of the bytes it sent before). Delays come from the seeded
// Profile, so a run can be replayed; Stats counts every operation and
// InjectFault fails chosen calls to exercise client retries.
//
// Strictness, switchable per test, models what the real service does at
// scale: metadata reads report an out of date size for an unfinalized object
// (Profile.StaleSize, on in the Rapid profile); a connection carries at most
// MaxStreamsPerConn streams at once (100 by default, like a front end; the
// cap is advertised, so clients queue, and a stream over it is refused and
// counted); TransientFaults fails a seeded fraction of idempotent calls with
// UNAVAILABLE or RESOURCE_EXHAUSTED; Hierarchical applies a hierarchical
// namespace's naming rules to zonal buckets (CheckHierarchicalName).
//
// Failures the real service shows after a call has acted, also switchable
// (each Options field names its source): WriteBreaks fail appendable write
// streams with UNAVAILABLE after N messages (the object exists; bytes since
// the last flush are lost), right after a flush, or after a flush or
// finalize was applied but before its reply, or at those points end them
// ABORTED with a redirect that carries a routing token, the write handle
// and (or not) the generation, which the client follows by resuming as the
// same writer; MaxWriteMessage refuses write messages over 2 MiB with
// RESOURCE_EXHAUSTED; RefuseZeroGenerationTakeover refuses takeovers that
// name neither a generation nor a write handle with INVALID_ARGUMENT; and
// ReadStreamLifetime ends read streams (CANCELED, as the storage-testbench
// does after 10 s), idle or between two pieces of an answer; Redirects
// answers zonal write and read streams ABORTED with a routing token that the
// retried stream must replay. InjectFault, by contrast, fails a call before
// it acts.
//
// Served: BidiWriteObject, WriteObject, StartResumableWrite,
// QueryWriteStatus, BidiReadObject, ReadObject, GetObject, ListObjects,
// DeleteObject, UpdateObject, RewriteObject (one call), MoveObject and
// GetBucket. Not emulated, answered UNIMPLEMENTED or ignored: object
// versioning (a write replaces the live generation), IAM, ACLs, bucket
// management over RPC, compose, soft delete, glob listing and
// customer-supplied encryption keys.
package gcsrapidtest
