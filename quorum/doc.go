// Package quorum replicates objects over N stores, one per zone, and
// acknowledges a write once W of them committed it: single-zone buckets are
// built for 99.95% availability and lose data with their zone, a quorum of
// three in three zones acknowledged at two survives either.
//
//	q, err := quorum.New([]blob.Store{zoneA, zoneB, zoneC}, quorum.Options{W: 2})
//	s, err := blob.Open(ctx, "quorum://?w=2&replica="+url.QueryEscape("gcsrapid://a")+"&replica=...")
//
// URL parameters: replica (repeated, each an escaped store URL, required), w
// (default N/2+1), consistency (fastest or majority), hedge_delay,
// straggler_timeout, close_timeout, failure_threshold, probe_interval,
// anti_entropy_interval, repair_grace; unknown ones are an error. The scheme
// is registered on blob.Open and on gocloud's DefaultURLMux.
//
// # Versions and generations
//
// Each replica has its own generations, so every write carries a quorum
// version token, identical on all replicas, in the metadata key VersionKey
// (hidden from Attributes). Attributes.Generation is that token. Tokens are
// 16 hex digits of time then random digits, so they order as strings; a
// process issues increasing tokens, and a conditional write's token is above
// the one it replaces. IfGenerationMatch(g) stats the replicas, then writes
// (or deletes) each replica holding g, or an older version it missed, on
// condition of that replica's own generation; it succeeds when W replicas
// did, and fails with ErrPrecondition when no replica holds g or more than
// N-W hold something newer. Objects written to a replica around the quorum
// carry no token and cannot be matched. Listings carry no Generation (a
// replica's listing does not show the token): Stat gives it.
//
// # Writes
//
// A Writer buffers the object and, at Close, writes it to every replica that
// is not down, in parallel; Close returns once W committed. Buffering suits
// the small log segments and files this is built for: a caller cancelling
// before Close commits nothing anywhere (no replica writer was even opened),
// one slow replica cannot throttle the stream to the others, and the same
// bytes can be retried and repaired. It costs the object's size in memory.
// Stragglers finish in the background within StragglerTimeout; replicas that
// failed or were down are queued for repair. Close of the Store waits for
// them (at most CloseTimeout) and stops every goroutine.
//
// A write that fewer than W replicas committed fails with an error wrapping
// ErrNoQuorum (or ErrPrecondition / ErrExists when the replicas refused it).
// Its copies that did land, including ones whose commit reported an error,
// are removed before Close returns (not left for a reconciler): a new key's
// copy is deleted, an overwrite's copy is replaced by the version it
// overwrote, each on condition of that replica's generation so that nothing
// written meanwhile is touched. Precisely:
//
//   - ErrNoQuorum without ErrUncertain: the write is undone on every replica;
//     no read, here or in another process, returns its bytes.
//   - ErrNoQuorum with ErrUncertain: the undo could not be finished (a replica
//     unreachable, or another write to the key in flight), or commits that
//     reported errors had in fact replaced the previous version on W replicas,
//     in which case the repairer keeps the new version rather than leave
//     nothing. Old or new may be read later; this Store never serves the
//     failed version while its undo is pending.
//   - A context error from Close (ctx ended during Close): old or new.
//   - ErrExists from IfNotExist: this creator's copies are gone or being removed.
//
// IfNotExist succeeds only when max(W, N/2+1) replicas created the object
// with their own IfNotExist, so of any number of concurrent creators at most
// one succeeds (two would need overlapping majorities). A loser deletes its
// own copies only (same token, on condition of their replica generation),
// and when creators split the replicas so that none can win, they retry
// after a random pause, a few times, then report ErrExists.
//
// Delete is acknowledged when W replicas no longer hold the object; it fails
// with ErrNotFound when N-W+1 replicas never had it. A failed delete may have
// taken effect on some replicas; repair then restores the object.
//
// # Reads
//
// Reads go to the fastest healthy replica (by observed p50 latency; replicas
// in an error run and down replicas last) and hedge to the next after the p95
// a healthy replica shows (the lowest observed p95, clamped to
// [MinHedgeDelay, MaxHedgeDelay]: waiting for the slow replica's own p95
// would wait longest exactly when it turned slow); the first good answer
// wins. A hedge that loses still records how long its replica took, so a
// replica that turns slow drops to the back of the order. A hedged read answers with its first 512 KiB in
// hand, so small objects are hedged whole. NotFound is returned only after
// N-W+1 replicas said it, since every acknowledged object is on W of them.
//
// Within one Store, a read sees every write and delete acknowledged before it
// started: while replicas disagree on a key the Store remembers the version
// it acknowledged last (and failed versions) and rejects replicas holding
// older ones. Across processes, ReadFastest may return an older version of a
// key overwritten or deleted while the replica read was missing the change
// and not yet repaired. Keys written once (logs, segments, Create) read the
// same either way. A reader in another process that must see the newest
// overwrite of a key uses ReadMajority (Options.Consistency, the URL's
// consistency=majority, or WithConsistency for one call): it stats
// max(N-W+1, N/2+1) replicas, which overlap every write quorum, serves the
// newest version and queues the replicas that differ for repair (read repair).
// Overwrites are ordered by token, that is by clock across processes: use
// IfGenerationMatch where order matters.
//
// List merges one page from N-W+1 or more replicas (union, so an object
// acknowledged on W replicas is listed even when a replica lacks it), in byte
// order, honouring Prefix, Delimiter, StartAfter and page tokens.
//
// # Repair and health
//
// A background repairer makes a key's replicas agree: on the version this
// Store acknowledged last (a delete included), or else the newest version
// that is not a failed write, copied from a replica holding it. It only ever
// writes on condition of the generation it just read, so it never overwrites
// a newer copy. It is fed by writes and deletes that missed replicas, by
// majority reads, and by anti-entropy: every AntiEntropyInterval, and when a
// down replica comes back, every replica is listed and keys they disagree on
// (older than RepairGrace, so as not to race writes in flight elsewhere) are
// queued. A replica that fails FailureThreshold calls in a row is marked
// down; writes skip it (while W others are up) and the prober brings it back.
//
// Prewarm prewarms the key on every replica that is up (natively where the
// replica is a blob.Prewarmer) and returns once an IfNotExist quorum is warm,
// so a pool of prewarmed writers composes on top of a quorum.
//
// # Measured
//
// go test ./quorum -run XXX -bench . -benchtime 300x, 3 mem:// replicas each
// delayed p50 2 ms / p99 5 ms per call by the fault wrapper, 4 KiB objects, on
// a shared 2-core machine (one run; they move by about 1 ms between runs):
// Put p50/p99 single store 5.4/9.4 ms, quorum 5.6/8.5 ms, quorum with one
// replica 10x slower 5.7/10.1 ms; Get p99 with one replica turned 10x slower
// 8.7 ms hedged vs 32.4 ms unhedged (6.5 ms when all are healthy).
//
// Guarantees hold with at most N-W replicas failed (down, slow or erring) at
// a time, and replicas that do not lose what they acknowledged.
package quorum
