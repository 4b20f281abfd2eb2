package tiered

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for Options.
const (
	DefaultAfter       = 5 * time.Minute
	DefaultConcurrency = 4
	DefaultMoveTimeout = time.Minute
	// DefaultPackMaxObjects and DefaultPackMaxBytes bound a pack. At 1000
	// objects a pack costs one regional write, one Stat and a listing share
	// per thousand objects moved (package cost prices it); 256 MiB keeps a
	// pack move's memory and a rewrite's read modest.
	DefaultPackMaxObjects = 1000
	DefaultPackMaxBytes   = 256 << 20
	// DefaultPackMinLive is the share of a pack's bytes still live below
	// which the pack is rewritten without its dead entries.
	DefaultPackMinLive  = 0.5
	DefaultMaxClockSkew = time.Minute
	// DefaultIndexCacheBytes bounds the pack indexes a Store keeps in
	// memory: about 200 packs of 1000 objects.
	DefaultIndexCacheBytes = 64 << 20
)

// DefaultInterval is the time between the compactor's passes when
// Options.Interval is zero, for the compaction age after (zero:
// DefaultAfter): after/4, clamped to [10ms, 5m]. A pass lists all of hot
// (over a quorum, with a Stat of every tombstone it keeps), so passes more
// frequent than that cost requests and save almost no storage: an object
// stays at most one interval past After.
func DefaultInterval(after time.Duration) time.Duration {
	if after == 0 {
		after = DefaultAfter
	}
	return min(max(after/4, 10*time.Millisecond), 5*time.Minute)
}

// Options configure a tiered Store. The zero value is usable: moves after
// DefaultAfter, DefaultConcurrency moves at once, no rate limit.
type Options struct {
	// After is the age (from the hot object's ModTime) at which an object is
	// moved to cold. Zero means DefaultAfter; use a tiny positive value such
	// as time.Nanosecond to move as soon as possible. Give every process
	// sharing the tiers the same After: a Delete takes a hot object younger
	// than After (less MaxClockSkew and MoveTimeout) to be out of every
	// move's reach.
	After time.Duration
	// Interval is the time between compaction passes. Zero means
	// DefaultInterval(After): After/4, clamped to [10ms, 5m].
	Interval time.Duration
	// Concurrency bounds the moves in flight (default DefaultConcurrency).
	Concurrency int
	// MaxObjectsPerSecond and MaxBytesPerSecond bound the rate of moves; zero
	// is unlimited.
	MaxObjectsPerSecond float64
	MaxBytesPerSecond   float64
	// MoveTimeout bounds one move, or one pack move or rewrite (all of its
	// objects), and is part of the pack log's window (default
	// DefaultMoveTimeout). Give every process sharing the tiers the same
	// value: readers rely on the writers' window and hot-delete delay, both
	// derived from it.
	MoveTimeout time.Duration
	// Manual turns the background compactor off: moves happen only in
	// CompactOnce, which runs under the compactor lease too (taking it for
	// the pass if no other process holds it, and giving it up after).
	Manual bool
	// LeaseDuration is how long the compactor lease lasts from each
	// renewal (see Compactors in docs/tiered.md): default
	// three MaxClockSkews, and at least ten seconds. It must exceed twice
	// MaxClockSkew: its holder stops acting MaxClockSkew before it ends, and
	// a successor starts MaxClockSkew after. A dead holder is replaced
	// within LeaseDuration plus MaxClockSkew and a third of LeaseDuration.
	LeaseDuration time.Duration
	// LeaseStore is where the compactor lease lives (nil: cold, beside the
	// pack log a pass writes; the URL's lease_in=hot gives hot). Every
	// process sharing the tiers must give the same one, and it must enforce
	// conditional writes between them: a cloud bucket, a zonal store and a
	// quorum do; file:// and mem:// do only within one process, so
	// processes sharing a directory as cold must keep the lease in hot.
	// Close does not close it.
	LeaseStore blob.Store
	// Shards splits the keys into that many shards (default 1), each
	// compacted under a compactor lease of its own by whichever process
	// holds it, so that passes run in as many processes at once: when one
	// holder's pass rate is the limit. A process takes shards up to its
	// share of those the processes it sees hold, and asks for one when it
	// has two fewer than another (see Compactors in docs/tiered.md). A pack holds the keys of one shard. Every process
	// sharing the tiers must give the same Shards and ShardOf: shard 0's
	// lease records the number, and a process whose number differs runs no
	// pass (CompactOnce and Stats.LastError say why) until no lease of the
	// number in force has been held for LeaseDuration; it then takes over
	// with its own. At most 256.
	Shards int
	// ShardOf returns the shard of a key, in [0, Shards) (taken modulo
	// Shards otherwise), for instance by a prefix of the key; nil hashes
	// the key (HashShard). It must be a pure function of the key.
	ShardOf func(key string) int
	// PackMaxObjects bounds the objects moved into one pack (default
	// DefaultPackMaxObjects).
	PackMaxObjects int
	// PackMaxBytes bounds a pack's bytes (default DefaultPackMaxBytes),
	// which a move holds in memory; an object larger than it is a pack of
	// its own, streamed from hot to cold (read twice, never held). Such a
	// move's two reads and its write must fit in MoveTimeout, like any
	// move: raise it for objects of many GiB.
	PackMaxBytes int64
	// PackMinLive is the live share of a pack's bytes below which the
	// compactor rewrites it (default DefaultPackMinLive).
	PackMinLive float64
	// IndexCacheBytes bounds the memory of the pack indexes a Store keeps,
	// counted at their size as stored (default DefaultIndexCacheBytes). An
	// index not kept is read from its pack when needed. Beside it, a Store
	// keeps a few bytes for each packed object (a key range and a Bloom
	// filter per pack) and the versions deleted or replaced whose packs
	// were not rewritten yet.
	IndexCacheBytes int64
	// MaxClockSkew bounds how far apart the clocks of processes sharing the
	// tiers are (default DefaultMaxClockSkew): packs and tombstones are
	// named by time, and readers list the pack log from a little before
	// their last listing.
	MaxClockSkew time.Duration
	// Owner names this process in move markers (default: random per Store).
	// A Store recovers the markers of its own Owner at once, and those of
	// others only after 2*MoveTimeout. Give a restarted process the Owner it
	// had (a stable, unique name such as a pod name) so it finishes its
	// crashed moves on its first pass; never give two live processes one Owner.
	Owner string
	// Logger receives a warning when compaction fails, at most one a
	// minute with the failures since the last (nil: slog.Default()).
	Logger *slog.Logger
	// MeterProvider receives the Store's OpenTelemetry metrics (moves,
	// bytes moved, packs, failures, lag: see Stats); nil means otel's
	// global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider receives a span for each pass of the background
	// compactor (nil: otel's global), the parent of the spans of the calls
	// it makes to traced tiers. Spans of the Store's operations come from
	// blob.TracedStore, which blob.Open wraps around every store when given
	// a TracerProvider.
	TracerProvider trace.TracerProvider
}

