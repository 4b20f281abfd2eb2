package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Creator serves blob.Create from pools of writers prewarmed on any store
// (natively where it is a blob.Prewarmer, such as a quorum of zonal buckets):
// a Create under a prefix takes a writer whose object already exists, so its
// Write and Close cost one data round trip. Everything else passes through to
// the wrapped Store.
type Creator struct {
	blob.Store
	opts CreatorOptions

	ctx    context.Context // the lifetime of prewarmed writers
	cancel context.CancelFunc
	life   driver.Lifecycle

	mu      sync.Mutex
	pools   map[string]*Pool[*prewarmed]
	out     map[*pooledWriter]struct{} // handed out, not yet closing
	closing sync.WaitGroup             // pooled writers in Close
}

// CreatorOptions configure a Creator. InFlightAge (MaxItemAge +
// WriteTimeout + ClockSkew) must be below GraceWindow (the orphan
// reconciler's), or a prewarmed object could be reclaimed between its write
// and its commit.
//
// The bound holds from the moment a pooled name is made to the end of its
// commit, however long the prewarm and the commit take: a name is made when
// its prewarm starts, a pooled writer is handed out only while its name is
// younger than MaxItemAge (a prewarm that takes longer is discarded, and the
// Create goes inline), and a commit that has not ended WriteTimeout after the
// hand-out is aborted, its object deleted and Close fails.
//
// Stores that pool their Creates (gcsrapid) embed CreatorOptions, so that
// these settings have one name and one default wherever they appear. The
// zero value of each field means its default.
type CreatorOptions struct {
	// Capacity bounds each prefix's pool (DefaultCapacity).
	Capacity int
	// MinIdle spares are kept ready when nothing drains a pool
	// (DefaultMinIdle, or Capacity if that is less).
	MinIdle int
	// LoadConcurrency bounds each pool's background prewarms
	// (DefaultLoadConcurrency).
	LoadConcurrency int
	// MaxItemAge: a pooled writer whose name is older than this is
	// discarded, never handed out (DefaultMaxItemAge).
	MaxItemAge time.Duration
	// WriteTimeout bounds the time from a hand-out to the end of its commit
	// (DefaultWriteTimeout).
	WriteTimeout time.Duration
	// GraceWindow is the orphan reconciler's (DefaultGraceWindow).
	GraceWindow time.Duration
	// ClockSkew is the largest difference between the clocks of the
	// processes that pool under the same prefixes, the service's and the
	// reclaimer's (DefaultClockSkew, or half of what GraceWindow leaves
	// above MaxItemAge + WriteTimeout if that is less).
	ClockSkew time.Duration
	// MaxPools bounds the prefixes with a pool; Creates under further
	// prefixes create inline (DefaultMaxPools).
	MaxPools int
}

// Defaults of CreatorOptions.
const (
	DefaultCapacity        = 64
	DefaultMinIdle         = 2
	DefaultLoadConcurrency = 16
	DefaultMaxItemAge      = time.Minute
	DefaultWriteTimeout    = 30 * time.Second
	DefaultGraceWindow     = 10 * time.Minute
	DefaultClockSkew       = 30 * time.Second
	DefaultMaxPools        = 16
)

// WithDefaults returns o with each zero field set to its default.
func (o CreatorOptions) WithDefaults() CreatorOptions {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Capacity, DefaultCapacity)
	def(&o.MinIdle, min(DefaultMinIdle, max(o.Capacity, 1)))
	def(&o.LoadConcurrency, DefaultLoadConcurrency)
	def(&o.MaxPools, DefaultMaxPools)
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&o.MaxItemAge, DefaultMaxItemAge}, {&o.WriteTimeout, DefaultWriteTimeout}, {&o.GraceWindow, DefaultGraceWindow}} {
		if *d.v == 0 {
			*d.v = d.d
		}
	}
	if margin := o.GraceWindow - o.MaxItemAge - o.WriteTimeout; o.ClockSkew == 0 && margin > 0 {
		o.ClockSkew = min(DefaultClockSkew, margin/2)
	}
	return o
}

// InFlightAge is the age past which no pooled write can still commit to
// its object, on any clock within ClockSkew: a name is handed out within
// MaxItemAge of being made, and its commit ends within WriteTimeout of the
// hand-out. Whatever deletes unwritten pooled objects (gcsrapid's sweep, the
// orphan reconciler) waits at least this long, and GraceWindow must exceed
// it (CheckGrace).
func (o CreatorOptions) InFlightAge() time.Duration {
	return o.MaxItemAge + o.WriteTimeout + o.ClockSkew
}

// CheckGrace reports whether grace leaves room for a pooled write in
// flight: it must exceed maxItemAge + writeTimeout + clockSkew (see
// InFlightAge). The error names the four values with their URL parameters.
func CheckGrace(maxItemAge, writeTimeout, clockSkew, grace time.Duration) error {
	if maxItemAge+writeTimeout+clockSkew < grace {
		return nil
	}
	return fmt.Errorf("max_item_age (%v) + write_timeout (%v) + clock_skew (%v) must be below grace_window (%v): "+
		"a pooled object could be reclaimed as an orphan between its write and its commit", maxItemAge, writeTimeout, clockSkew, grace)
}

