// Package tiered puts a hot store (a zonal bucket, or a quorum of them) in
// front of a cold one (a regional bucket): writes land hot, and a background
// compactor moves objects to cold once they are older than After, many at a
// time into one regional pack with an index (see Packs), or, with packs
// turned off or for objects larger than a pack, each to a cold object of its
// own name (see A move). Zonal storage costs about five times as much per
// GiB, and a quorum keeps it two or three times, so data should stay hot for
// minutes, not months.
//
//	s, err := tiered.New(hot, cold, tiered.Options{After: 5 * time.Minute})
//	s, err := blob.Open(ctx, "tiered://?hot=URL&cold=URL&after=5m")
//
// URL parameters (hot and cold are URLs of registered schemes, query-escaped;
// unknown parameters are an error): hot, cold, after (0 moves at once),
// interval, concurrency, max_objects_per_second, max_bytes_per_second,
// move_timeout, manual, pack_max_objects (-1 turns packs off),
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
// removes a version written after it. An
// object keeps its
// generation when it moves (the cold copy records it in metadata key
// zonalblob-tiered-generation, hidden from users), so a generation read
// before a move still matches after it. Close stops the compactor, waits for
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
// write checks cold, then writes to hot IfNotExist. An operation on a
// version that lives in cold only (moved, packed or not) takes the key's
// lock in hot first: an object of a reserved name, written IfNotExist and
// deleted on condition of its generation when the operation ends. Under
// it, hot is asked again (a version there is acted on in hot instead) and
// then cold, and the operation commits: a conditional write puts its
// version in hot IfNotExist, a Delete (in a Store that does not pack; one
// that packs writes a grave instead, without the lock: see Graves) removes
// the cold object. So of two operations on one cold version, the second checks after
// the first committed and fails with ErrPrecondition, or deletes what the
// first wrote. A Delete that finds the version it saw in hot moved out
// meanwhile deletes it from cold in the same way. A holder that crashed
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
// A Delete of a version g in hot that a move may be taking (g is older
// than After, less MaxClockSkew and MoveTimeout) does not remove g: it
// replaces g in hot with a grave, an empty object whose metadata key
// zonalblob-tiered-grave names g, on condition of g's generation. A move's
// removal of g from hot is conditional on g too, so exactly one of the two
// takes g. If the Delete does, every copy the move made (a cold object, a
// pack entry) is shadowed by the grave, as an older version is by a newer
// one in hot, and the move, whose removal fails, removes its cold copy or
// leaves its pack entry to the grave. If the move does, the Delete finds g
// gone from hot and deletes it where it went, as a version in cold only.
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
// A Store that packs writes a grave for every Delete, whatever the age of
// the version (a Delete then reads no log and waits for none), and for a
// Delete of a version in cold only too: over nothing in hot, on condition
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
// grave keeps it until repair brings the grave there). Without packs, a Delete of a version too young for
// any move removes it from hot, after the cold object it shadows.
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
// # Retiring from a quorum
//
// Over a quorum (package quorum) a conditional delete is a consensus round
// writing a tombstone on every replica, as dear as the write it removes. So
// a pack move over a hot store that is a blob.Retirer (Capabilities.Retire:
// a quorum) surveys each object on every replica after its marker
// (Retirer.Survey: the version a majority holds, and each replica's copy),
// reads it from one replica, and once the pack is committed retires it
// (Retirer.Retire): each replica's copy of that
// version, or of an older one, is deleted on condition of its generation.
// Deletes are free: per object, a Stat of the fastest replica, two surveys
// (this one and the confirming one below) and one read, and no write.
//
// A retirement is not atomic: until every copy is gone the quorum may show
// the version again (a majority read finding it on one replica settles it
// back) or not. So a Store over a quorum never serves a hot version at or
// below one a pack holds (staleHot): reads, Stats, listings, Deletes and
// conditional writes ask the packs instead, which say whether it is still
// the key's version or was killed. Versions younger than After (less twice
// MaxClockSkew and MoveTimeout) cannot have been packed and are served as
// they are, without looking. That rule needs the pack log to remember a
// retired version for as long as a copy may remain: the move marks its
// marker packed before it retires anything and leaves it in place; a pack
// holding a version a marker names is not rewritten, and a tombstone
// killing one is not removed, while the marker stays; and a later pass,
// begun once operations in flight during the retirement have landed
// (Retirer.InFlightBound: a read settling the version may write a
// copy back), retires the marker's versions again and removes the marker
// only if that found no copy on any replica. A replica that is down keeps
// the marker until it answers. A version issued less than InFlightBound
// (and MaxClockSkew) ago is not retired by its move but by that later
// pass: an operation still retrying learns from the replicas' chain of
// versions whether it took effect, and a retirement deletes the chain (with
// After longer than that, as in any deployment, moves retire at once).
// Every quorum client over the same replicas
// must use the same StragglerTimeout (which sets InFlightBound), as every
// process sharing the tiers uses the same After and MoveTimeout. A Delete that finds a killed version's copy
// in hot removes it with a Delete of its own (a consensus round, rare:
// only a delete racing a move finds one).
//
// Packs and tombstones are named in cold by the time they were begun (the
// pack log); a Store's catalog holds what it knows of them. Every change of
// what packs serve stays unseen for hotDeleteDelay (MoveTimeout/10, at most
// 200ms) after its log object is committed: a pack move deletes its objects
// from hot only that long after the pack, and a Delete that writes a
// tombstone removes the key from hot, or returns, only that long after the
// tombstone. So an answer hot gives at time t (a miss, a listing) is
// completed by a catalog that includes every log object committed before
// t minus the delay: a catalog listed since then is used as it is, and an
// older one is brought up to date with one listing of the log from a little
// before its last one (MoveTimeout twice, and MaxClockSkew: a pack is
// committed within half that of its name's time, or its objects stay in
// hot). Reads in quick succession share a listing. A read of a key a cached
// index holds (a key moved out of hot, likely to miss there) reads the
// pack's range, and lists the log if its last listing is older than half
// the delay, at the same time as it asks hot; it keeps the range read if
// the entry is still the one served: a pack's bytes never change. Stat,
// List, attributes and generations are as for any cold object (List merges
// the packed keys; they list with an empty Generation, like cold's).
//
// Deletes and overwrites of packed objects kill them: a Delete writes a
// tombstone naming the version, and a move of a newer version records the
// older ones as superseded in its pack. A Store writes one tombstone at a
// time, and the kills of the Deletes, moves and rewrites that call for one
// while a tombstone is being written share the next (up to 10,000 kills
// each): a lone Delete's is written at once, and under load a tombstone,
// one regional write, carries the deletes of a regional write's latency.
// Each caller returns once the tombstone carrying its kills is committed
// (and the delay after), or with the error of its write; a caller that
// gives up leaves that write to the others. A Delete of a version in hot that a
// pack move may be packing (a move's marker names the key, or the version is
// old enough to move) kills it in the log before it removes it from hot, so
// a pack the move commits after the removal never serves it. Kills are by
// generation, so they reach every copy. A pack whose live share of bytes
// falls below PackMinLive (and that is older than the log window) is
// rewritten: its live entries, and the kills it carries that still apply to
// another pack, go into a new pack, and only then is it deleted; a reader
// that finds it gone relists the log. A tombstone is removed once no pack
// holds any version it kills, four windows after it was written.
//
// The catalog keeps, of each pack, its key range and a Bloom filter of its
// keys (about 10 bits an object), and the indexes themselves in a cache of
// at most IndexCacheBytes (64 MiB by default, counted as stored), reading
// an index back from its pack when a lookup, listing or rewrite needs one
// the cache let go. A lookup reads only the packs whose filter may hold the
// key; a listing page reads the packs in order of their first key and stops
// at the first that starts after the page (with keys that grow, as
// blob.NewName's do, the packs the page shows); maintenance recounts a
// pack's live bytes only when a kill or a copy touched one of its keys.
// Tombstones and kills stay in memory until no pack holds their versions.
// A process's first read lists the whole log (and reads each index once);
// packs removed by rewrites stay in the catalog until a full listing (each
// pass's maintenance, a read that finds its pack gone, or a catalog's first
// listing after two log windows without one: a tombstone may have been
// written and removed meanwhile, unlisted, after the packs whose entries it
// killed).
//
// # Compactors
//
// Any number of processes may open the same pair of tiers, each with its
// compactor on: they elect one holder of the compactor lease, an object in
// cold written only on condition of the generation its writer saw, with a
// holder, an epoch (one more for each new holder) and an expiry. Only the
// holder runs passes; it renews the lease every third of
// Options.LeaseDuration (default three MaxClockSkews, at least ten seconds),
// and Close gives it up so that another process takes it at once. A
// holder that dies is replaced once its lease has ended by every clock:
// within LeaseDuration plus MaxClockSkew of its last renewal, and a third
// of LeaseDuration more for the others' next look at it. The holder
// acts only until MaxClockSkew before the expiry, and a successor only
// from MaxClockSkew after it, so with clocks within MaxClockSkew of each
// other their passes never overlap in real time (the lease is refused if
// not longer than twice MaxClockSkew). Every write a pass makes (markers,
// packs, log objects, tombstones, inventory, deletes and retirements in
// hot) first checks that the lease is still held under the pass's epoch,
// and the pass's context ends when it is not, so a holder stopped past
// its lease (a paused process) has each later write of its pass refused
// when it resumes; only a write already sent when it stopped can land,
// within the MaxClockSkew of margin or under the protocols' own
// conditions (markers IfNotExist, hot deletes on a generation, the
// inventory on its generation). CompactOnce runs under the lease too: a
// manual Store takes it for the pass and gives it up after, and one whose
// lease another process holds runs nothing (PassResult.Err names the
// holder). Stats.Lease says who holds it, since when, and this Store's
// acquisitions, losses and skipped passes. The lease's store must enforce
// conditional writes between the processes: a directory (file://) does so
// only within one, so processes sharing one as cold keep the lease in hot
// (lease_in=hot, Options.LeaseStore).
//
// Two compactors must never run passes at once: pack markers do not
// exclude each other, and with packs off, histories of two compactors and
// conditional writes in other processes were found not linearizable. The
// lease is what keeps them apart; TestLinearizable checks histories with
// three compacting processes, and TestCompactorLease a holder paused past
// its lease.
//
// When one holder's pass rate is the limit, Options.Shards (shards=) splits
// the keys into shards, by HashShard or Options.ShardOf, each compacted
// under a lease of its own by whichever process holds it: a pass moves,
// packs and recovers the keys of its shard only, every write it makes is
// fenced by that shard's epoch, and a pack never holds keys of two shards.
// So two compactors never run passes of one shard at once, and passes of
// different shards never write one key, marker or pack. What they share is
// the pack log, and it stays correct with several writers: packs and
// tombstones are new objects, of names no other process chooses, and a
// kill applies to a version in any pack, whoever wrote it; the log's
// maintenance (pack rewrites, the removal of tombstones, the inventory,
// which is written on condition of its generation) and the removal of
// abandoned locks are shard 0's alone, so they have one writer at a time
// as before. Each process holds shards up to its share of the processes it
// sees in the leases, and one short of two or more asks the process with
// the most for one (its name in that lease): the holder releases it to it
// once its pass has ended. A process that dies or closes leaves its shards
// to the others, as with one lease. Shard 0's lease records the number of
// shards, and a process whose Shards differs runs no pass (its CompactOnce
// and Stats.LastError say why) until none of the others' leases has been
// held for LeaseDuration; it then takes over with its own. Stats.Lease.Shards
// says who holds each shard and since when, and the lease metrics carry the
// shard (and holder) as attributes. TestShardedCompaction checks four
// processes over four shards, TestShardHolderPaused a shard's holder paused
// past its lease, TestShardsDiffer processes that disagree, and
// TestLinearizable histories of three compactors over two shards. Each
// holder lists all of hot to find its shard's objects (a shard is a set of
// keys, not a range).
//
// # A move (each object on its own)
//
// For each hot object older than After, at most Concurrency at a time and
// within the rate limits, holding the key's lock in this process:
//
//  1. Finalize it, if hot is a blob.Finalizer (gcsrapid leaves objects unfinalized).
//  2. Stat hot: generation g1.
//  3. Write a marker (hot, IfNotExist) naming the key and g1, and Stat hot
//     again: it must still be g1.
//  4. Copy to cold, with hot's attributes, its MD5 as a precondition of the
//     copy, and g1 in metadata.
//  5. Verify: Stat cold (size, MD5, g1); its generation is c1.
//  6. Delete hot if it is still g1.
//  7. Delete the marker.
//
// A crash between any two steps leaves the object readable: until step 6 it
// is in hot, and cold was written before. A rerun finishes the move: the
// marker is recovered at the start of the next pass (at once by a Store with
// the same Owner, after 2*MoveTimeout by any other): if hot still has the
// copy's generation the move is simply made again; if hot is gone and no one
// marked the marker, step 6 happened and the copy is the object; if hot has
// another generation, the copy is stale and removed. Over a quorum, step 6
// may fail with its tombstone on a minority of replicas, and a later read
// that hears one of them finishes it: recovery resolves the key
// (quorum.Store.Resolve) before its Stat, so that the delete has taken
// effect or never will.
//
// # Races, and how each is closed
//
//   - Reader during a move: hot is read first, and cold is written (4) before
//     hot is deleted (6), so a reader always finds the object. List lists hot
//     before cold for the same reason.
//   - Overwrite during a move: the hot delete is conditional on g1 (6), so a
//     newer version in hot is never deleted; it shadows the copy, which is
//     removed (conditional on c1, so a newer copy is never touched). An
//     overwrite between steps 2 and 4 is caught by the MD5 precondition of
//     the copy, or by step 6.
//   - Delete in this process: Delete takes the key's lock, so it runs before
//     or after a move, never inside one.
//   - Delete in another process: of a version a move may be taking, a
//     grave decides between them (see Graves). Of a younger one (no move
//     takes it: a move checks the age on its own clock, within
//     MaxClockSkew), Delete removes cold, then hot at the generation it saw
//     (Stat, then a conditional delete), then, if it deleted generation g of
//     hot, marks any marker naming g as deleted, for a move that misjudged
//     the age. A move whose step 6 finds hot gone or changed removes its
//     copy. A move that dies after its copy landed leaves its marker, and
//     recovery removes a copy whose marker is marked deleted or whose
//     version hot no longer holds.
//   - Conditional writes (IfNotExist, IfGenerationMatch): against each
//     other and against Deletes, in any process, see Conditional
//     operations. Against a move: a version in hot is written on condition
//     of its generation there, so a move that took it first makes the write
//     look again, and find it in cold; a version in cold only cannot move
//     again. An IfNotExist write's object absent from hot when the check
//     began would have to be created and moved within one write to fool
//     it, and objects younger than After are never moved.
//   - Two compactors: the compactor lease runs one at a time (one per
//     shard: see Compactors); a marker is written IfNotExist besides, so
//     two never move one key at once. Owner must differ between live
//     processes.
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
