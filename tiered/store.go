package tiered

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// generationKey is the metadata key under which a cold copy records the hot
// generation it was moved from, so an object keeps its generation across a
// move and IfGenerationMatch taken before the move still holds after it.
const generationKey = "zonalblob-tiered-generation"

// coldGenerationPrefix marks the generation of a cold object that was not put
// there by a compactor (it has no recorded hot generation).
const coldGenerationPrefix = "cold:"

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
	// renewal (see Compactors in the package documentation): default
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
	// has two fewer than another (see Compactors in the package
	// documentation). A pack holds the keys of one shard. Every process
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
	// DefaultPackMaxObjects); negative moves every object on its own, to a
	// cold object of its own name. Do not turn packs off over a cold store
	// that holds packs: their objects would no longer be found.
	PackMaxObjects int
	// PackMaxBytes bounds a pack's bytes (default DefaultPackMaxBytes); an
	// object larger than it is moved on its own.
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

// validate reports options no Store can take.
func (o Options) validate() error {
	if o.After < 0 || o.Interval < 0 || o.MaxObjectsPerSecond < 0 || o.MaxBytesPerSecond < 0 ||
		o.PackMaxBytes < 0 || o.PackMinLive < 0 || o.PackMinLive > 1 || o.MaxClockSkew < 0 || o.MoveTimeout < 0 || o.IndexCacheBytes < 0 {
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

// Store is a hot Store in front of a cold one with a background compactor
// that moves objects from hot to cold. See the package documentation for
// its guarantees.
type Store struct {
	hot, cold blob.Store
	opts      Options
	ret       blob.Retirer // hot, if it can retire versions (a quorum)

	locks keyLocks
	cat   *catalog
	// written is what this Store wrote to hot lately (see deleteWritten).
	written written
	// logMu and lastLog keep this process's pack log names strictly
	// increasing: the newest pack of a key wins by name, so two names
	// chosen at one clock reading must not be ordered by their random tail.
	logMu   sync.Mutex
	lastLog time.Time
	life    driver.Lifecycle
	cancel  context.CancelFunc
	done    chan struct{}
	limiter *pacer

	stats statsCounters
	tombs *tombstoneBatcher

	batchMu sync.Mutex
	batches map[string]bool // markers of this Store's pack moves in flight

	metrics *metrics
	tracer  trace.Tracer

	leases    []*lease      // by shard
	leaseDone chan struct{} // closed when the lease keeper has stopped
}

var (
	_ blob.Store   = (*Store)(nil)
	_ blob.Creator = (*Store)(nil)
)

// New returns a Store over hot and cold and, unless opts.Manual, starts its
// compactor. The Store owns both: Close closes them.
func New(hot, cold blob.Store, opts Options) (*Store, error) {
	if hot == nil || cold == nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: hot and cold stores are required")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{
		hot: hot, cold: cold, opts: opts,
		cancel:  cancel,
		done:    make(chan struct{}),
		limiter: newPacer(opts.MaxObjectsPerSecond, opts.MaxBytesPerSecond),
		batches: map[string]bool{},
	}
	// Retirement is quorum's own method, which no wrapper forwards: look
	// behind the tracing ones.
	if r, ok := blob.Unobserved(hot).(blob.Retirer); ok && blob.CapabilitiesOf(hot).Retire {
		s.ret = r
	}
	s.cat = newCatalog(s)
	s.leases = newLeases(s)
	s.tombs = newTombstoneBatcher(opts.MoveTimeout, maxTombstoneKills, s.commitTombstone)
	m, err := newMetrics(s, opts.MeterProvider)
	if err != nil {
		cancel()
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("tiered: metrics: %w", err)}
	}
	s.metrics, s.tracer = m, newTracer(opts.TracerProvider)
	s.leaseDone = make(chan struct{})
	if opts.Manual {
		close(s.done)
		close(s.leaseDone)
	} else {
		go s.keepLease(ctx, s.leaseDone)
		go s.run(ctx)
	}
	return s, nil
}

// Hot and Cold return the tiers, for tools that inspect them.
func (s *Store) Hot() blob.Store  { return s.hot }
func (s *Store) Cold() blob.Store { return s.cold }

func (s *Store) check(op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	if isMarker(key) {
		return blob.Errorf(op, key, blob.ErrInvalidKey, "keys starting with U+10FFFD U+10FFFD are reserved for move markers")
	}
	return nil
}

