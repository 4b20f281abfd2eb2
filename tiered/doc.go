// Package tiered puts a hot store (a zonal bucket, or a quorum of them) in
// front of a cold one (a regional bucket): writes land hot, and a background
// compactor moves objects to cold once they are older than After, many at a
// time into one regional pack with an index, and an object larger than a
// pack into a pack of its own (see Packs): every move is a pack move. Zonal
// storage costs about five
// times as much per GiB, and a quorum keeps it two or three times, so data
// should stay hot for minutes, not months.
//
//	s, err := tiered.New(hot, cold, tiered.Options{After: 5 * time.Minute})
//	s, err := blob.Open(ctx, "tiered://?hot=URL&cold=URL&after=5m")
//
// URL parameters (hot and cold are URLs of registered schemes, query-escaped;
// unknown parameters are an error): hot, cold, after (0 moves at once),
// interval, concurrency, max_objects_per_second, max_bytes_per_second,
// move_timeout, manual, pack_max_objects,
// pack_max_bytes, pack_min_live_percent, max_clock_skew, lease, lease_in,
// shards, index_cache_bytes; all are checked before any I/O. The scheme is registered on blob.Open and on gocloud's
// blob.DefaultURLMux.
//
// # Operations
//
// Unconditional writes are the hot store's writer, unchanged, and Create is
// the hot store's Create (its names are new, so cold need not be asked): the
// write path costs what the hot store costs. Writes with IfNotExist or
// IfGenerationMatch also consult cold (one cold Stat); see Conditional
// operations for what orders them. Reads and Stat try hot, then cold, asking cold only
// after hot's miss (so no read returns a version older than one acknowledged
// before it began). A miss in both asks both again before it is reported:
// a Delete of a version put in hot after the first miss deletes the older
// copy it shadows in cold first, so two misses alone do not prove the key
// was ever absent (Stats.MissesChecked counts these). List merges both tiers, hot's
// attributes winning; objects listed from cold only have an empty Generation
// (Stat has it). Delete takes effect at one instant, when the version
// readers see is replaced by a grave (see Graves) or removed, and never
// removes a version written after it. An object keeps its generation when
// it moves (its pack entry records its attributes), so a generation read
// before a move still matches after it. Cold objects of users' names
// (objects an earlier version moved one by one, recording their generation
// in metadata key zonalblob-tiered-generation, or objects put in the cold
// bucket by other means) are read, listed and deleted as the version in
// cold when no pack serves the key. Close stops the compactor, waits for
// its moves and closes both tiers. Stats reports objects and bytes moved,
// conflicts with users, failures, and lag.
//
// # Conditional operations
//
// What orders conditional operations (IfNotExist and IfGenerationMatch
// writes, Deletes with or without IfGenerationMatch) is a conditional write
// in hot that every contender must win, never a process's memory, so they
// are linearizable across any number of Stores (processes) sharing the
// tiers, as they are on hot alone (a quorum's IfNotExist and
// IfGenerationMatch are consensus rounds). An operation on a version in
// hot is conditional on that version's generation in hot. An IfNotExist
// write checks cold, then writes to hot IfNotExist. An IfGenerationMatch
// write of a version that lives in cold only takes the key's lock in hot
// first: an object of a reserved name, written IfNotExist and deleted on
// condition of its generation when the write ends. Under it, hot is asked
// again (a version there is written over in hot instead) and then cold,
// and the write puts its version in hot IfNotExist. A Delete needs no lock:
// it writes a grave (see Graves). So of two operations on one cold
// version, the second checks after the first committed and fails with
// ErrPrecondition, or deletes what the first wrote. A holder that crashed
// leaves its lock, which others remove once it is older than twice
// MoveTimeout and MaxClockSkew (the pass's recovery removes it too); a
// holder's work under the lock is bounded by MoveTimeout. This costs an
// operation on a cold-only version a write and a delete in hot, and the
// hot-path operations and unconditional writes nothing. The per-process
// key lock only keeps this process's compactor from starting a move that
// would fail. One limit remains against a compactor in another process: an
// IfNotExist write assumes it lands within After of its check.
//
// # Graves
//
// A Delete of a version g in hot does not remove g: it replaces g in hot
// with a grave, an empty object whose metadata key
// zonalblob-tiered-grave names g, on condition of g's generation. A move's
// removal of g from hot is conditional on g too, so exactly one of the two
// takes g. If the Delete does, the pack entry the move made is shadowed by
// the grave, as an older version is by a newer one in hot, and the move,
// whose removal fails, leaves it to the grave. If the move does, the Delete
// finds g gone from hot and buries it where it went, as a version in cold
// only.
// (A Delete that removed g from hot itself could not tell, once g was
// gone, whether a move or another Delete took it, and a reader could find
// the move's copy after the Delete returned.) Such a Delete costs a Stat
// and one conditional write in hot, and its retirement a Stat and a delete
// in hot: where hot is one bucket, a write more than a plain delete (which
// is free); over a quorum one consensus round, as a delete is, since a
// grave is retired as pack moves retire their objects, with the quorum's
// free per-replica deletes (a copy a retirement leaves, or a read settles
// back, reads as no object, which is what the key is).
//
// Every Delete writes a grave, whatever the age of the version (so it reads
// no log and waits for none), a Delete of a version in cold only too: over nothing in hot, on condition
// that hot has nothing (or over a stale copy, on condition of its
// generation). Two operations on one cold version (two Deletes, a Delete
// and a conditional write, which writes hot IfNotExist too) meet at hot's
// condition: one wins, the other looks again. When the catalog says a pack
// may hold the key, and the Delete has no condition, the grave is written
// first and cold is asked after: the version found there is the one the
// grave deleted, provided the catalog includes the log objects committed a
// bury window (BuryWindow: MoveTimeout/4, at most 5s) before the grave,
// since the compactor removes a grave only that long after the tombstone
// that killed what it shadowed; only "nothing there" needs the catalog as
// of the hot-delete delay before. So a packed Delete is one conditional
// write in hot, and the Deletes of a process list the pack log at most
// once per bury window.
//
// A grave reads as no object: a read, Stat or Delete that finds one in hot
// reports NotFound without asking cold, a listing leaves its key out of
// every tier's page (hot's empty objects are Stat'ed to tell graves apart,
// and a directory a listing with a delimiter finds in hot is listed only if
// a key under it is not a grave), and a write replaces it (IfNotExist on
// condition of the grave's generation; IfGenerationMatch never matches
// one). The compactor retires a grave once it is older than GraveHold
// (MoveTimeout, twice MaxClockSkew and the pack log's delay): no move that
// read the deleted version can still run. It kills the versions of the key
// that packs hold (one tombstone for all the graves of a pass), waits the
// bury window, removes the cold object, and then the grave, on condition
// of its generation (Stats.Graves, Stats.GravesRetired). Over a
// quorum the grave is a consensus write like any other, so a Delete whose
// write fails with its outcome unknown may take effect later, as any
// quorum write may; and it is retired only once no replica may still hold
// the version it deleted (Holding.OlderLeft: a replica that missed the
// grave keeps it until repair brings the grave there).
//
// # Packs
//
// A pass gathers the hot objects older than After into packs of at most
// PackMaxObjects objects and about PackMaxBytes: one regional object holding
// a header, an index (each object's key, offset, length, attributes and
// generation, and the older versions of its keys the pack supersedes) and
// the objects' bytes. A pack move (movePack has the steps, and what a crash
// or a user does between them) writes one marker to cold, Stats and reads
// each object in hot, writes the pack, verifies it, deletes each object from
// hot on condition of the generation packed, and deletes the marker: per
// pack, two regional writes, a listing, a Stat and an index read; per
// object, a Stat, a read and the conditional delete in hot.
//
// An object larger than PackMaxBytes is a pack of its own, by the same
// steps, whose bytes are never held: the move reads the object from hot
// once to check it against its Stat and sum it (the index, which holds the
// entry's CRC32C, comes before the data), then again as it writes the
// pack, which is not committed unless those bytes sum the same. Such a
// move costs a second read of the object from hot; Concurrency of them run
// at once, beside the packs of smaller objects, which go one at a time. A
// read of a pack of one costs what a read of any pack costs: when its index
// is not cached, one ranged GET of the pack's first MiB (the header, the
// index, and the start of the data), then the entry's range.
//
// Integrity. The pack header carries the index's CRC32C, and each entry the
// CRC32C of its bytes (packs written before these are still read,
// unverified). The index is checked when it is loaded (every entry names a
// key, a generation and a range inside the pack's data), and every packed
// read verifies what it serves: its length, and the entry's CRC32C when it
// reads the whole entry (at its end, before io.EOF) or part of an entry of up
// to 4 MiB (the whole entry is read); a range of a larger entry is checked
// for length only. A tombstone carries its CRC32C in its metadata. Packs and
// tombstones name, in metadata, the range of keys they hold or kill. A log
// object that does not parse or verify is set aside with a warning and named
// in Stats.Damaged; the catalog serves every other, and reads and Stats of
// keys in the damaged object's range fail with ErrCorrupt naming it (a
// damaged tombstone's kills are unknown, so the versions it killed are not
// served either). A rewrite never copies an entry that does not verify.
// Objects under the log's prefix whose names are not the log's are skipped
// (Stats.Foreign).
//
// A log object deleted behind the compactor's back (by an operator, a
// lifecycle rule, a bug) is told from one the compactor removed by the log's
// inventory: an object in cold, rewritten by each pass that changed the
// log, naming every log object the pass saw with the range of keys it holds
// or kills, and the ones it removes, recorded before it removes them (on
// condition of the inventory's generation, so two passes never lose each
// other's records). A full refresh of the catalog (a new process's first,
// each pass's, and any read that finds a pack gone) lists the log and then
// reads the inventory: an object it names that the listing does not have,
// that no pass removed, and that was named a log window before the listing
// began (a younger one may have been committed, and recorded by another
// process, after the listing passed it), is lost. Reads and Stats of the keys in its
// range fail with ErrCorrupt naming it (a lost tombstone's kills are
// unknown, so no deleted version comes back), it is named in Stats.Damaged
// and logged as an error, and later inventories keep it, until it is put
// back (then it is read like any other) or Store.Forget accepts the loss.
// Forget also removes a damaged object. Not detected: a log object deleted
// before the first pass after its write recorded it, and damage in a range
// of a large entry that no whole read meets.
//
// # The rest of the protocol
//
// How a pack move retires what it packed from a quorum, how compactors in
// several processes elect one another, and the races each step closes are
// described in docs/tiered.md (Protocol).
//
// Deletes and conditional operations in any process are linearizable
// (TestLinearizable checks them from three processes over mem, a quorum
// and a quorum whose replicas go down, with the compactor in one of them).
//
// Whether hot needs finalizing is asked of the hot store with
// blob.CapabilitiesOf, so it is seen through wrappers (the fault wrapper,
// pool.Creator, a quorum) that pass gcsrapid's Finalize on.
//
// Observability: Options.MeterProvider publishes Stats as OpenTelemetry
// metrics (zonalblob.tiered.*: moves, bytes, packs, failures, lag),
// Options.TracerProvider traces each background compaction pass, and a
// tiered:// URL takes them, and Logger, from blob.Open's options. Retirement
// is found on blob.Unobserved(hot), so a hot tier wrapped in a
// blob.TracedStore still retires (see docs/observability.md).
package tiered