// OptionsFromQuery reads the pool parameters of a store URL (pool_size,
// pool_min_idle, load_concurrency, max_item_age, write_timeout,
// grace_window, clock_skew, max_pools), as gcsrapid:// and quorum:// take them; an
// absent one is zero (its default).
func OptionsFromQuery(q *driver.Query) CreatorOptions {
	return CreatorOptions{
		Capacity:        q.Int("pool_size", 0),
		MinIdle:         q.Int("pool_min_idle", 0),
		LoadConcurrency: q.Int("load_concurrency", 0),
		MaxItemAge:      q.Duration("max_item_age", 0),
		WriteTimeout:    q.Duration("write_timeout", 0),
		GraceWindow:     q.Duration("grace_window", 0),
		ClockSkew:       q.Duration("clock_skew", 0),
		MaxPools:        q.Int("max_pools", 0),
	}
}

// Validate reports options, with their defaults applied, that are malformed
// or could lose data.
func (o CreatorOptions) Validate() error {
	switch {
	case o.Capacity < 0 || o.MinIdle < 0 || o.LoadConcurrency < 0 || o.MaxPools < 0 ||
		o.MaxItemAge < 0 || o.WriteTimeout < 0 || o.GraceWindow < 0 || o.ClockSkew < 0:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "pool: counts and durations must not be negative")
	case o.MinIdle > o.Capacity:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "pool: MinIdle %d exceeds Capacity %d", o.MinIdle, o.Capacity)
	}
	if err := CheckGrace(o.MaxItemAge, o.WriteTimeout, o.ClockSkew, o.GraceWindow); err != nil {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "pool: %v", err)
	}
	return nil
}

var _ blob.Creator = (*Creator)(nil)

// NewCreator wraps s. Closing the Creator discards its pools, then closes s.
func NewCreator(s blob.Store, opts CreatorOptions) (*Creator, error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Creator{Store: s, opts: opts, ctx: ctx, cancel: cancel,
		pools: map[string]*Pool[*prewarmed]{}, out: map[*pooledWriter]struct{}{}}, nil
}

// prewarmed is a pooled writer and what it takes to abandon it.
type prewarmed struct {
	key    string
	w      blob.Writer
	cancel context.CancelFunc // abandons w: nothing more is committed
}

func (c *Creator) load(prefix string) func(context.Context) (*prewarmed, error) {
	return func(ctx context.Context) (*prewarmed, error) {
		key := blob.NewName(prefix)
		// The writer outlives this load: its context is the Creator's.
		wctx, cancel := context.WithCancel(c.ctx)
		stop := context.AfterFunc(ctx, cancel)
		w, err := blob.Prewarm(wctx, c.Store, key, nil)
		if err == nil && stop() {
			return &prewarmed{key: key, w: w, cancel: cancel}, nil
		}
		cancel()
		// The prewarm failed, perhaps after the store had created the
		// object, or Close stopped waiting for it (ctx ended; Close does not
		// cancel prewarms before, as a create cancelled in flight can land
		// after this undo): undo it with a context of its own.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer dcancel()
		if err == nil {
			c.discard(dctx, &prewarmed{key: key, w: w, cancel: cancel}, DiscardShutdown)
			return nil, ctx.Err()
		}
		if !errors.Is(err, blob.ErrExists) { // an existing object is not ours
			c.Store.Delete(dctx, key, nil)
		}
		return nil, err
	}
}

// discard abandons a writer never handed out and deletes what prewarming
// created (nothing, on stores that create only at Close).
func (c *Creator) discard(ctx context.Context, p *prewarmed, _ DiscardReason) {
	p.cancel()
	p.w.Close()
	c.Store.Delete(ctx, p.key, nil)
}

// Create implements blob.Creator. Writes with attributes (which must be set
// when an object is created) and prefixes beyond MaxPools create inline.
func (c *Creator) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if err := c.life.CheckOpen(driver.OpCreate, prefix); err != nil {
		return "", nil, err
	}
	if hasAttributes(opts) {
		return blob.CreateInline(ctx, c.Store, prefix, opts)
	}
	p := c.poolFor(prefix)
	if p == nil {
		return blob.CreateInline(ctx, c.Store, prefix, opts)
	}
	item, err := p.Get(ctx)
	switch {
	case errors.Is(err, ErrClosed):
		return "", nil, driver.ClosedError(driver.OpCreate, prefix)
	case err != nil && ctx.Err() != nil:
		return "", nil, err
	case err != nil:
		// The caller's own prewarm failed, or took longer than MaxItemAge
		// (ErrStale: none can be handed out safely): create inline, as a
		// store without a pool would.
		return blob.CreateInline(ctx, c.Store, prefix, opts)
	}
	// The commit must end within WriteTimeout of the hand-out: past it, the
	// writer's context ends, which aborts a commit still running.
	w := &pooledWriter{c: c, ctx: ctx, item: item, expiry: time.AfterFunc(c.opts.WriteTimeout, item.cancel)}
	c.mu.Lock()
	if c.pools == nil {
		c.mu.Unlock()
		w.expiry.Stop()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		c.discard(dctx, item, DiscardShutdown)
		return "", nil, driver.ClosedError(driver.OpCreate, prefix)
	}
	c.out[w] = struct{}{}
	c.mu.Unlock()
	return item.key, w, nil
}