// NewRangeReader reads from hot and, if hot does not have key, from cold.
// Hot is asked first, and cold only once hot has answered: cold is written
// before hot is deleted, so a reader that misses in hot after a move finds
// the object in cold, and a cold read that begins after hot's miss sees every
// move that deleted from hot before it. (Asking cold at the same time as hot
// would not: a cold answer given before a newer version's move completed, and
// a hot miss after it, would serve the older version.)
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.check(driver.OpRead, key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	var ahead *readAhead
	if s.packing() {
		ahead = s.startReadAhead(ctx, key, offset, length)
	}
	r, err := s.readOnce(ctx, key, offset, length, ahead)
	if !errors.Is(err, blob.ErrNotFound) {
		return r, err
	}
	// Missed in both tiers, which proves the key absent only if what cold
	// held when hot missed was deleted as the key's deletion. A Delete of
	// a version put in hot after that miss first deletes the older copy it
	// shadows in cold (so that the copy never shows once the version is
	// gone): a read that missed in hot before the put and in cold after
	// that deletion saw a key that existed throughout. Asked again, hot
	// has the new version, or has lost it since to a Delete that left
	// nothing in either tier; a move of it would have put its copy in
	// cold first, where the second look finds it.
	s.stats.missesChecked.Add(1)
	return s.readOnce(ctx, key, offset, length, nil)
}

// readOnce asks hot, then, if hot does not have key, cold.
func (s *Store) readOnce(ctx context.Context, key string, offset, length int64, ahead *readAhead) (blob.Reader, error) {
	r, err := s.hot.NewRangeReader(ctx, key, offset, length)
	since := s.settled()
	if err == nil {
		grave, gerr := s.readsGrave(ctx, key, r.Attributes())
		if gerr != nil || grave {
			r.Close()
			ahead.drop()
			if gerr != nil {
				return nil, gerr
			}
			return nil, notFound(driver.OpRead, key)
		}
	}
	if err == nil {
		stale, serr := s.staleHot(ctx, key, r.Attributes().Generation, since)
		switch {
		case serr != nil:
			r.Close()
			ahead.drop()
			return nil, serr
		case stale:
			// A copy a retirement left: the pack log has the key.
			r.Close()
			s.stats.staleHot.Add(1)
			return s.readCold(ctx, key, offset, length, since, ahead)
		}
		ahead.drop()
		return &fallbackReader{s: s, ctx: ctx, key: key, off: offset, n: length, r: r}, nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		ahead.drop()
		return nil, err
	}
	return s.readCold(ctx, key, offset, length, since, ahead)
}

// hotDeleteDelay is how long a change of what packs serve stays unseen by
// the rest of the world: MoveTimeout/10, at most 200ms. A removal from hot
// waits that long after the log objects that replace it were committed (a
// pack move after its pack; a Delete or a move of a key with an older
// packed version after the tombstone killing it), and a Delete that wrote
// a tombstone waits that long before it returns. So an answer from hot
// received at time t (a miss, or a listing without the key) is right once
// the catalog includes every log object committed before t minus the
// delay: see settled.
func (s *Store) hotDeleteDelay() time.Duration { return HotDeleteDelay(s.opts.MoveTimeout) }

// HotDeleteDelay is how long a change of what packs serve stays unseen
// after its log object is committed, for a Store whose MoveTimeout is
// moveTimeout (zero: DefaultMoveTimeout): moveTimeout/10, at most 200ms.
// Reads, Stats, listings and deletes of packed objects that begin within
// it of one another share one listing of the pack log.
func HotDeleteDelay(moveTimeout time.Duration) time.Duration {
	if moveTimeout <= 0 {
		moveTimeout = DefaultMoveTimeout
	}
	return min(moveTimeout/10, 200*time.Millisecond)
}

// settled returns the time before which the catalog must include every log
// object, for an answer hot gave just now. A refresh that began after it
// serves every read that follows within the delay: reads in quick
// succession share one listing of the log.
func (s *Store) settled() time.Time { return time.Now().Add(-s.hotDeleteDelay()) }

// readAhead is the part of a read of a key the catalog has in a cached pack
// index that runs while hot is asked: a read of the cached entry's range
// and, if the catalog's last listing is older than half hotDeleteDelay, a
// listing of the pack log.
type readAhead struct {
	cancel context.CancelFunc
	guess  packed
	spec   chan specRead
}

type specRead struct {
	r   blob.Reader
	err error
}

