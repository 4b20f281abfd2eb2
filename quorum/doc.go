// Package quorum replicates objects over N stores, one per zone, and makes
// each key linearizable when read with consistency=majority (every
// acknowledged write, delete and conditional operation takes effect once,
// at one instant between its call and its return, and no majority read in
// any process that starts later misses it), while ReadFastest, the default,
// gives that up for one round trip: it serves the version the fastest
// replica holds, which may be older than the last write acknowledged by
// another process, or belong to a write still in flight that may yet fail
// (in one process, never older than that process's own acknowledged writes).
//
// Single-zone buckets are built for 99.95% availability and lose data with
// their zone; a quorum of three in three zones acknowledged at two survives
// either. Safety holds whatever fails; operations proceed while a majority
// of the replicas answer.
//
//	q, err := quorum.New([]blob.Store{zoneA, zoneB, zoneC}, quorum.Options{W: 2})
//	s, err := blob.Open(ctx, "quorum://?w=2&replica="+url.QueryEscape("gcsrapid://a")+"&replica=...")
//
// URL parameters: replica (repeated, each an escaped store URL, required), w
// (default N/2+1), consistency (fastest or majority), hedge_delay,
// straggler_timeout, close_timeout, failure_threshold, probe_interval,
// anti_entropy_interval, repair_grace, tombstone_grace, and the pool
// parameters of gcsrapid:// (pool_size, pool_min_idle, load_concurrency,
// max_item_age, write_timeout, grace_window, clock_skew, max_pools): with pool_size > 0
// the Store opened is a pool.Creator in front of the quorum, whose Creates
// take objects prewarmed on every replica (off by default: pool
// parameters without pool_size are an error); unknown ones are an error. The scheme is registered on blob.Open and on gocloud's
// DefaultURLMux.
//
// # The protocol
//
// Each key is a register decided by CASPaxos (Denis Rystsov, "CASPaxos:
// Replicated State Machines without Logs", 2018, arXiv:1802.07000; single
// decree Paxos per change, Lamport, "Paxos Made Simple", 2001), with the
// replicas as acceptors and, as in Disk Paxos (Gafni and Lamport, 2003), no
// server of ours on them: a replica's acceptor state is the object under the
// key itself, whose reserved metadata holds the version (VersionKey, the
// quorum's Generation), the ballot at which the replica accepted it
// (BallotKey), the highest ballot it promised (PromiseKey), and whether it is
// a tombstone or a placeholder (StateKey). Ballots and versions are tokens of
// 16 hex digits of Unix nanoseconds and 8 random ones, totally ordered as
// strings; a Store issues them above every token it has seen.
//
// A replica only moves forward: every change of its object is a write on
// condition of the replica generation just read (IfNotExist where it had
// none), so a writer or repairer that finds the object changed re-reads it
// and never overwrites a newer state. A promise of ballot b rewrites the
// object unchanged but for PromiseKey = b, and only if b is above every
// ballot the object shows; an accept writes the new version on condition of
// the generation that promise left, so it fails if anything touched the
// replica since. That is stricter than a Paxos acceptor, which keeps Paxos's
// safety.
//
// Every write and delete of a caller-named key is one round: prepare (on
// each replica that is up, in parallel: read its state and value, write the
// promise, read the state it left; a majority must promise), decide (the
// version accepted at the highest ballot among the promises is the current
// one; the operation computes the next one from it: a Put replaces it, an
// IfNotExist write needs none, IfGenerationMatch needs that version, a
// Delete writes a tombstone over a value), and accept (write the next
// version at ballot b on the promised replicas, each on condition of the
// state its promise left; acknowledged when W of them took it). The decision
// waits for W promises and a moment more; a replica that promises later
// still takes the accept while the others' accepts run, so that one
// promised replica that stalls does not hold the round up to its bound. W below a majority is raised to N/2+1, since conditions decided
// by smaller quorums could both succeed. A refusal (blob.ErrExists,
// blob.ErrPrecondition, blob.ErrNotFound) is given only on a current version
// held by a majority, accepted again at the round's ballot first when it is
// not (or when an earlier attempt of the operation left a version at a
// higher ballot; where the key has no version, a tombstone is accepted
// instead, since an absence carries no ballot), so it is linearizable too.
// A round that loses a prepare to a higher ballot tries
// again. A round whose accepts landed on too few replicas also tries again,
// and learns from the current version's chain (ChainKey: the versions that
// took effect before it, newest first, up to 32) whether its own version
// already took effect, so that no operation takes effect twice.
//
// An operation fails with ErrNoQuorum alone only when it certainly took no
// effect; with ErrUncertain added (its accepts landed somewhere and its
// retries could not settle it) it may take effect, once, later: a majority
// read or repair may finish it. So may an operation that failed with its
// context's error. Replicas are never rolled back. A caller that must know
// how such an operation ended resolves the key first (Resolve: one round
// that accepts the current version again at a ballot of its own, or a
// tombstone if there is none); after it, the failed operation has taken
// effect or never will, and a read tells which. A read alone does not: it
// may not hear the replica that holds the failed operation's accept.
//
// # Store-chosen names
//
// Prewarm of a name made by blob.NewName, which is how pool.NewCreator over a
// quorum serves pooled creates, writes a name no one else writes: one
// IfNotExist commit per replica at a fresh token, through the prewarmed
// replica writers, no consensus, acknowledged at W. Prewarm of any other key
// commits as an IfNotExist write decided by consensus, as does blob.Create
// without a pool (its IfNotExist write cannot tell a fresh name from a
// contended one).
//
// # Cost in round trips
//
// A write or delete of a caller-named key, conditional or not: four
// sequential replica round trips (read state and value in parallel, write
// the promise, read the state, write the accept), and an existing value's
// bytes are read and rewritten once by the promise. A pooled create: one. A
// majority read: two (read the state of a majority, read the value from a
// holder), more when a version must be settled. A fastest read: one (state
// and value read in parallel from the fastest replica, hedged).
//
// # Writes
//
// A Writer buffers the object and commits it at Close: a caller cancelling
// before Close commits nothing anywhere, one slow replica cannot throttle
// the stream to the others, and the same bytes can be accepted and repaired.
// It keeps up to 8 MiB in memory and the rest in an unlinked temporary file,
// as do the promises and reads that carry a large current version, so
// memory does not grow with the object. Bounds follow the work: an
// operation ends when none of its replica calls has succeeded for
// StragglerTimeout plus the time to move the largest object it handles at
// MinRate (1 MiB/s), so a busy machine slows it without failing it; a retry
// after accepts that may have landed begins within the operation's
// allowance of the first of them, and never more than four
// StragglerTimeouts or half of TombstoneGrace after it (its chain is what
// tells whether they took effect). Its
// accepts that were not needed for the acknowledgement finish in the
// background within that allowance; replicas that missed them are queued
// for repair.
// Close of the Store waits for them (at most CloseTimeout). An operation
// that its bound ends, while the caller's context is live, fails with
// ErrNoQuorum (and ErrUncertain if its accepts may have landed), never with
// a context error.
//
// # Deletes and tombstones
//
// Delete writes a tombstone, a version like any other, so a surviving older
// copy loses to it in reads, majority reads, repair and anti-entropy after a
// restart. Tombstones (and the placeholders a promise leaves on a replica
// that had nothing) are hidden from Stat, reads and List, and are collected
// once every replica holds the same one and TombstoneGrace has passed since
// its ballot; TombstoneGrace must exceed twice StragglerTimeout, so that
// nothing still in flight from before the delete can land after.
//
// # Reads
//
// A majority read (Options.Consistency, the URL's consistency=majority, or
// WithConsistency for one call) reads the state of a majority of the
// replicas. If the version accepted at the highest ballot among them is held
// by a majority, it is chosen and served; otherwise it is settled before it
// is answered: its accept is replayed onto the replicas that promised no
// higher ballot, and if that cannot reach a majority, a round of CASPaxos's
// read (a round that keeps the current version) decides. NotFound is a
// tombstone or nothing, chosen the same way.
//
// A read returns the bytes of the version whose attributes it returns:
// a fastest read takes the version from what the replica's reader itself
// reports (its generation, metadata, or size and modification time), never
// from a Stat made alongside it, which may have seen a later write; a
// reader that cannot prove it is retried elsewhere or read by majority.
// Every acknowledgement moves the process's floor, whichever round made it
// (its own accepts, or a retry that found an earlier attempt's accepts
// chosen, or a refusal on a version some replica lacks): until every replica
// holds that version, fastest reads of the key in this process read a
// majority.
//
// A fastest read asks the fastest healthy replica (by observed p50 latency;
// replicas in an error run and down replicas last) and hedges to the next
// after the p95 a healthy replica shows (the lowest observed p95, clamped to
// [MinHedgeDelay, MaxHedgeDelay]). A replica answering NotFound or holding a
// tombstone, and a key this process wrote that some replica may still lack,
// send the read to a majority instead. Keys written once (logs, segments,
// Create) read the same either way.
//
// List merges one page from N-W+1 or more replicas (every acknowledged
// object is on W of them), in byte order, honouring Prefix, Delimiter,
// StartAfter and page tokens. An entry the replicas disagree on, or that may
// be a tombstone (its size and MD5 are a tombstone's), is decided by a
// majority Stat; a common prefix is listed only if a value lies under it.
// Listings carry no Generation: Stat gives it.
//
// # Repair and health
//
// The repairer makes a key's replicas agree, in phases: survey every
// replica; decide the target, which must be chosen (held by a majority at
// one ballot: a version on fewer replicas is settled as a majority read
// settles it, never copied as it is); propagate it onto the replicas that
// accepted less, each on condition of its generation and only where no
// higher ballot was promised; collect tombstones. It is fed by writes that
// missed replicas, by majority reads, and by anti-entropy: every
// AntiEntropyInterval, and when a down replica comes back, every replica is
// listed and the keys they disagree on (older than RepairGrace) and old
// tombstones are queued. A replica that fails FailureThreshold calls in a
// row is marked down; operations skip it while enough others are up, and the
// prober brings it back.
//
// # Damage
//
// A replica's object may not be what a quorum wrote: damaged, truncated,
// or written by another tool. A value carries the CRC32C of its bytes
// (ChecksumKey); every read of a whole value verifies it (a read that streams
// past its first 512 KiB fails its last Read with blob.ErrCorrupt; a smaller
// one is verified before it is served, and another replica is asked), and no
// promise, replay or repair copies bytes that do not verify. A range read of
// part of a value of up to 1 MiB reads the whole value and verifies it (one
// more request); of a larger value, the range is served as read, unverified.
// An acceptor state that does not parse (a
// token that is not one or lies more than a day ahead, an unknown state, an
// object with no version that is not a placeholder) makes that replica
// unavailable for the key, never its highest ballot. Either way the replica
// is counted in Stats.Damaged and repair rewrites it from the version a
// majority holds, on condition of its generation (Stats.Rewritten), so one
// damaged replica of three loses nothing. Damage that no read or promise
// meets is found only by anti-entropy's listing comparison where it changes
// a listing's size or MD5, and then only when a read meets it. Values written
// through prewarmed replica writers (pooled creates) carry no checksum: their
// metadata is set before their bytes are known.
//
// # Retiring a version kept elsewhere
//
// Survey, ReadHeld and Retire serve a caller that has copied a key's
// version elsewhere (package tiered, into a regional pack) and wants it off
// the replicas without a tombstone round: Survey stats every replica,
// ReadHeld reads the version from one, and Retire deletes each replica's
// copy of it, or of an older version, on condition of its generation
// (deletes are free; a tombstone round is two writes a replica). Nothing
// newer is touched, and a round that promised on a replica before its copy
// went has its accept refused there, so nothing newer is lost. But the
// retirement is not atomic: until every copy is gone a majority read may
// settle a lingering copy back, so the caller must treat any version at or
// below the retired one as stale from then on, retire only versions issued
// more than InFlightBound ago (a retirement deletes the chain from which a
// retrying operation learns whether it took effect), and confirm the retirement
// with another Retire begun InFlightBound after the first (a read's
// settling and a round's writes land within it) that deletes nothing.
//
// # Optional capabilities
//
// A Store is a blob.Prewarmer (above) and a blob.Finalizer: Finalize settles
// the key and seals its acknowledged version on every replica that holds it.
// It reports both with Capabilities. It is not an Appender, a Copier
// or a ReaderAtOpener: appends and server-side copies would change replicas
// outside the consensus, and a native ReaderAt could read different
// versions on different replicas; blob.Append fails with ErrUnsupported, and
// blob.Copy and blob.OpenReaderAt fall back to reads and writes through the
// quorum.
//
// # Checked
//
// go test ./quorum records every operation's interval and outcome and checks
// each key's history against a register with porcupine
// (github.com/anishathalye/porcupine): the five ways acknowledged outcomes
// were once undone, each forced deterministically (TestScenario*), the
// fault cases of TestFaults from one process and from three, and a seeded
// simulation (TestSimulation: three Stores over three replicas, two clients
// each, puts, conditional puts, creates, deletes, conditional deletes and
// majority reads on four keys, under a fault schedule taking one replica at
// a time down, slow, erring, cut off from one process, or reporting commits
// and deletes failed after they took effect; then a new Store runs
// anti-entropy and every Store reads every key; fastest reads in it are
// held to the bytes of their generation and to their client's own
// acknowledged writes). TestDamagedReplica damages one replica of three
// in twelve ways and checks that nothing acknowledged is lost and repair
// rewrites it. The long run:
//
//	go test ./quorum -run TestSimulation -sim.seeds 300 -timeout 2h -v
//
// Its last run, on a shared 2-core machine, took 4m41s: 300 seeds, 115,505
// operations (31,223 acknowledged writes and deletes; 31,152 refused by
// their conditions or failed without effect; 1,353 uncertain; 51,777
// reads), 629,531 injected replica failures, every history linearizable.
// The default go test runs 4 seeds; -sim.replicas and -sim.w vary N and W.
//
// # Measured
//
// go test ./quorum -run '^$' -bench . -benchtime 300x: 3 mem:// replicas,
// each call that opens a reader or writer, commits or stats delayed by the
// fault wrapper (p50 2 ms, p99 5 ms: a zonal bucket's, see bench_test.go),
// 4 KiB objects, one run on a shared 2-core machine, p50/p99 in ms:
//
//	Put, one store alone                           5.4 /  11.3
//	Put, quorum (new key; overwrite 18.3 / 27.4)  18.2 /  24.4
//	Put, quorum, one replica 10x slower           22.6 /  31.2
//	Put IfGenerationMatch, quorum                 18.3 /  24.1
//	Put IfNotExist, quorum                        17.9 /  22.8
//	pooled create, one store alone                 2.3 /  23.6
//	pooled create, quorum                          2.4 /  24.4
//	Get, fastest, healthy                          3.3 /   6.4
//	Get, fastest, one replica 10x slower           3.4 /   9.7 (unhedged 3.3 / 31.6)
//	Get, majority, healthy                         5.7 /  11.1
//	Get, majority, one replica 10x slower          6.8 /  11.4
//
// A caller-named write costs about 3.3 single-store writes (its four round
// trips, two of them writes of a writer open and a commit each); a pooled
// create costs what one zone's does, its tail being the pool's refills, not
// the quorum's. On the GCS Rapid emulator (go run ./cmd/zonalblob bench
// gcsrapid quorum --size 10, profile rapid, 200 creates/s, one run with the
// machine's load average at 5 on 2 cores), pooled creates of 10 B took
// p50/p99 2.38/20.19 ms on one zone, 2.45/8.04 ms on a 2-of-3 quorum and
// 2.67/13.16 ms with one zone 150 ms slower; the tails move with the load.
//
// Observability: Options.MeterProvider publishes Stats as OpenTelemetry
// metrics (zonalblob.quorum.*: rounds, contention, uncertain outcomes,
// repairs, hedges, replica health), Options.TracerProvider traces the
// background repairs and anti-entropy passes, and Options.Logger hears of
// replicas marked down and back; a quorum:// URL takes them from blob.Open's
// options (see docs/observability.md).
package quorum
