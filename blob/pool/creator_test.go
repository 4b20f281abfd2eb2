package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/pool"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/reconcile"
)

func newCreator(ctx context.Context, t *testing.T, opts pool.CreatorOptions) *pool.Creator {
	t.Helper()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pool.NewCreator(s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The Creator must be invisible but for where Create's objects come from.
func TestCreatorConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newCreator(ctx, t, pool.CreatorOptions{Capacity: 8})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestCreatorServesFromThePoolAndCleansUp(t *testing.T) {
	synctest.Test(t, testCreatorServesFromThePoolAndCleansUp)
}

func testCreatorServesFromThePoolAndCleansUp(t *testing.T) {
	ctx := context.Background()
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	// Count prewarms reaching the store: the inner store is wrapped so
	// that its writes can be seen.
	f := fault.Wrap(mem, fault.Options{Seed: 1})
	c, err := pool.NewCreator(f, pool.CreatorOptions{Capacity: 4, MinIdle: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blob.CreateBytes(ctx, c, "p/", []byte("first"), nil); err != nil {
		t.Fatal(err)
	}
	// The pool fills its MinIdle spares in the background.
	time.Sleep(time.Second)
	synctest.Wait()
	if st := c.Stats()["p/"]; st.Ready < 2 {
		t.Fatalf("pool %+v: want the 2 MinIdle spares ready", st)
	}
	key, err := blob.CreateBytes(ctx, c, "p/", []byte("pooled"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Stats()["p/"]; st.Hits < 1 {
		t.Errorf("pool hits %d after a warm create", st.Hits)
	}
	if got, _ := blob.ReadAll(ctx, c, key); string(got) != "pooled" {
		t.Errorf("read %q", got)
	}
	// A canceled pooled write commits nothing.
	cctx, cancel := context.WithCancel(ctx)
	k2, w, err := blob.Create(cctx, c, "p/", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("never"))
	cancel()
	if err := w.Close(); err == nil {
		t.Error("Close after cancel succeeded")
	}
	if ok, _ := blob.Exists(ctx, c, k2); ok {
		t.Errorf("canceled pooled write left %s", k2)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := blob.Create(ctx, c, "p/", nil); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Create after Close = %v", err)
	}
}

func TestCreatorRefusesUnsafeAges(t *testing.T) {
	mem, _ := blob.Open(context.Background(), "mem://")
	defer mem.Close()
	_, err := pool.NewCreator(mem, pool.CreatorOptions{MaxItemAge: 9 * time.Minute, WriteTimeout: time.Minute, GraceWindow: 10 * time.Minute})
	if !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("NewCreator with MaxItemAge+WriteTimeout = GraceWindow: %v", err)
	}
	// The clocks' skew counts too: a reclaimer whose clock runs ahead sees
	// the object older than it is.
	_, err = pool.NewCreator(mem, pool.CreatorOptions{MaxItemAge: 8 * time.Minute, WriteTimeout: time.Minute, ClockSkew: time.Minute, GraceWindow: 10 * time.Minute})
	if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "clock_skew") {
		t.Errorf("NewCreator with MaxItemAge+WriteTimeout+ClockSkew = GraceWindow: %v", err)
	}
	// Unset, the skew is taken within what the window leaves.
	o := pool.CreatorOptions{MaxItemAge: 8 * time.Minute, WriteTimeout: time.Minute, GraceWindow: 10 * time.Minute}.WithDefaults()
	if o.ClockSkew != 30*time.Second || o.InFlightAge() != 9*time.Minute+30*time.Second || o.Validate() != nil {
		t.Errorf("defaults %+v: skew %v, in flight %v, %v; want 30s, 9m30s, valid", o, o.ClockSkew, o.InFlightAge(), o.Validate())
	}
	if o := (pool.CreatorOptions{MaxItemAge: 9 * time.Minute, WriteTimeout: 50 * time.Second, GraceWindow: 10 * time.Minute}).WithDefaults(); o.ClockSkew != 5*time.Second || o.Validate() != nil {
		t.Errorf("a 10s margin: skew %v, %v; want 5s (half the margin), valid", o.ClockSkew, o.Validate())
	}
}

// slowPrewarmer is a Prewarmer over a memory store that behaves like a zonal
// bucket: Prewarm creates the object empty at once, then takes prewarm to
// answer (the flush); the writer's Close takes commit, honouring its context.
//
// With hold set, a prewarm is in flight until release is closed: it creates
// its object at once and answers (the flush) when released, failing with
// failHeld or succeeding; with lateCreate the create itself is held, and lands
// when released even if the caller has given up (its context ended: it gets
// the context's error at once), as a create request that a service has
// received does when the client abandons it.
type slowPrewarmer struct {
	blob.Store
	prewarm, commit time.Duration
	hold            atomic.Bool
	release         chan struct{}
	failHeld        bool
	lateCreate      bool
	held, landed    atomic.Int64 // prewarms held; their creates that landed
}

func (s *slowPrewarmer) Prewarm(ctx context.Context, key string, _ *blob.WriterOptions) (blob.Writer, error) {
	create := func() error {
		return blob.Put(context.WithoutCancel(ctx), s.Store, key, nil, &blob.WriterOptions{If: blob.IfNotExist()})
	}
	if !s.hold.Load() {
		if err := create(); err != nil {
			return nil, err
		}
		time.Sleep(s.prewarm)
		return &slowWriter{s: s, ctx: ctx, key: key}, nil
	}
	s.held.Add(1)
	if !s.lateCreate {
		if err := create(); err != nil {
			return nil, err
		}
		s.landed.Add(1)
	}
	answer := make(chan error, 1)
	go func() {
		<-s.release
		var err error
		if s.lateCreate {
			if err = create(); err == nil {
				s.landed.Add(1)
			}
		}
		if err == nil && s.failHeld {
			err = errors.New("flush failed")
		}
		answer <- err
	}()
	select {
	case err := <-answer:
		if err != nil {
			return nil, err
		}
		return &slowWriter{s: s, ctx: ctx, key: key}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type slowWriter struct {
	s   *slowPrewarmer
	ctx context.Context
	key string
	buf []byte
}

func (w *slowWriter) Write(p []byte) (int, error) { w.buf = append(w.buf, p...); return len(p), nil }

func (w *slowWriter) Close() error {
	select {
	case <-time.After(w.s.commit):
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	return blob.Put(context.Background(), w.s.Store, w.key, w.buf, nil)
}

func newSlowCreator(t *testing.T, sp *slowPrewarmer, opts pool.CreatorOptions) (*pool.Creator, blob.Store) {
	t.Helper()
	mem, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	sp.Store = keepOpen{mem}
	t.Cleanup(func() { mem.Close() })
	c, err := pool.NewCreator(sp, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, mem
}

func listAll(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(context.Background(), s, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
	return out
}

// With prewarms slower than MaxItemAge, no write may be acknowledged under a
// name older than MaxItemAge + WriteTimeout: a reconciler pass with that
// grace window right after the acknowledgement must keep the object.
func TestCreatorAcknowledgesNothingTheReconcilerCanTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const age, timeout, grace = 100 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond
		sp := &slowPrewarmer{prewarm: 400 * time.Millisecond}
		c, mem := newSlowCreator(t, sp, pool.CreatorOptions{Capacity: 4, MinIdle: 2, MaxItemAge: age, WriteTimeout: timeout, GraceWindow: grace})
		r, err := reconcile.New(mem, reconcile.Options{Prefix: "log/", GraceWindow: grace, MaxItemAge: age, WriteTimeout: timeout,
			IsLive: func(context.Context, string) (bool, error) { return false, nil }})
		if err != nil {
			t.Fatal(err)
		}
		var acked []string
		for i := range 5 {
			key, err := blob.CreateBytes(ctx, c, "log/", fmt.Appendf(nil, "record %d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			born, ok := blob.NameTime(key)
			if !ok {
				t.Fatalf("%q is not a Create name", key)
			}
			// The bubble's clock: the acknowledgement came less than
			// MaxItemAge+WriteTimeout after the name was made.
			if ackedAt := time.Now(); !born.After(ackedAt.Add(-(age + timeout))) {
				t.Errorf("%s acknowledged at %v, its name made at %v: beyond MaxItemAge+WriteTimeout", key, ackedAt, born)
			}
			acked = append(acked, key)
			if _, err := r.Run(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, k := range acked {
			if ok, _ := blob.Exists(ctx, mem, k); !ok {
				t.Errorf("acknowledged %s was deleted by the reconciler", k)
			}
		}
		c.Close()
		synctest.Wait()
	})
}

// A commit still running WriteTimeout after the hand-out is aborted: Close
// fails and nothing is left under the name.
func TestCreatorBoundsTheCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sp := &slowPrewarmer{prewarm: time.Millisecond, commit: 400 * time.Millisecond}
		c, mem := newSlowCreator(t, sp, pool.CreatorOptions{Capacity: 4, MinIdle: 2, MaxItemAge: 100 * time.Millisecond,
			WriteTimeout: 100 * time.Millisecond, GraceWindow: 300 * time.Millisecond})
		key, err := blob.CreateBytes(ctx, c, "log/", []byte("late"), nil)
		if err == nil {
			t.Fatalf("a commit of 400ms with WriteTimeout 100ms was acknowledged as %s", key)
		}
		sp.commit = 10 * time.Millisecond
		ok, err := blob.CreateBytes(ctx, c, "log/", []byte("in time"), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		synctest.Wait()
		if got := listAll(t, mem, "log/"); len(got) != 1 || got[0] != ok {
			t.Errorf("left %q, want only %s", got, ok)
		}
	})
}

// Close undoes every object it made: spares, writers handed out and never
// closed, and prewarms in flight at Close, whether they succeed or fail once
// their object exists.
func TestCreatorCloseLeavesNothing(t *testing.T) {
	for _, failHeld := range []bool{false, true} {
		t.Run(fmt.Sprintf("prewarm-fails=%v", failHeld), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				sp := &slowPrewarmer{prewarm: 10 * time.Millisecond, release: make(chan struct{}), failHeld: failHeld}
				c, mem := newSlowCreator(t, sp, pool.CreatorOptions{Capacity: 8, MinIdle: 4})
				written, err := blob.CreateBytes(ctx, c, "log/", []byte("kept"), nil)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				sp.hold.Store(true)
				if _, _, err := blob.Create(ctx, c, "log/", nil); err != nil { // handed out, never closed
					t.Fatal(err)
				}
				synctest.Wait()
				if sp.held.Load() == 0 {
					t.Fatal("no prewarm in flight at Close: the test does not test what it says")
				}
				closed := closeInBackground(c)
				synctest.Wait()
				close(sp.release)
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if got := listAll(t, mem, "log/"); len(got) != 1 || got[0] != written {
					t.Errorf("after Close: %q, want only the written %s", got, written)
				}
			})
		})
	}
}

// A prewarm in flight at Close whose create the store has received but not
// yet applied leaves nothing. Had Close cancelled it, the prewarm would have
// returned at once and its undo run before the create landed, leaving an
// empty object that no one writes and no closed store sweeps. Close lets the
// create land, then deletes the object.
func TestCreatorCloseLeavesNoLateCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sp := &slowPrewarmer{release: make(chan struct{}), lateCreate: true}
		sp.hold.Store(true)
		c, mem := newSlowCreator(t, sp, pool.CreatorOptions{Capacity: 4, MinIdle: 2})
		created := make(chan error, 1)
		go func() {
			_, _, err := blob.Create(ctx, c, "log/", nil)
			created <- err
		}()
		synctest.Wait()
		held := sp.held.Load()
		if held == 0 {
			t.Fatal("no create in flight at Close: the test does not test what it says")
		}
		closed := closeInBackground(c)
		synctest.Wait()
		// Close has gone as far as it can go before the creates land.
		if n := sp.landed.Load(); n != 0 {
			t.Fatalf("%d creates landed before they were released", n)
		}
		close(sp.release)
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := <-created; !errors.Is(err, blob.ErrClosed) {
			t.Errorf("Create waiting at Close = %v, want ErrClosed", err)
		}
		if n := sp.landed.Load(); n != held {
			t.Errorf("%d of the %d creates in flight at Close landed", n, held)
		}
		if got := listAll(t, mem, ""); len(got) != 0 {
			t.Errorf("after Close, %d of the %d creates that landed after Close began are left: %q", len(got), held, got)
		}
	})
}

// closeInBackground starts c.Close and returns its result's channel.
func closeInBackground(c *pool.Creator) <-chan error {
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	return closed
}

// keepOpen leaves the memory store open when the Creator closes, so a test can
// look at what is left.
type keepOpen struct{ blob.Store }

func (keepOpen) Close() error { return nil }

// Close racing with Creates and commits: every object left is one whose
// write was acknowledged, and every acknowledged write is left.
func TestCreatorCloseDuringCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sp := &slowPrewarmer{prewarm: 3 * time.Millisecond, commit: time.Millisecond}
		c, mem := newSlowCreator(t, sp, pool.CreatorOptions{Capacity: 8, MinIdle: 4})
		var mu sync.Mutex
		acked := map[string]bool{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					key, err := blob.CreateBytes(ctx, c, "log/", fmt.Appendf(nil, "%d/%d", g, i), nil)
					if errors.Is(err, blob.ErrClosed) {
						return
					}
					if err == nil {
						mu.Lock()
						acked[key] = true
						mu.Unlock()
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		synctest.Wait()
		left := listAll(t, mem, "log/")
		for _, k := range left {
			if !acked[k] {
				t.Errorf("%s left after Close, never acknowledged", k)
			}
		}
		if len(left) != len(acked) || len(acked) == 0 {
			t.Errorf("%d objects left, %d acknowledged", len(left), len(acked))
		}
	})
}

// failingPrewarmer fails every prewarm, as a store refusing creates for a
// while does; ordinary writes still work.
type failingPrewarmer struct{ blob.Store }

func (failingPrewarmer) Prewarm(context.Context, string, *blob.WriterOptions) (blob.Writer, error) {
	return nil, errors.New("prewarm refused")
}

// A Create whose own prewarm fails is served inline, not failed.
func TestCreatorCreatesInlineWhenPrewarmsFail(t *testing.T) {
	ctx := context.Background()
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pool.NewCreator(failingPrewarmer{mem}, pool.CreatorOptions{Capacity: 4, MinIdle: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		key, err := blob.CreateBytes(ctx, c, "log/", fmt.Appendf(nil, "%d", i), nil)
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		if got, err := blob.ReadAll(ctx, c, key); err != nil || string(got) != fmt.Sprint(i) {
			t.Errorf("%s = %q, %v", key, got, err)
		}
	}
	if st := c.Stats()["log/"]; st.LoadErrors == 0 || st.Hits != 0 {
		t.Errorf("pool %+v: want load errors and no hits", st)
	}
}

// CreatorOptions' defaults and checks are the ones every pooling store
// embeds: a zero field is its default, MinIdle's at most Capacity.
func TestCreatorOptionsDefaultsAndChecks(t *testing.T) {
	d := pool.CreatorOptions{}.WithDefaults()
	if d.Capacity != pool.DefaultCapacity || d.MinIdle != pool.DefaultMinIdle || d.LoadConcurrency != pool.DefaultLoadConcurrency ||
		d.MaxItemAge != pool.DefaultMaxItemAge || d.WriteTimeout != pool.DefaultWriteTimeout ||
		d.GraceWindow != pool.DefaultGraceWindow || d.MaxPools != pool.DefaultMaxPools {
		t.Errorf("defaults = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	if one := (pool.CreatorOptions{Capacity: 1}).WithDefaults(); one.MinIdle != 1 || one.Validate() != nil {
		t.Errorf("Capacity 1: %+v, %v; want MinIdle 1 and valid", one, one.Validate())
	}
	for _, o := range []pool.CreatorOptions{
		{Capacity: 2, MinIdle: 3},
		{LoadConcurrency: -1},
		{WriteTimeout: -time.Second},
	} {
		if err := o.WithDefaults().Validate(); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
}
