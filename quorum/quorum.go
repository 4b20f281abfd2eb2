package quorum

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// Scheme is the URL scheme of a quorum store.
const Scheme = "quorum"

// VersionKey is the reserved metadata key holding a version's token, the
// quorum's generation of the object, identical on every replica of one
// version. It is hidden from Attributes (as are BallotKey, PromiseKey,
// StateKey and ChainKey), and writes that set any of them are refused.
const VersionKey = "zonalblob-quorum-version"

// ErrNoQuorum: fewer replicas than required committed (or answered). A write
// or delete failing with it alone took no effect; with ErrUncertain it may
// take effect (see the package doc).
var ErrNoQuorum = errors.New("quorum not reached")

// ErrUncertain accompanies ErrNoQuorum when some replica may have taken the
// failed write or delete (a commit succeeded, or failed in a way that does
// not prove it changed nothing). Such an operation may take effect, once, at
// any time until the key is next written: a later majority read or repair
// may finish it. Replicas are never rolled back.
var ErrUncertain = errors.New("outcome uncertain")

// Consistency selects how a read chooses among replicas.
type Consistency int

const (
	// ReadFastest reads the fastest healthy replica and hedges to the next.
	ReadFastest Consistency = iota
	// ReadMajority reads the state of a majority of the replicas and serves
	// the key's chosen version, finishing a version found on fewer replicas
	// first (see the package doc): reads are linearizable.
	ReadMajority
)

func (c Consistency) String() string {
	if c == ReadMajority {
		return "majority"
	}
	return "fastest"
}

// Options configure New. Zero values take the defaults given.
type Options struct {
	// W is the write quorum; default N/2+1. A W of N/2 or less is raised
	// to N/2+1: writes, deletes and their conditions are decided by
	// majorities, which no smaller quorum can keep.
	W int
	// Consistency is the default read mode (see WithConsistency for one call).
	Consistency Consistency
	// HedgeDelay fixes the delay before a read is hedged to the next replica.
	// 0 (default) adapts it to the replica's observed p95, clamped to
	// [MinHedgeDelay, MaxHedgeDelay]; negative disables hedging (the next
	// replica is tried only after an error).
	HedgeDelay    time.Duration
	MinHedgeDelay time.Duration // default 500µs
	MaxHedgeDelay time.Duration // default 1s
	// StragglerTimeout bounds the background completion of a write after it
	// was acknowledged; default 30s.
	StragglerTimeout time.Duration
	// CloseTimeout bounds how long Close waits for stragglers and queued
	// repairs; default 10s.
	CloseTimeout time.Duration
	// FailureThreshold consecutive failures mark a replica down; default 5.
	FailureThreshold int
	// ProbeInterval is how often replicas are probed (down ones to bring them
	// back, all of them to refresh latency); default 1s.
	ProbeInterval time.Duration
	// AntiEntropyInterval is the period of the full-listing comparison of the
	// replicas; default 5m, negative disables it.
	AntiEntropyInterval time.Duration
	// RepairGrace: anti-entropy leaves objects younger than this alone (they
	// may be another process's writes in flight); default 1m.
	RepairGrace time.Duration
	// RepairRetry is the first backoff of a repair that could not finish
	// (doubling up to 5s); default 100ms.
	RepairRetry time.Duration
	// TombstoneGrace is how long a tombstone (and a placeholder left by a
	// promise) is kept after every replica holds it, before it is
	// collected; default 10m. It must exceed twice StragglerTimeout (an
	// operation's rounds begin within half of it, and StragglerTimeout
	// bounds their stragglers), so that no write
	// still in flight from before the delete can land on a replica after its
	// tombstone is gone.
	TombstoneGrace time.Duration
	// MeterProvider receives the Store's OpenTelemetry metrics (rounds,
	// contention, uncertain outcomes, repairs, hedges, replica health: see
	// Stats); nil means otel's global provider.
	MeterProvider metric.MeterProvider
	// TracerProvider receives the spans of the Store's background work:
	// each key's repair and each anti-entropy pass (nil: otel's global).
	// Spans of the Store's operations come from blob.TracedStore, which
	// blob.Open wraps around every store when given a TracerProvider.
	TracerProvider trace.TracerProvider
	// Logger receives a line when a replica is marked down and when it
	// answers again (nil: slog.Default()).
	Logger *slog.Logger
}

