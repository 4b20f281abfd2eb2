// Package fault wraps a blob.Store with deterministic, switchable fault
// injection, so that tests of quorum writes, tiered compaction and retries can
// prove that no acknowledged write is lost when a replica fails, stalls or goes
// away. It plays the part of pebble's vfs/errorfs and opendal's chaos layer.
//
// Rules are added and removed at runtime and target one Op (open a reader, each
// Read, open a writer, each Write, the commit at writer Close, Stat, List,
// Delete and the optional operations): fail the Nth call, fail a run of calls,
// fail with a probability, add latency drawn from a latency.Dist, hang until the
// caller's context is done, or take the whole store down (SetDown) as an
// unreachable zone would be. A failure at OpCommit or OpDelete happens either
// before the inner store acts (FailNth: the inner writer is aborted by
// cancelling its context, so nothing is committed) or after it succeeded
// (FailNthAfter: the object is committed or deleted, yet the caller sees an
// error, the classic ambiguous outcome that durability code must survive).
//
// Every error the wrapper produces is a *blob.Error naming the Op and key that
// wraps ErrInjected (and ErrDown, a context error or the caller-supplied error,
// as the case may be), so a test can tell injected failures from real ones.
// Stats counts calls, injected failures and delays (how many, and their total)
// per Op, so a test can assert that the fault it arranged actually fired, and
// that a delay was injected, without timing anything.
//
// # Determinism
//
// All randomness, probability draws and latency samples alike, comes from one
// generator seeded with Options.Seed, and rules are evaluated under one lock in
// the order calls arrive. A run therefore replays exactly for a given seed and a
// given order of calls; with concurrent callers the scheduler decides that
// order, so tests that need replay issue their calls from one goroutine (or in
// an order they fix themselves). A rule counts the calls that match it from the
// moment it is added, so "FailNth(OpCommit, 1, nil)" means the next commit.
//
// # Optional interfaces
//
// Go type assertions on a wrapper would always find whatever methods the
// wrapper declares, and Wrap returns the concrete *Store, so a value that
// implements exactly the inner store's capabilities (the http.ResponseWriter
// wrapping problem) is not on offer. Instead *Store implements every optional
// interface of package blob and serves each call natively when the inner store
// has the capability, and otherwise with the same fallback the blob helper
// would use (an IfNotExist writer for Prewarm and Create, a streamed copy for
// Copy, a range-reading ReaderAt for OpenReaderAt, an error wrapping
// blob.ErrUnsupported for Append). The fallbacks run through the wrapper's own
// faulted core operations, so blob.Create, blob.Copy, blob.Prewarm, blob.Append
// and blob.OpenReaderAt over a wrapper with no rules behave exactly as over the
// inner store, and rules on OpWrite, OpRead and OpCommit still reach them.
// Code that must know what the backend really supports asserts on Unwrap().
//
// # Order of wrappers
//
// Put the fault wrapper next to the backend and everything else outside it:
// retry(timeout(fault(backend))), and for replication quorum(fault(zoneA),
// fault(zoneB), fault(zoneC)) with one seed per replica. Retries and timeouts
// then meet injected failures exactly as they would meet real ones, and Hang
// relies on an outer timeout (or the caller's deadline) to end it.
package fault