// startReadAhead starts a readAhead for key if a cached pack index has a
// live entry of it (a key moved out of hot, whose next read is likely to
// miss there); nil otherwise.
func (s *Store) startReadAhead(ctx context.Context, key string, offset, length int64) *readAhead {
	guess, ok := s.cat.cached(key)
	if !ok {
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	a := &readAhead{cancel: cancel, guess: guess, spec: make(chan specRead, 1)}
	if start := time.Now(); start.Sub(s.cat.lastRefresh()) > s.hotDeleteDelay()/2 {
		// The listing a miss would need, begun now (a failed one is made
		// again after hot's answer).
		go s.cat.sync(sctx, start)
	}
	go func() {
		r, err := s.readPacked(sctx, guess, offset, length)
		a.spec <- specRead{r, err}
	}()
	return a
}

// take returns the speculative read if it read entry p, and drops it
// otherwise; nil if it failed or was taken.
func (a *readAhead) take(p packed) blob.Reader {
	if a == nil || a.spec == nil {
		return nil
	}
	res := <-a.spec
	a.spec = nil
	if res.err == nil && p.pack.name == a.guess.pack.name && p.entry.Off == a.guess.entry.Off {
		return &cancelReader{Reader: res.r, cancel: a.cancel}
	}
	if res.r != nil {
		res.r.Close()
	}
	return nil
}

// drop abandons the read ahead.
func (a *readAhead) drop() {
	if a == nil {
		return
	}
	a.cancel()
	if a.spec != nil {
		if res := <-a.spec; res.r != nil {
			res.r.Close()
		}
		a.spec = nil
	}
}

// readCold reads key from cold, after hot missed: from the pack that serves
// it, if one does, else from the cold object of its name. The catalog is
// brought up to date first, to include every log object committed before
// since (see settled), so a pack whose objects left hot before the miss,
// and a tombstone of a Delete acknowledged before the read began, are seen.
//
// A read ahead (the pack the catalog already knew, read while hot was
// asked) is kept if the catalog still names the same entry afterwards: a
// pack's bytes never change, so it is the read that would have followed. A
// packed read then costs about one cold round trip, alongside hot's.
func (s *Store) readCold(ctx context.Context, key string, offset, length int64, since time.Time, ahead *readAhead) (blob.Reader, error) {
	if s.packing() {
		for attempt := 0; ; attempt++ {
			if err := s.cat.sync(ctx, since); err != nil {
				ahead.drop()
				return nil, err
			}
			p, ok, err := s.cat.lookup(ctx, key)
			if err == nil {
				// A damaged pack or tombstone may hold a newer version
				// of key, or have killed the one found.
				err = s.cat.damagedFor(driver.OpRead, key)
			}
			if err != nil {
				ahead.drop()
				return nil, err
			}
			if ok {
				if r := ahead.take(p); r != nil {
					return r, nil
				}
			}
			ahead.drop()
			if !ok {
				break
			}
			r, err := s.readPacked(ctx, p, offset, length)
			if errors.Is(err, blob.ErrNotFound) && attempt == 0 {
				// The pack was rewritten and removed: its successor was
				// committed before, and a full listing finds it.
				if err := s.cat.refreshFull(ctx); err != nil {
					return nil, err
				}
				since = time.Time{}
				continue
			}
			return r, err
		}
	}
	ahead.drop()
	r, err := s.cold.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &coldReader{Reader: r}, nil
}

// cancelReader cancels the context of a read when it is closed.
type cancelReader struct {
	blob.Reader
	cancel context.CancelFunc
}

func (r *cancelReader) Close() error {
	err := r.Reader.Close()
	r.cancel()
	return err
}

// fallbackReader covers a hot store that reports a missing key only on the
// first Read (the contract allows it): it then reads cold instead.
type fallbackReader struct {
	s      *Store
	ctx    context.Context
	key    string
	off, n int64
	r      blob.Reader
	read   bool
}

func (f *fallbackReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if !f.read && n == 0 && err != nil && errors.Is(err, blob.ErrNotFound) {
		f.read = true
		c, cerr := f.s.readCold(f.ctx, f.key, f.off, f.n, f.s.settled(), nil)
		if cerr != nil {
			return 0, cerr
		}
		f.r.Close()
		f.r = c
		return f.r.Read(p)
	}
	f.read = true
	return n, err
}

func (f *fallbackReader) Close() error                 { return f.r.Close() }
func (f *fallbackReader) Attributes() *blob.Attributes { return f.r.Attributes() }

// coldReader shows a cold object's attributes as the tiered store's.
type coldReader struct{ blob.Reader }

func (r *coldReader) Attributes() *blob.Attributes { return fromCold(r.Reader.Attributes()) }

// fromCold returns a cold object's attributes with the generation it had in
// hot and without the bookkeeping metadata.
func fromCold(a *blob.Attributes) *blob.Attributes {
	if a == nil {
		return nil
	}
	out := *a
	if g, ok := a.Metadata[generationKey]; ok {
		out.Generation = g
		out.Metadata = maps.Clone(a.Metadata)
		delete(out.Metadata, generationKey)
		if len(out.Metadata) == 0 {
			out.Metadata = nil
		}
	} else if a.Generation != "" {
		out.Generation = coldGenerationPrefix + a.Generation
	}
	return &out
}

// NewWriter writes to hot. Unconditional writes are the hot store's own
// writer, with no added work. Conditional writes must also see cold, so their
// bytes are buffered and committed at Close under the key's lock (see
// commitConditional).
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.check(driver.OpWrite, key); err != nil {
		return nil, err
	}
	if opts == nil || opts.If.IsZero() {
		if !s.packing() {
			return s.hot.NewWriter(ctx, key, opts)
		}
		return recordingHot{Store: s.hot, s: s}.NewWriter(ctx, key, opts)
	}
	if err := opts.If.Validate("write", key); err != nil {
		return nil, err
	}
	if _, ok := opts.Metadata[generationKey]; ok {
		return nil, blob.Errorf(driver.OpWrite, key, blob.ErrInvalidArgument, "metadata key %s is reserved", generationKey)
	}
	return &condWriter{s: s, ctx: ctx, key: key, opts: *opts}, nil
}

