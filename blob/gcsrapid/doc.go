// Package gcsrapid is the GCS Rapid (zonal bucket) driver: a blob.Store over the
// gRPC client of cloud.google.com/go/storage with appendable objects, writes
// that end in a flush instead of a finalize, and a pool of pre-created writers.
//
// Why: on GCS a create+write+finalize costs three round trips, two of them
// metadata operations (80-100 ms in all). On a Rapid bucket an object can be
// created ahead of need, flushed empty so it exists, and later receive its
// bytes with one flush (~1-3 ms). So:
//
//   - Put(key) creates an appendable object and flushes it: one metadata
//     operation instead of two. It is never finalized on the critical path;
//     Finalize seals an object when a caller (or the tiered compactor) wants.
//   - Create(prefix) is served from a pool of pre-created, pre-flushed writers
//     (package blob/pool): one data round trip, no metadata operation.
//
// URL: gcsrapid://BUCKET?param=value&...
//
//	endpoint          host:port of an emulator (plaintext, no auth); default Google
//	leftover_age      a write of more than one message not committed this long after it
//	                  created its object is a leftover that conditional creates remove (default 1h)
//	connect_timeout   bound of Open's first call, the bucket's metadata (default 10s): an
//	                  endpoint that does not answer fails the open naming it, and a missing
//	                  bucket fails it with blob.ErrBucketNotFound
//	pool_size         capacity of each Create pool (default 64; 0 turns pooling off)
//	pool_min_idle     spares kept when idle (default 2)
//	load_concurrency  background creates at once per pool (default 16)
//	max_item_age      pooled objects older than this are deleted, not used (default 1m)
//	write_timeout     a handed-out writer must Close within this (default 30s)
//	grace_window      the orphan reconciler's grace window (default 10m)
//	clock_skew        largest clock difference between processes and the service
//	                  (default 30s, or half of what grace_window leaves if less)
//	sweep_interval    how often unwritten pooled objects left by crashed processes
//	                  are swept (default half their window, at most 1m; <0: never)
//	sweep_rate        deletes per second the sweep makes at most (default 50)
//	max_pools         prefixes with a pool; Creates under further prefixes create inline (default 16)
//	grpc_conn_pool    gRPC connections (default: enough for pool_size x max_pools open
//	                  writer streams at max_streams_per_conn; a smaller value is refused)
//	max_streams_per_conn  the front end's cap on streams per connection (default 100)
//	retries           retries of an idempotent call after its first attempt, with jittered
//	                  backoff; 0 = none (default 2; a write that could apply twice is never retried)
//	hierarchical      apply hierarchical namespace naming rules to keys before I/O (default false)
//	max_buffer        bytes a writer buffers before it streams, with an optional KiB, MiB
//	                  or GiB suffix (default 16MiB)
//	pipeline          drive append streams (blob.AppendStreamer) directly on BidiWriteObject,
//	                  several flushes in flight on one stream, each acknowledged by its reply's
//	                  persisted size (default true; false: the client library's Writer, whose
//	                  Flush waits for its reply before the next Write); the streams share
//	                  connections of their own, max_streams_per_conn each
//
// Options has the same settings under Go names; its pool settings are the
// embedded pool.CreatorOptions (pool_size is Capacity, pool_min_idle is
// MinIdle). A zero field means its default, and a negative Capacity or
// Retries means none, as 0 does in a URL.
//
// Safety: max_item_age + write_timeout + clock_skew must be below
// grace_window, or a pre-created object could be reclaimed as an orphan
// between its write and its commit; Open refuses such a configuration. Every
// pooling Store sweeps the prefixes it pools, in the background: a prewarmed
// object that was never written (its process crashed) is deleted, on
// condition of its generation, once it is older than max_item_age +
// write_timeout + clock_skew.
//
// At open, the Store reads the bucket's metadata once and logs whether its
// client uses direct connectivity (DirectPath), which the published latencies
// need; Stats.Connectivity says the same.
//
// Guarantees and limits: writes up to max_buffer are buffered and reach the
// bucket in one flush at Close (canceled before Close: nothing written);
// a larger write streams once it passes max_buffer.
//
// Whole objects only. On a Rapid bucket the message that creates an
// appendable object makes its new generation live at once (an overwrite's
// old value is gone from then on), and a message carries at most 2 MiB. A
// write of at most 2 MiB sends its bytes in that first message, so it appears
// with all of them. A larger one creates its object declaring "?" in its
// metadata and commits at Close by declaring the size it wrote (one metadata
// operation); Stat, List and reads hide an object that declares "?" or does
// not yet hold its declared size: readers see the key absent (an overwritten
// value included) until the write is whole, never a prefix. A pooled write
// over 2 MiB replaces its prewarmed object with one that declares "?" (one
// create), and so does an append stream's first data over 2 MiB, until
// CreateAppendStream returns (its later appends show as each is flushed).
// When a reported size is below the declared one (it may be out of
// date), one byte read at the declared end settles it. Meanwhile the key is
// taken: a conditional create of it fails with ErrExists.
//
// Leftovers. The object of a large write whose process died before it
// committed stays hidden, and would hold its key against conditional creates
// for ever. Once it is older than leftover_age (default 1h), a conditional
// create that meets it deletes it, on condition of its generation and
// metageneration, and goes on (a streamed create, whose first bytes are
// gone, fails with an error that is not ErrExists, and its caller may write
// again). A commit changes the metageneration, so a write that committed is
// never removed; a write still uncommitted after leftover_age may be failed.
// Pooled objects a crashed process left unwritten are swept (sweep_interval).
// Nothing else lists the bucket for leftovers: one that no create meets stays
// hidden, at the price of its bytes, until the key is written or deleted.
//
// Failed writes. A write stream can fail after its object exists, before or
// after the service's reply that names its generation, with bytes it sent
// not persisted. A buffered write then finishes its own object rather than
// fail: it knows the object by its reply's generation, its prewarm's, or a
// random identifier every write puts in its object's metadata (hidden from
// Attributes, like the declared size and the prewarm mark), takes it over,
// and sends what the takeover's persisted size says is missing, within
// retries (once with retries=0). So a conditional write never reports its
// own object as ErrExists, and a failed unconditional overwrite does not
// leave an empty or partial object in place of the value it replaced. A write
// that cannot finish (and a streamed or canceled one) deletes its object, on
// condition of its generation, before Close returns its error: the key is then
// absent, since the value an overwrite replaced is not kept by the service.
// Only if that delete fails too may an object of the failed write remain
// (hidden if it is not whole). Durable sizes are the persisted sizes of the
// service's write replies, not the offsets the client aimed at: a flush that
// persisted less than was written fails the write.
//
// Reads: a range read or a ReaderAt whose stream the service ends (it may at
// any time) opens another on the same generation and goes on from where it
// got, up to retries streams in a row that ended without progress.
// OpenReaderAt reads the object's metadata beside its stream (one metadata
// read, no added latency) to apply the hiding above.
//
// Objects from Create (and Prewarm) exist on the service, empty, before their write, but
// not for readers: prewarmed objects carry a metadata mark, and List, Stat and
// reads hide a marked object that holds no committed write. A size of zero,
// which may be out of date for an unfinalized object, is checked by reading
// up to 64 KiB of the object, which also gives Stat, List and a reader the
// true size of a small record. A pooled write of zero bytes clears the mark,
// one metadata operation. The price of hiding: a listing makes one such read
// for each spare it meets under the prefix (every pooling process keeps
// some), so a consumer that polls a pooled prefix often pays a read per spare
// per poll (Stats.VisibilityProbes counts them). Reads go to the true end of
// an object whatever size was reported. A canceled Create deletes its object
// in the background; Close deletes every object its pools made.
// A writer is written once: Write after Close, a second Close, or concurrent
// use fail with an error.
package gcsrapid
