package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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
	closed atomic.Bool

	mu    sync.Mutex
	pools map[string]*Pool[*prewarmed]
}

// CreatorOptions configure a Creator. MaxItemAge + WriteTimeout must be below
// GraceWindow (the orphan reconciler's), or a prewarmed object could be
// reclaimed between its write and its commit.
type CreatorOptions struct {
	Capacity        int           // per prefix; default 64
	MinIdle         int           // default 2
	LoadConcurrency int           // default 16
	MaxItemAge      time.Duration // default 1m
	WriteTimeout    time.Duration // default 30s
	GraceWindow     time.Duration // default 10m
	MaxPools        int           // prefixes with a pool; default 16
}

var _ blob.Creator = (*Creator)(nil)

// NewCreator wraps s. Closing the Creator discards its pools, then closes s.
func NewCreator(s blob.Store, opts CreatorOptions) (*Creator, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&opts.Capacity, 64)
	def(&opts.MinIdle, 2)
	def(&opts.LoadConcurrency, 16)
	def(&opts.MaxPools, 16)
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&opts.MaxItemAge, time.Minute}, {&opts.WriteTimeout, 30 * time.Second}, {&opts.GraceWindow, 10 * time.Minute}} {
		if *d.v == 0 {
			*d.v = d.d
		}
	}
	if opts.MaxItemAge+opts.WriteTimeout >= opts.GraceWindow {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument,
			"pool: MaxItemAge (%v) + WriteTimeout (%v) must be below GraceWindow (%v): a prewarmed object could be reclaimed as an orphan between its write and its commit",
			opts.MaxItemAge, opts.WriteTimeout, opts.GraceWindow)
	}
	if opts.MinIdle > opts.Capacity {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "pool: MinIdle %d exceeds Capacity %d", opts.MinIdle, opts.Capacity)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Creator{Store: s, opts: opts, ctx: ctx, cancel: cancel, pools: map[string]*Pool[*prewarmed]{}}, nil
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
		if !stop() || err != nil {
			cancel()
			if err == nil {
				err = ctx.Err()
			}
			return nil, err
		}
		return &prewarmed{key: key, w: w, cancel: cancel}, nil
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
	if c.closed.Load() {
		return "", nil, &blob.Error{Op: "create", Key: prefix, Kind: blob.ErrClosed}
	}
	if hasAttributes(opts) {
		return blob.CreateInline(ctx, c.Store, prefix, opts)
	}
	p := c.poolFor(prefix)
	if p == nil {
		return blob.CreateInline(ctx, c.Store, prefix, opts)
	}
	item, err := p.Get(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			err = &blob.Error{Op: "create", Key: prefix, Kind: blob.ErrClosed}
		}
		return "", nil, err
	}
	return item.key, &pooledWriter{c: c, ctx: ctx, item: item, handedOut: time.Now()}, nil
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

// Close discards every pooled writer (deleting their objects), then closes
// the wrapped store.
func (c *Creator) Close() error {
	if c.closed.Swap(true) {
		return &blob.Error{Op: "close", Kind: blob.ErrClosed}
	}
	c.mu.Lock()
	pools := c.pools
	c.pools = nil
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range pools {
		p.Close(ctx)
	}
	c.cancel()
	return c.Store.Close()
}

// pooledWriter is a handed-out prewarmed writer: the caller's context governs
// it, and it must close within WriteTimeout of the hand-out.
type pooledWriter struct {
	c         *Creator
	ctx       context.Context
	item      *prewarmed
	handedOut time.Time
	done      bool
}

func (w *pooledWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, driver.WrapError("write", w.item.key, err, nil)
	}
	return w.item.w.Write(p)
}

func (w *pooledWriter) Close() error {
	if w.done {
		return &blob.Error{Op: "write", Key: w.item.key, Kind: blob.ErrClosed}
	}
	w.done = true
	var err error
	switch {
	case w.ctx.Err() != nil:
		err = driver.WrapError("write", w.item.key, w.ctx.Err(), nil)
	case time.Since(w.handedOut) > w.c.opts.WriteTimeout:
		err = blob.Errorf("write", w.item.key, nil, "pool: closed %v after hand-out, beyond WriteTimeout %v: the object may already be reclaimed as an orphan",
			time.Since(w.handedOut).Round(time.Millisecond), w.c.opts.WriteTimeout)
	default:
		err = w.item.w.Close()
		if err == nil {
			w.item.cancel()
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
	defer cancel()
	w.c.discard(ctx, w.item, "abandoned")
	return err
}