// Create makes a new object in hot under a name the store picks. The name is
// new, so unlike an IfNotExist write it need not be looked up in cold: Create
// costs exactly what the hot store's Create costs (one data round trip over a
// pooled gcsrapid store).
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if s.life.Closed() {
		return "", nil, driver.ClosedError(driver.OpCreate, prefix)
	}
	if isMarker(prefix) {
		return "", nil, blob.Errorf(driver.OpCreate, prefix, blob.ErrInvalidKey, "prefix reserved for move markers")
	}
	key, w, err := blob.Create(ctx, s.hot, prefix, opts)
	if err != nil || !s.packing() {
		return key, w, err
	}
	return key, &recordingWriter{Writer: w, s: s, key: key}, nil
}

type condWriter struct {
	s      *Store
	ctx    context.Context
	key    string
	opts   blob.WriterOptions
	buf    []byte
	closed bool
}

func (w *condWriter) Write(p []byte) (int, error) {
	if w.closed {
		return 0, driver.ClosedError(driver.OpWrite, w.key)
	}
	if err := w.ctx.Err(); err != nil {
		return 0, &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *condWriter) Close() error {
	if w.closed {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	w.closed = true
	if err := w.ctx.Err(); err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: w.key, Err: err}
	}
	if w.s.life.Closed() {
		return driver.ClosedError(driver.OpWrite, w.key)
	}
	return w.s.commitConditional(w.ctx, w.key, w.buf, w.opts)
}

// commitConditional checks a precondition against both tiers and commits to
// hot (see Conditional operations in the package documentation). A version
// in hot is written over on condition of its generation there; a version
// in cold only is checked again, and written over, under the key's lock in
// hot, which every other operation on it holds too. The key's lock in this
// process keeps its own compactor from moving the key meanwhile; a
// compactor in another process moves only objects older than After, and an
// object that was absent from hot when an IfNotExist check began cannot be
// both created and moved within one conditional write unless the write
// outlasts After.
func (s *Store) commitConditional(ctx context.Context, key string, data []byte, opts blob.WriterOptions) error {
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpWrite, Key: key, Err: err}
	}
	defer unlock()
	if opts.If.NotExist() {
		for range 4 {
			// Before hot is asked: every pack committed until now counts.
			if _, err := s.coldStat(ctx, key, time.Now()); err == nil {
				// Cold's version exists unless a grave in hot shadows it.
				a, err := s.hot.Stat(ctx, key)
				if err != nil && !errors.Is(err, blob.ErrNotFound) {
					return err
				}
				if err != nil || !isGrave(a) {
					return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrExists}
				}
				if err := s.replaceGrave(ctx, key, data, opts, a); !errors.Is(err, errGraveMoved) {
					return err
				}
				continue
			} else if !errors.Is(err, blob.ErrNotFound) {
				return err
			}
			if err := s.putHot(ctx, key, data, opts, ""); !errors.Is(err, errGraveMoved) {
				return err
			}
		}
		return blob.Errorf(driver.OpWrite, key, nil, "tiered: key kept changing")
	}
	want := opts.If.GenerationMatch()
	a, err := s.hotStat(ctx, key)
	for try := 0; err == nil && try < 3; try++ {
		if a.Generation != want || isGrave(a) {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
		}
		err = s.putHotRecorded(ctx, key, data, &opts)
		if !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
		// want left hot since the Stat: replaced (the Stat now says so), or
		// moved by a compactor in another process (cold has it now).
		a, err = s.hotStat(ctx, key)
	}
	if err == nil {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	// want lives in cold only, if anywhere: both tiers are checked again,
	// and the write committed, under key's lock in hot, which every other
	// operation on a version in cold only holds too.
	held, unlockHot, err := s.lockHot(ctx, key)
	if err != nil {
		return err
	}
	defer unlockHot()
	return s.outlasted(held, driver.OpWrite, key, s.commitColdOnly(held, key, data, opts, want))
}

// commitColdOnly is commitConditional's write of a version in cold only,
// under key's lock in hot.
func (s *Store) commitColdOnly(ctx context.Context, key string, data []byte, opts blob.WriterOptions, want string) error {
	if a, err := s.hotStat(ctx, key); err == nil {
		if a.Generation != want || isGrave(a) {
			return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
		}
		return s.putHotRecorded(ctx, key, data, &opts)
	} else if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	ca, err := s.coldStat(ctx, key, s.settled())
	if errors.Is(err, blob.ErrNotFound) || (err == nil && ca.Generation != want) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition}
	}
	if err != nil {
		return err
	}
	// The object lives in cold only; the new version goes to hot, where it
	// shadows the cold one until it is moved over it.
	o := opts
	o.If = blob.IfNotExist()
	err = s.putHot(ctx, key, data, o, want)
	if errors.Is(err, blob.ErrExists) {
		return &blob.Error{Op: driver.OpWrite, Key: key, Kind: blob.ErrPrecondition, Err: err}
	}
	return err
}