func hasAttributes(o *blob.WriterOptions) bool {
	return o != nil && (o.ContentType != "" || o.CacheControl != "" || o.ContentDisposition != "" ||
		o.ContentEncoding != "" || o.ContentLanguage != "" || len(o.Metadata) > 0 ||
		len(o.ContentMD5) > 0 || o.If.GenerationMatch() != "")
}

func (c *Creator) poolFor(prefix string) *Pool[*prewarmed] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pools == nil {
		return nil
	}
	if p := c.pools[prefix]; p != nil {
		return p
	}
	if len(c.pools) >= c.opts.MaxPools {
		return nil
	}
	p, err := New(Options[*prewarmed]{
		Load: c.load(prefix), Discard: c.discard,
		MaxItemAge: c.opts.MaxItemAge, Capacity: c.opts.Capacity, MinIdle: c.opts.MinIdle,
		LoadConcurrency: c.opts.LoadConcurrency,
	})
	if err != nil {
		return nil
	}
	c.pools[prefix] = p
	return p
}

// Prefixes returns the prefixes that have a pool.
func (c *Creator) Prefixes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pools))
	for k := range c.pools {
		out = append(out, k)
	}
	return out
}

// Stats returns each prefix's pool counters.
func (c *Creator) Stats() map[string]Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]Stats, len(c.pools))
	for k, p := range c.pools {
		out[k] = p.Stats()
	}
	return out
}

// Close discards every pooled writer (deleting their objects), including
// writers handed out and never closed; lets prewarms in flight finish, then
// deletes what they made; waits for pooled writers being closed; then closes
// the wrapped store. It waits at most a minute for the prewarms and discards:
// a prewarm still running then is cancelled, and an object it was creating may
// be left, unwritten, for the orphan reconciler.
func (c *Creator) Close() error {
	if !c.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	c.mu.Lock()
	pools, out := c.pools, c.out
	c.pools, c.out = nil, nil
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range pools {
		wg.Go(func() { p.Close(ctx) })
	}
	for w := range out {
		w.expiry.Stop()
		wg.Go(func() { c.discard(ctx, w.item, DiscardShutdown) })
	}
	wg.Wait()
	c.closing.Wait()
	c.cancel()
	return c.Store.Close()
}

// pooledWriter is a handed-out prewarmed writer: the caller's context governs
// it, and its commit must end within WriteTimeout of the hand-out.
type pooledWriter struct {
	c      *Creator
	ctx    context.Context
	item   *prewarmed
	expiry *time.Timer // ends the item's context at the hand-out's WriteTimeout
	done   bool
}

func (w *pooledWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, driver.WrapError(driver.OpWrite, w.item.key, err, nil)
	}
	return w.item.w.Write(p)
}

// claim takes the writer back from the Creator's list of writers to undo at
// Close; false means Close has undone it already.
func (w *pooledWriter) claim() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if _, ok := w.c.out[w]; !ok {
		return false
	}
	delete(w.c.out, w)
	w.c.closing.Add(1)
	return true
}

func (w *pooledWriter) Close() error {
	if w.done {
		return driver.ClosedError(driver.OpWrite, w.item.key)
	}
	w.done = true
	if !w.claim() {
		return driver.ClosedError(driver.OpWrite, w.item.key)
	}
	defer w.c.closing.Done()
	var err error
	if err = w.ctx.Err(); err != nil {
		err = driver.WrapError(driver.OpWrite, w.item.key, err, nil)
	} else {
		err = w.item.w.Close()
		// A commit that ended after the deadline may have been cut short,
		// or may have committed too late to be safe from the reconciler.
		if !w.expiry.Stop() {
			err = blob.Errorf(driver.OpWrite, w.item.key, nil, "pool: the commit did not end within WriteTimeout %v of the hand-out: the object may be reclaimed as an orphan (%v)",
				w.c.opts.WriteTimeout, err)
		} else if err == nil {
			w.item.cancel()
			return nil
		}
	}
	w.expiry.Stop()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
	defer cancel()
	w.c.discard(ctx, w.item, "abandoned")
	return err
}

// WrittenGeneration implements blob.GenerationReporter: the pooled
// writer's, once it committed.
func (w *pooledWriter) WrittenGeneration() (string, bool) { return blob.WrittenGeneration(w.item.w) }
