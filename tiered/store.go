package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// generationKey is the metadata key under which a cold copy records the hot
// generation it was moved from, so an object keeps its generation across a
// move and IfGenerationMatch taken before the move still holds after it.
const generationKey = "zonalblob-tiered-generation"

// coldGenerationPrefix marks the generation of a cold object that was not put
// there by a compactor (it has no recorded hot generation).
const coldGenerationPrefix = "cold:"

// Store is a hot Store in front of a cold one with a background compactor
// that moves objects from hot to cold. See the package documentation for
// its guarantees.
type Store struct {
	hot, cold blob.Store
	opts      Options
	retirer   blob.Retirer // hot, if it can retire versions (a quorum)

	locks   keyLocks
	catalog *packlog.Catalog
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
		s.retirer = r
	}
	s.catalog = packlog.New(cold, packlog.Config{
		Window:          2*opts.MoveTimeout + opts.MaxClockSkew,
		IndexCacheBytes: opts.IndexCacheBytes,
		Logger:          opts.Logger,
		Fence:           s.fence,
		// Log objects are removed only by shard 0's passes
		// (maintainPacks), which do not overlap (see the lease).
		SoleRemover: func(ctx context.Context) bool {
			shard, inPass := passShard(ctx)
			return inPass && shard == 0 && s.fence(ctx) == nil
		},
		IndexLoaded: func() { s.stats.indexLoads.Add(1) },
	})
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

// markerPrefix starts the names of what the Store keeps beside users'
// objects: locks and leases in hot, the pack log and move markers in cold.
// Two private-use code points sort after every ordinary key and contain no
// delimiter a listing would group on, so these never show in a listing
// (List drops them) and no user key collides with them (keys starting with
// the prefix are refused). It is packlog.ReservedPrefix, which the names of
// the pack log and its inventory start with.
const markerPrefix = packlog.ReservedPrefix

// logNow is the time for a new log name: the clock, or just after the last
// name this process chose if the clock has not moved past it.
func (s *Store) logNow() time.Time {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	t := time.Now()
	if !t.After(s.lastLog) {
		t = s.lastLog.Add(time.Nanosecond)
	}
	s.lastLog = t
	return t
}

func isMarker(key string) bool { return strings.HasPrefix(key, markerPrefix) }

func (s *Store) check(op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	if isMarker(key) {
		return blob.Errorf(op, key, blob.ErrInvalidKey, "keys starting with U+10FFFD U+10FFFD are reserved for the store's own records")
	}
	return nil
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