// Stat returns hot's attributes if hot has key, else cold's (with the
// generation the object had in hot).
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	a, err := s.statOnce(ctx, key)
	if !errors.Is(err, blob.ErrNotFound) {
		return a, err
	}
	s.stats.missesChecked.Add(1) // a miss in both tiers: see NewRangeReader
	return s.statOnce(ctx, key)
}

// statOnce asks hot, then, if hot does not have key, cold.
func (s *Store) statOnce(ctx context.Context, key string) (*blob.Attributes, error) {
	a, err := s.hotStat(ctx, key)
	if err == nil && isGrave(a) {
		return nil, notFound(driver.OpStat, key)
	}
	if err == nil || !errors.Is(err, blob.ErrNotFound) {
		return a, err
	}
	return s.coldStat(ctx, key, s.settled())
}

// coldStat returns the attributes of key's version in cold: the pack
// entry's, or the cold object's. The catalog includes every log object
// committed before since: settled() after a miss in hot, the present time
// for a check made before hot is asked.
func (s *Store) coldStat(ctx context.Context, key string, since time.Time) (*blob.Attributes, error) {
	if s.packing() {
		if err := s.cat.sync(ctx, since); err != nil {
			return nil, err
		}
		p, ok, err := s.cat.lookup(ctx, key)
		if err == nil {
			err = s.cat.damagedFor(driver.OpStat, key)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			a := *p.entry.Attrs
			return &a, nil
		}
	}
	a, err := s.cold.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return fromCold(a), nil
}

// List merges one page of each tier. Hot is listed before cold: an object
// moved after hot's listing was already in cold before it, so an object that
// exists for the whole listing is never missed, with one exception: a key
// in cold only when hot is listed, replaced in hot and then deleted before
// cold is listed, is missed (the Delete removes the copy the new version
// shadows first), though the Delete may return only after the listing.
// Reads and Stats ask both tiers again for that reason; a listing would
// have to list hot twice. An object in both tiers (mid
// move, or overwritten after a move) appears once, with hot's attributes.
// Objects listed from cold only have an empty Generation (cold listings do
// not carry the metadata that holds it); Stat returns it.
func (s *Store) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	// A bad prefix or page size is refused before either tier is asked.
	o, err := s.life.CheckList(opts)
	if err != nil {
		return nil, err
	}
	after, err := driver.ListStart(&o)
	if err != nil {
		return nil, err
	}
	size := o.PageSize
	for {
		page, bound, err := s.listOnce(ctx, &blob.ListOptions{Prefix: o.Prefix, Delimiter: o.Delimiter, StartAfter: after, PageSize: size})
		if err != nil || len(page.Objects) > 0 || bound == "" {
			return page, err
		}
		// A page of markers only: go on after them rather than return an
		// empty page that is not the last.
		after = bound
	}
}

// listOnce merges one page of each tier (and of the keys packs serve). bound,
// when not empty, is the last key a source listed before it cut its page:
// entries after it are unknown for that source, so the merged page stops
// there.
func (s *Store) listOnce(ctx context.Context, inner *blob.ListOptions) (page *blob.ListPage, bound string, err error) {
	hp, err := s.hot.List(ctx, inner)
	if err != nil {
		return nil, "", err
	}
	// Packs and cold's own objects are listed after hot, for the reason
	// reads ask them after hot; the two at once, as neither orders the
	// other (a listing of the pack log, when the catalog needs one, and
	// cold's listing are each a regional round trip).
	var cp *blob.ListPage
	pp := &blob.ListPage{}
	hotObjs := hp.Objects
	if s.packing() {
		var cerr error
		coldDone := make(chan struct{})
		go func() {
			defer close(coldDone)
			cp, cerr = s.cold.List(ctx, inner)
		}()
		// Hot's stale copies are set aside before what packs serve is
		// read, and the catalog is brought up to date after hot's last
		// answer: a key filterStale drops (a pack holds its version, or it
		// was retired from hot since the listing) is in a pack the catalog
		// packedPage reads already has. Read the other way round, a key
		// whose first pack landed in between was in neither.
		hotObjs, err = s.filterStale(ctx, hp.Objects)
		if err == nil {
			err = s.cat.sync(ctx, s.settled())
		}
		if err == nil {
			pp, err = s.packedPage(ctx, inner)
		}
		<-coldDone
		err = cmp.Or(err, cerr)
	} else {
		cp, err = s.cold.List(ctx, inner)
	}
	if err != nil {
		return nil, "", err
	}
	// In order of precedence: hot's attributes win, then a pack's.
	sources := []*blob.ListPage{hp, pp, cp}
	for _, p := range sources {
		if p.NextPageToken != "" && len(p.Objects) > 0 {
			if last := p.Objects[len(p.Objects)-1].Key; bound == "" || last < bound {
				bound = last
			}
		}
	}
	// Hot's stale copies are set aside once hot's page has set the bound.
	hp.Objects = hotObjs
	graves, err := s.gravesIn(ctx, hp.Objects)
	if err != nil {
		return nil, "", err
	}
	size := inner.PageSize
	page = &blob.ListPage{Objects: make([]blob.ListObject, 0, min(size, len(hp.Objects)+len(pp.Objects)+len(cp.Objects)))}
	lists := [][]blob.ListObject{hp.Objects, pp.Objects, cp.Objects}
	more := false
	for {
		first := -1
		for i, l := range lists {
			if len(l) > 0 && (first < 0 || l[0].Key < lists[first][0].Key) {
				first = i
			}
		}
		if first < 0 {
			break
		}
		next := lists[first][0]
		for i, l := range lists {
			if len(l) > 0 && l[0].Key == next.Key {
				lists[i] = l[1:]
			}
		}
		if first > 0 {
			next.Generation = ""
		}
		if bound != "" && next.Key > bound {
			more = true
			break
		}
		if isMarker(next.Key) || graves[next.Key] {
			continue
		}
		if next.IsDir && first == 0 {
			// A directory hot shows may hold nothing but graves.
			live, err := s.dirLive(ctx, next.Key)
			if err != nil {
				return nil, "", err
			}
			if !live {
				continue
			}
		}
		if len(page.Objects) == size {
			more = true
			break
		}
		page.Objects = append(page.Objects, next)
	}
	if bound != "" {
		more = true
	}
	if more && len(page.Objects) > 0 {
		page.NextPageToken = driver.EncodePageToken(page.Objects[len(page.Objects)-1].Key)
	}
	return page, bound, nil
}

