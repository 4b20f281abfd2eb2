// Package commitlog is an ordered, replicated log of records on zonal
// buckets: the writer appends records into open segment objects on N zonal
// stores (one store is fine) and acknowledges them once W zones hold them;
// readers read from any offset in order, without gaps or duplicates, and only
// what is committed. The protocol is Apache BookKeeper's ledger protocol with
// the buckets as bookies: an ensemble of N, an ack quorum of W, the
// last-add-confirmed carried on later entries, and fencing on recovery.
//
// Guarantee: a record acknowledged by Append is never lost, duplicated or
// moved while at most N-W zones are lost, whatever writers crash or take
// over; a reader never returns a record before it is committed. An Append
// that fails says whether its records may be in the log all the same: its
// error wraps ErrUncertain when they had been handed to the zones (or the
// caller's context ended while the writer still held them); a caller that
// must know reopens the log and reads, and finds each such record at most
// once, at the offset Append returned. Without ErrUncertain they are not in
// the log.
//
// # Layout
//
// Log name lives under the prefix name/ of every store:
//
//	name/epoch/<epoch>           claimed with IfNotExist on a majority by each Open
//	name/epoch/000...0           the intact marker (epoch 0, never claimed)
//	name/seg/<epoch>-<first>     a segment: frames appended by its writer
//	                             (on the regional store too, once moved: tier.go)
//	name/seg/start-<offset>      the start a truncation recorded (empty)
//
// The intact marker says a zone holds everything of the log it was given.
// The first Open writes it on every zone that answers. A zone without it
// (replaced by an empty bucket, emptied, or down when the log began) is
// amnesic: its answers are used, but the quorums that read absence (the
// epochs at Open, the segments of the chain, the records of the tip a
// recovery fences) do not count it, since a record acknowledged on it and
// one other zone may be gone from it. Open reads each zone's marker with
// its epochs and again after listing and after fencing it, so that a zone
// replaced in between counts as amnesic. Open then needs N-W+1 intact zones
// (and a majority for the epoch); with fewer it fails with
// ErrNotEnoughZones naming the amnesic zones rather than recover a log
// that lacks acknowledged records. A writer's repair gives the marker back
// once the zone holds again every record it could have held (see Repair).
//
// A segment is a sequence of frames (see frame.go): a header naming the
// segment and the one it follows, data frames of records (each with its first
// offset and the last-add-confirmed, LAC, when it was cut), and seal and fence
// frames. Appends are conditional, so that a writer that was fenced fails:
//
//   - blob.AppendStreamer (GCS appendable objects): one open stream per
//     segment, each append a write and a flush; a takeover fences the holder.
//   - blob.Appender with IfSizeMatch (S3 Express WriteOffsetBytes; Azure
//     Premium block blobs, a staged block committed under the blob's ETag):
//     each append is refused if the segment grew.
//   - any other Store: a segment is a directory of slot objects name/seg/
//     <epoch>-<first>/<n>, each created with IfNotExist; two writers of slot
//     n have one winner. This costs one object per append.
//
// Each zone uses the first of these its store supports, so zones of
// different clouds make one log; slots number frames where the others
// address bytes, so a log whose zones cannot all append is refused (unless
// Options.Slots puts every zone on slots).
//
// # Writing
//
// Concurrent Append calls share frames (group commit): each zone sends, in
// one append, every frame it has not sent yet, and an idle zone cuts a frame
// of the records waiting. A frame is acknowledged when W zones hold it; a slow
// zone catches up with one larger append and never delays the others. An
// idle writer publishes the LAC in a frame without records after LACDelay.
//
// A segment holds at most MaxSegmentAppends frames (each zone takes at most
// one append per frame, and S3 Express takes 10,000 appends per object) and
// about MaxSegmentBytes. Once it is a quarter full the writer fixes its last
// offset, leaving room for half the frames left at the records per frame
// seen so far (at half full, 100-byte records at 25,000 a second reached
// the end before the create was done: every roll waited), and creates the
// next segment, which starts after it, in the
// background: on W zones, then checking that no newer epoch exists. The roll, once every
// frame up to the planned end is acknowledged and a seal frame carrying the
// LAC is, is then a switch and not a create. A store that refuses an append
// as one too many for the object (S3 TooManyParts) takes no more appends to
// that segment; if fewer than W zones can, the segment is cut short: the
// appends in flight finish, it ends after what W zones hold, the rest is
// sent again, at the same offsets, in a segment that runs up to the planned
// end, after which the one created ahead follows; the same happens when the
// frames run out before the planned end (the load dropped).
//
// # Fencing and recovery
//
// Open claims epoch e+1 (above any listed) with IfNotExist on a majority, so
// two writers never share an epoch. It lists the segments on N-W+1 zones and
// recovers the last one as BookKeeper recovers a ledger: it appends a fence
// frame at the end of the segment on every zone it reaches (creating the
// segment there with only its header and the fence if missing), which makes
// the old writer's next conditional append there fail. With N-W+1 zones
// fenced no W zones remain on which the old writer could complete an append,
// and every record it did acknowledge is on at least one fenced zone; the
// recovery keeps every record found on a fenced zone, copies those records to
// zones that lack them until W hold them, and starts its own segment after
// the last. The old writer's next Append fails with ErrFenced. A segment that
// a fenced writer created after the recovery listed is never used: its writer
// checks the epochs after creating a segment, and a segment created before
// the new epoch existed is seen by the recovery's listing. A last segment
// with no record that follows one of the same epoch may have been created
// ahead of a roll that never came, so its first offset says nothing of where
// the records end: the recovery fences it and recovers the one before
// instead, and names that one as its predecessor. A segment at its store's
// append limit is fenced as it is.
//
// # Reading
//
// A Reader lists the segments on N-W+1 zones and follows the chain back from
// the newest one (the first segment of each epoch names the segment its
// writer recovered, which is how segments of fenced writers are left out).
// A record is committed, and served, once the reader knows W zones hold it:
// a LAC read in any frame covers it (the seal frame carries the segment's
// last; the next segment's frames carry it too), or the reader itself read
// it from W zones (a zone holds a prefix of the segment's frames, so every
// record up to the last it showed), or a newer writer's segment follows on
// the chain (its recovery copied every record below its first offset to W
// zones before starting it). A record of a segment at or past the next
// segment's first offset is never served from it. The reader reads a
// segment from the zone that has answered fastest and falls back to the
// others when that zone lacks records known to exist or fails; at the tip it
// reads the W zones that hold the most at once every PollInterval, in the
// background, so that one slow zone delays neither what it learns nor when;
// a reader that finds nothing new backs off up to MaxPollInterval, since
// every read of the tip is a billed request.
//
// # Moving to the regional store
//
// With Options.Regional, sealed segments move there after MoveAfter, and the
// zonal copies become short markers that still fence; see tier.go.
//
// # Truncation
//
// Log.TruncateBefore(ctx, offset), once the application has checkpointed,
// deletes every segment whose records are all below offset and committed
// (zonal copies or markers on every zone, then regional copies), with the
// segments created ahead and never used below it, and the epoch claims
// below the writer's; it returns the start, the first offset kept (segments
// are whole: at most offset, unless an earlier truncation cut off part way
// recorded a higher start on some zone, which it then finishes). Readers
// below the start get ErrTruncated; a writer that a newer one overtook
// while it truncated returns no start (ErrFenced), as the newer one's
// repair may have brought a segment back.
// Before it deletes anything a truncation records its start on every zone
// (name/seg/start-<offset>, which every listing of the segments reads at no
// extra request), and every chain drops the segments below the highest
// start a zone records: a copy of a deleted segment that lands late (a
// create or repair write still on the wire, an older writer's repair) is
// garbage, never the log's first segment, and the next truncation deletes
// it. A repair gives a replaced zone the start before its marker. A
// truncation cut off part way leaves every record from the start on
// readable, and the next call, which lists every zone and the regional store
// again, finishes it. What an idle, truncated log keeps is its tip: the
// segment being written and the one created ahead of its roll on each zone
// (a header frame each, plus the records since the start), and one epoch
// claim and the start (empty objects) per zone; it makes no request while idle but
// those of the repair passes, two listings of each zone a pass
// (TestIdleTruncatedLog counts them; cost.IdleLog prices them).
//
// Options.RetainFor and RetainBytes truncate the log at each repair pass
// (retain.go): walking the sealed, committed segments from the newest, the
// first older than RetainFor (its last write on the store that holds it:
// the regional copy once moved), or that brings the bytes kept over
// RetainBytes, goes with every older one, through TruncateBefore.
//
// # Repair
//
// Every RepairInterval the writer lists the segments on each zone and gives
// a zone that lacks a sealed, committed segment (a zone replaced by an empty
// bucket, or one that lost objects or fell behind) the records a zone that
// holds them all has: a whole copy where it has none, the missing records
// appended where it has part of one, the marker where the segment moved.
// It waits an interval after first seeing a segment sealed, so the writer's
// own appends to it are over; copies are paced at RepairBytesPerSecond; a
// copy found whole is not read again (a listing still shows if it goes).
// A zone that lost the writer's epoch claim gets it back: an Open that read
// the epochs of that zone and of one the claim never reached would
// otherwise claim the same epoch again. An amnesic zone gets its intact
// marker back once the writer has rolled past the segment it was writing
// when the repair found the zone so, and every segment of the chain up to
// that one is whole there. A recovered tip, whose records no frame says are
// committed, gets a frame that does. Stats.Missing is the copies (and
// claims) lacking at the last pass, the durability lost until they are
// back; Stats.Unchecked the copies a pass could not list or read, whose
// durability is unknown; Stats.Repaired counts the copies written. Only the
// writer repairs, and only segments on its chain. The simulation replaces
// zones by empty buckets while it truncates and retains; a replaced zone
// counts as a failed one until a pass finds nothing missing or unchecked.
//
// # Striped logs
//
// A log writes each zone's copy of a segment through one stream, whose
// bandwidth caps it. OpenStriped spreads records over K ordinary logs, its
// stripes (name/stripe/<i>), so that each zone writes K segments at once:
// record g is record g/K of stripe g%K. An Append is acknowledged once every
// record up to its last is committed in its stripe; a takeover opens every
// stripe and fills the gaps a crashed writer left with filler records,
// which readers skip (see striped.go). One log at 100 B, four stripes at
// 4 KiB and above (docs/commitlog.md).
package commitlog