func (o *Options) defaults(n int) {
	if o.W == 0 {
		o.W = n/2 + 1
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.MinHedgeDelay, 500*time.Microsecond)
	def(&o.MaxHedgeDelay, time.Second)
	def(&o.StragglerTimeout, 30*time.Second)
	def(&o.CloseTimeout, 10*time.Second)
	def(&o.ProbeInterval, time.Second)
	def(&o.AntiEntropyInterval, 5*time.Minute)
	def(&o.RepairGrace, time.Minute)
	def(&o.RepairRetry, 100*time.Millisecond)
	def(&o.TombstoneGrace, 10*time.Minute)
	if o.FailureThreshold == 0 {
		o.FailureThreshold = 5
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

type ctxKey struct{}

// WithConsistency returns ctx asking reads (NewRangeReader, Stat) made with it
// for consistency c instead of the store's default.
func WithConsistency(ctx context.Context, c Consistency) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

func (s *Store) consistency(ctx context.Context) Consistency {
	if c, ok := ctx.Value(ctxKey{}).(Consistency); ok {
		return c
	}
	if blob.FastestRead(ctx) {
		return ReadFastest
	}
	return s.opts.Consistency
}

// Store replicates objects over N stores. Create it with New or Open a
// quorum:// URL.
type Store struct {
	reps []*replica
	opts Options
	w    int // write quorum: max(W, N/2+1)
	maj  int // N/2+1

	life     driver.Lifecycle
	bg       context.Context // cancelled at the end of Close
	cancelBG context.CancelFunc
	workers  sync.WaitGroup // prober, repairer, anti-entropy
	tasks    driver.Tasks   // acknowledged writes' stragglers, which Close waits for

	mu sync.Mutex
	// floors: keys this process wrote whose replicas may not all hold the
	// write yet, with its ballot; fastest reads of them read a majority.
	floors map[string]string
	// corrupt: replicas whose bytes under a key failed their checksum,
	// until repair rewrites them.
	corrupt map[string]map[int]bool

	clock atomic.Int64 // last version time issued, for monotonic tokens

	rq repairQueue

	stats   statsCounters
	metrics *metrics
	tracer  trace.Tracer
}

var (
	_ blob.Store     = (*Store)(nil)
	_ blob.Prewarmer = (*Store)(nil)
)

type replica struct {
	idx int
	s   blob.Store
	h   health
}

// New returns a quorum over replicas (at least one; typically three stores in
// three zones). The Store owns the replicas: its Close closes them.
func New(replicas []blob.Store, opts Options) (*Store, error) {
	n := len(replicas)
	if n == 0 {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "quorum needs at least one replica")
	}
	opts.defaults(n)
	if opts.W < 1 || opts.W > n {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "w=%d outside 1..%d", opts.W, n)
	}
	if opts.TombstoneGrace <= 2*opts.StragglerTimeout {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tombstone grace %v must exceed twice the straggler timeout %v", opts.TombstoneGrace, opts.StragglerTimeout)
	}
	s := &Store{opts: opts, maj: n/2 + 1, floors: map[string]string{}, corrupt: map[string]map[int]bool{}}
	s.w = max(opts.W, s.maj)
	for i, r := range replicas {
		s.reps = append(s.reps, &replica{idx: i, s: r})
	}
	m, err := newMetrics(s, opts.MeterProvider)
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("quorum: metrics: %w", err)}
	}
	s.metrics, s.tracer = m, newTracer(opts.TracerProvider)
	s.bg, s.cancelBG = context.WithCancel(context.Background())
	s.rq.init()
	s.workers.Add(3)
	go s.prober()
	go s.repairer()
	go s.antiEntropy()
	return s, nil
}

func init() {
	blob.RegisterWithGocloud(Scheme, openURL)
}