// packedPage lists, like a store's List, the keys packs serve: a page of at
// most inner.PageSize entries after inner.StartAfter, common prefixes
// grouped at inner.Delimiter.
func (s *Store) packedPage(ctx context.Context, inner *blob.ListOptions) (*blob.ListPage, error) {
	page := &blob.ListPage{}
	after := inner.StartAfter
	for {
		batch, err := s.cat.keys(ctx, inner.Prefix, after, inner.PageSize+1)
		if err != nil {
			return nil, err
		}
		for _, p := range batch {
			after = p.entry.Key
			o := blob.ListObject{Key: p.entry.Key, Size: p.entry.Len, ModTime: p.entry.Attrs.ModTime, MD5: p.entry.Attrs.MD5}
			if inner.Delimiter != "" {
				rest := strings.TrimPrefix(o.Key, inner.Prefix)
				if i := strings.Index(rest, inner.Delimiter); i >= 0 {
					o = blob.ListObject{Key: inner.Prefix + rest[:i+len(inner.Delimiter)], IsDir: true}
					if n := len(page.Objects); n > 0 && page.Objects[n-1].Key == o.Key {
						continue
					}
					if o.Key <= inner.StartAfter {
						continue
					}
				}
			}
			if len(page.Objects) == inner.PageSize {
				page.NextPageToken = driver.EncodePageToken(page.Objects[len(page.Objects)-1].Key)
				return page, nil
			}
			page.Objects = append(page.Objects, o)
		}
		if len(batch) <= inner.PageSize {
			return page, nil
		}
	}
}