func newOwner() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// validate reports options no Store can take.
func (o Options) validate() error {
	if o.After < 0 || o.Interval < 0 || o.MaxObjectsPerSecond < 0 || o.MaxBytesPerSecond < 0 ||
		o.PackMaxObjects < 0 || o.PackMaxBytes < 0 || o.PackMinLive < 0 || o.PackMinLive > 1 || o.MaxClockSkew < 0 || o.MoveTimeout < 0 || o.IndexCacheBytes < 0 {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: negative option, or PackMinLive above 1")
	}
	if o.Shards < 0 || o.Shards > maxShards {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: Shards %d: want 1..%d (0: 1)", o.Shards, maxShards)
	}
	if o.LeaseDuration < 0 {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: negative LeaseDuration")
	}
	if skew := cmp.Or(o.MaxClockSkew, DefaultMaxClockSkew); o.LeaseDuration != 0 && o.LeaseDuration <= 2*skew {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: a compactor lease of %v is too short for a clock skew of %v: it must exceed twice the skew", o.LeaseDuration, skew)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.After == 0 {
		o.After = DefaultAfter
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval(o.After)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MoveTimeout <= 0 {
		o.MoveTimeout = DefaultMoveTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PackMaxObjects == 0 {
		o.PackMaxObjects = DefaultPackMaxObjects
	}
	if o.PackMaxBytes <= 0 {
		o.PackMaxBytes = DefaultPackMaxBytes
	}
	if o.PackMinLive == 0 {
		o.PackMinLive = DefaultPackMinLive
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.IndexCacheBytes == 0 {
		o.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if o.Owner == "" {
		o.Owner = newOwner()
	}
	o.Shards = max(o.Shards, 1)
	return o
}