// openURL serves quorum://?w=2&replica=URL&replica=URL&replica=URL.
func openURL(ctx context.Context, u *url.URL) (blob.Store, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "quorum URL takes no host or path, only parameters")
	}
	q := driver.NewQuery(u)
	urls := q.Strings("replica")
	var o Options
	o.W = q.Int("w", 0)
	switch c := q.String("consistency", "fastest"); c {
	case "fastest":
	case "majority":
		o.Consistency = ReadMajority
	default:
		q.Strings("consistency") // keep it known; the error names the value
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "consistency %q: want fastest or majority", c)
	}
	o.HedgeDelay = q.Duration("hedge_delay", 0)
	o.StragglerTimeout = q.Duration("straggler_timeout", 0)
	o.CloseTimeout = q.Duration("close_timeout", 0)
	o.FailureThreshold = q.Int("failure_threshold", 0)
	o.ProbeInterval = q.Duration("probe_interval", 0)
	o.AntiEntropyInterval = q.Duration("anti_entropy_interval", 0)
	o.RepairGrace = q.Duration("repair_grace", 0)
	o.TombstoneGrace = q.Duration("tombstone_grace", 0)
	oo := blob.OpenOptionsFrom(ctx)
	o.MeterProvider, o.TracerProvider, o.Logger = oo.MeterProvider, oo.TracerProvider, oo.Logger
	// Pooled creates (pool.Creator in front of the quorum), as on
	// gcsrapid://, when pool_size is given and positive.
	po := pool.OptionsFromQuery(q)
	if err := q.Err(); err != nil {
		return nil, err
	}
	pooled := po.Capacity > 0
	if !pooled && po != (pool.CreatorOptions{}) {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "quorum: pool parameters need pool_size > 0 (pooled creates are off without it)")
	}
	if pooled {
		if err := po.WithDefaults().Validate(); err != nil {
			return nil, err
		}
	}
	if len(urls) == 0 {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "quorum URL needs replica=URL parameters")
	}
	if o.W < 0 || o.W > len(urls) {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "w=%d outside 1..%d", o.W, len(urls))
	}
	reps, err := openReplicas(ctx, urls, max(o.W, len(urls)/2+1))
	if err != nil {
		return nil, err
	}
	st, err := New(reps, o)
	if err != nil {
		for _, r := range reps {
			r.Close()
		}
		return nil, err
	}
	if pooled {
		c, err := pool.NewCreator(st, po)
		if err != nil {
			st.Close()
			return nil, err
		}
		return c, nil
	}
	return st, nil
}

// Close waits up to CloseTimeout for acknowledged writes to finish on their
// stragglers and for queued repairs, stops every goroutine of the store and
// closes the replicas.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	s.tasks.Stop()
	done := make(chan struct{})
	go func() {
		s.tasks.Wait()
		s.rq.drain(s.bg, s.repairKey)
		close(done)
	}()
	t := time.NewTimer(s.opts.CloseTimeout)
	select {
	case <-done:
	case <-t.C:
	}
	t.Stop()
	s.cancelBG()
	<-done
	s.workers.Wait()
	s.metrics.close()
	var errs []error
	for _, r := range s.reps {
		if err := r.s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) check(op, key string) error {
	return s.life.Check(op, key)
}

// Replicas returns the replica stores, in the order given to New.
func (s *Store) Replicas() []blob.Store {
	out := make([]blob.Store, len(s.reps))
	for i, r := range s.reps {
		out[i] = r.s
	}
	return out
}

// W returns the write quorum (W as given, raised to a majority).
func (s *Store) W() int { return s.w }

// newToken returns a version token later than every token this process issued
// and than after (a token the new version replaces). Tokens are fixed width,
// so they order as strings: 16 hex digits of Unix nanoseconds, then random.
func (s *Store) newToken(after string) string {
	floor := tokenTime(after)
	for {
		last := s.clock.Load()
		t := max(time.Now().UnixNano(), last+1, floor+1)
		if s.clock.CompareAndSwap(last, t) {
			var b [4]byte
			rand.Read(b[:])
			return fmt.Sprintf("%016x%s", uint64(t), hex.EncodeToString(b[:]))
		}
	}
}

func tokenTime(tok string) int64 {
	if len(tok) < 16 {
		return 0
	}
	v, err := strconv.ParseUint(tok[:16], 16, 64)
	if err != nil {
		return 0
	}
	return int64(v)
}

// setFloor records that this process acknowledged a write of key at
// ballot acc that some replica may still lack.
func (s *Store) setFloor(key, acc string) {
	s.mu.Lock()
	s.floors[key] = max(s.floors[key], acc)
	s.mu.Unlock()
}

// clearFloor forgets the floor of key if it is still acc: every replica
// holds that write (or a later one).
func (s *Store) clearFloor(key, acc string) {
	s.mu.Lock()
	if f, ok := s.floors[key]; ok && f <= acc {
		delete(s.floors, key)
	}
	s.mu.Unlock()
}

// noteCorrupt records that replica r's bytes of key failed their checksum:
// reads and settling skip it and repair rewrites it.
func (s *Store) noteCorrupt(key string, r *replica) {
	s.mu.Lock()
	if s.corrupt[key] == nil {
		s.corrupt[key] = map[int]bool{}
	}
	fresh := !s.corrupt[key][r.idx]
	s.corrupt[key][r.idx] = true
	s.mu.Unlock()
	if fresh {
		s.stats.damaged.Add(1)
	}
	s.rq.add(key)
}

func (s *Store) isCorrupt(key string, r *replica) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.corrupt[key][r.idx]
}

func (s *Store) clearCorrupt(key string, r *replica) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.corrupt[key], r.idx)
	if len(s.corrupt[key]) == 0 {
		delete(s.corrupt, key)
	}
}

func (s *Store) hasFloor(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.floors[key]
	return ok
}