// Delete removes key, under the key's lock so that this process's
// compactor is not moving it meanwhile. It takes effect at one instant,
// when the version readers see is replaced or removed:
//
//   - If hot has the key (generation g) and the Store packs, or a move may
//     be taking g (g is old enough to move), a grave replaces g in hot, on
//     condition of its generation (see Graves in the package
//     documentation): a move, whose removal of g is conditional too, then
//     leaves it to the grave.
//   - If hot has a younger g and the Store does not pack, the cold object
//     is removed first (hot shadows it, so no reader notices), then g is
//     deleted from hot on condition of its generation. A deleted g is
//     reported to a move of it under way in another process (one whose
//     clock misjudged g's age) through its marker (noteDelete).
//   - If hot has none and the Store packs, a grave over nothing deletes
//     what cold holds (buryCold, buryPacked).
//   - Either way, a newer version written meanwhile is deleted instead (the
//     loop), and a g moved out of hot meanwhile by a compactor in another
//     process is removed where it went, as a version in cold only.
//   - If hot does not have the key, the version readers see is cold's: under
//     the key's lock in hot (deleteColdOnly), which every operation on a
//     version in cold only holds, hot is asked again, then the cold object
//     is deleted and the version packs serve (which a reader prefers) is
//     killed. A grave in hot is no version: NotFound.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return &blob.Error{Op: driver.OpDelete, Key: key, Err: err}
	}
	defer unlock()
	want := ""
	if opts != nil {
		want = opts.IfGenerationMatch
	}
	inPacks := s.packing() && len(s.cat.holders(key)) > 0
	if s.packing() && !inPacks {
		// Not packed, as far as this process knows: a version it wrote is
		// most likely still in hot.
		if done, err := s.deleteWritten(ctx, key, want); done {
			return err
		}
	}
	if want == "" && inPacks {
		// Most likely packed, and not in hot: bury it straight away.
		if done, err := s.buryPacked(ctx, key); done {
			return err
		}
	}
	misses := 0
	for range 10 {
		a, stale, err := s.hotStatStale(ctx, key)
		if errors.Is(err, blob.ErrNotFound) && s.packing() {
			if done, err := s.buryCold(ctx, key, want, stale, &misses); done {
				return err
			}
			continue // hot changed: look again
		}
		if errors.Is(err, blob.ErrNotFound) {
			if done, err := s.deleteColdOnly(ctx, key, want); done {
				return err
			}
			continue // in hot again: delete it there
		} else if err != nil {
			return err
		}
		g := a.Generation
		if isGrave(a) {
			if want != "" {
				return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
			}
			return notFound(driver.OpDelete, key)
		}
		if want != "" && g != want {
			return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
		}
		// When packing, every Delete of a version in hot replaces it with a
		// grave: whatever packs or cold hold of older versions of the key
		// stays shadowed until the compactor retires the grave with them
		// (retireGraves), so the Delete waits for no log object and reads no
		// log; and a move that may be taking g, whatever this clock says of
		// g's age, meets the grave at g's generation.
		if s.packing() || s.mayBeMoving(a) {
			// A move may be taking g: a grave replaces it (see graveKey).
			err := s.writeGrave(ctx, key, g)
			if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
				continue // replaced, or moved or deleted: looked at again
			}
			return err
		}
		// g is too young for any move (and there are no packs): the cold
		// object it shadows goes first.
		copyOfG, err := s.deleteColdObject(ctx, key, g)
		if err != nil {
			return err
		}
		err = s.hot.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: g})
		if copyOfG && (errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound)) {
			// The cold object this Delete removed was a move's copy of g
			// (by a compactor whose clock misjudged g's age): g left hot
			// in that move (a move's delete that failed can still take
			// effect later, when a quorum read finishes it), so removing
			// the copy deleted g, or g was still in hot then and this
			// Delete ran before whatever replaced it. Deleting again would
			// take effect twice.
			return nil
		}
		switch {
		case err == nil:
			return s.noteDelete(ctx, key, g)
		case errors.Is(err, blob.ErrPrecondition):
			if want != "" {
				return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
			}
			continue // overwritten meanwhile: delete the new version
		case errors.Is(err, blob.ErrNotFound):
			// Moved out of hot by a compactor in another process (or
			// deleted): deleted from cold under key's lock in hot, like
			// any version in cold only.
			continue
		default:
			return err
		}
	}
	return blob.Errorf(driver.OpDelete, key, nil, "tiered: key kept changing")
}

// buryCold deletes the version of key that cold holds, hot having missed
// (or holding only stale, a copy of a version packs killed or superseded),
// by writing a grave in hot on condition of what hot held: nothing, or
// stale. The grave shadows the cold version at once, as any version in hot
// does, and the compactor retires it later with what it shadows
// (retireGraves: a tombstone, hotDeleteDelay, then the cold object and the
// grave). So the Delete writes no log object and waits for none, and two
// operations on one cold version (two Deletes, a Delete and a conditional
// write, which writes hot IfNotExist) meet at hot's condition: one wins,
// the other looks again. done is false when hot changed under it, or after
// a first miss in both tiers (asked again, as reads do: a Delete of a newer
// hot version may have removed the copy the first look would have found).
func (s *Store) buryCold(ctx context.Context, key, want, stale string, misses *int) (done bool, err error) {
	ca, err := s.coldStat(ctx, key, s.settled())
	if errors.Is(err, blob.ErrNotFound) {
		if *misses++; *misses < 2 {
			s.stats.missesChecked.Add(1)
			return false, nil
		}
		if want != "" {
			return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
		}
		return true, notFound(driver.OpDelete, key)
	} else if err != nil {
		return true, err
	}
	if want != "" && ca.Generation != want {
		return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
	}
	cond := blob.IfNotExist()
	if stale != "" {
		cond = blob.IfGenerationMatch(stale)
	}
	err = s.putGrave(ctx, key, cond, ca.Generation)
	if errors.Is(err, blob.ErrExists) || errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
		return false, nil
	}
	return true, err
}

// buryPacked is buryCold for a key the catalog says packs may hold, with
// no condition on the version deleted: the grave is written first, on
// condition that hot has nothing (done is false if it has something, for
// Delete to look at), and what it shadows is asked after. A version found
// in cold then is the one the grave deleted: the catalog need only include
// the log objects committed buryWindow before the grave, since a
// tombstone that killed that version was followed, that long after, by the
// removal of the grave that deleted it (retireGraves), which the grave's
// condition saw done. Only "nothing there" needs the catalog as of
// hotDeleteDelay before (a version packed since left hot that long after
// its pack's commit): so a packed Delete is one write to hot, and a listing
// of the log at most once per buryWindow. A grave over nothing is retired
// like any other.
func (s *Store) buryPacked(ctx context.Context, key string) (done bool, err error) {
	err = s.putGrave(ctx, key, blob.IfNotExist(), "packed")
	if errors.Is(err, blob.ErrExists) || errors.Is(err, blob.ErrPrecondition) {
		return false, nil
	} else if err != nil {
		return true, err
	}
	buried := time.Now()
	if _, err := s.coldStat(ctx, key, buried.Add(-s.buryWindow())); !errors.Is(err, blob.ErrNotFound) {
		return true, err
	}
	_, err = s.coldStat(ctx, key, buried.Add(-s.hotDeleteDelay()))
	if errors.Is(err, blob.ErrNotFound) {
		return true, notFound(driver.OpDelete, key)
	}
	return true, err
}

func (s *Store) buryWindow() time.Duration { return BuryWindow(s.opts.MoveTimeout) }

// BuryWindow is how long after a tombstone killing what a grave shadows the
// compactor of a Store whose MoveTimeout is moveTimeout (zero:
// DefaultMoveTimeout) removes the grave: moveTimeout/4, at least
// HotDeleteDelay and at most 5s. Deletes of packed objects that begin
// within it of one another share one listing of the pack log.
func BuryWindow(moveTimeout time.Duration) time.Duration {
	if moveTimeout <= 0 {
		moveTimeout = DefaultMoveTimeout
	}
	return max(HotDeleteDelay(moveTimeout), min(moveTimeout/4, 5*time.Second))
}

// deleteColdOnly deletes the version of key that cold holds, hot having
// missed, in a Store that does not pack, under key's lock in hot: hot is
// asked again under it, and if it has key now, done is false and the caller
// deletes that. Every operation
// on a version in cold only (a conditional write of it, a Delete) holds the
// lock from its check to its commit, so two of them never both act on one
// version.
func (s *Store) deleteColdOnly(ctx context.Context, key, want string) (done bool, err error) {
	ctx, unlockHot, err := s.lockHot(ctx, key)
	if err != nil {
		return true, err
	}
	defer unlockHot()
	defer func() { err = s.outlasted(ctx, driver.OpDelete, key, err) }()
	a, err := s.hot.Stat(ctx, key)
	if err == nil && isGrave(a) {
		if want != "" {
			return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
		}
		return true, notFound(driver.OpDelete, key)
	}
	if err == nil {
		return false, nil
	} else if !errors.Is(err, blob.ErrNotFound) {
		return true, err
	}
	return true, s.deleteCold(ctx, key, want)
}

// deleteColdObject deletes the cold object of key, if there is one, ahead of
// a Delete of hot's version g (so that an older copy is not served once g
// is gone), and reports whether it was a move's copy of g.
func (s *Store) deleteColdObject(ctx context.Context, key, g string) (copyOfG bool, err error) {
	for range 4 {
		ca, err := s.cold.Stat(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		err = s.cold.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: ca.Generation})
		if errors.Is(err, blob.ErrUnsupported) {
			// A cold store without generation preconditions: delete what
			// is there, as a Delete did before it needed to know what.
			err = s.cold.Delete(ctx, key, nil)
		}
		switch {
		case err == nil:
			return ca.Metadata[generationKey] == g, nil
		case errors.Is(err, blob.ErrNotFound):
			return false, nil
		case !errors.Is(err, blob.ErrPrecondition):
			return false, err
		}
		// Replaced since the Stat (a move's copy landing): look again.
	}
	return false, blob.Errorf(driver.OpDelete, key, nil, "tiered: cold object kept changing")
}

// mayBeMoving reports whether a pack move may be packing the hot version
// with attributes a: it is older than After, less the clock skew and a
// move's duration (a move checks the age when it reads, on its own clock).
func (s *Store) mayBeMoving(a *blob.Attributes) bool {
	return time.Now().Sub(a.ModTime) >= s.opts.After-s.opts.MaxClockSkew-s.opts.MoveTimeout
}

// deleteCold deletes the cold object of key (hot has none), in a Store that
// does not pack (one that packs writes a grave instead: buryCold). With
// want, only if it is generation want.
func (s *Store) deleteCold(ctx context.Context, key, want string) error {
	ca, err := s.cold.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		if want != "" {
			return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
		}
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrNotFound}
	} else if err != nil {
		return err
	}
	if want != "" && fromCold(ca).Generation != want {
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition}
	}
	err = s.cold.Delete(ctx, key, &blob.DeleteOptions{IfGenerationMatch: ca.Generation})
	if errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) {
		// Deleted or replaced meanwhile, by another process.
		return &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrNotFound, Err: err}
	}
	return err
}

// Close stops the compactor, waits for the moves in flight to end, and
// closes both tiers.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	s.cancel()
	<-s.done
	<-s.leaseDone
	// The passes have ended: other processes may take the leases at once.
	rctx, cancel := context.WithTimeout(context.Background(), s.leases[0].duration/3)
	var wg sync.WaitGroup
	for _, l := range s.leases {
		wg.Go(func() { l.release(rctx) })
	}
	wg.Wait()
	cancel()
	s.metrics.close()
	return errors.Join(s.hot.Close(), s.cold.Close())
}

var _ io.Closer = (*Store)(nil)
