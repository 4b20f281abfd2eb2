package pool_test

import (
	"context"
	"errors"
	"fmt"
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
}

// slowPrewarmer is a Prewarmer over a memory store that behaves like a zonal
// bucket: Prewarm creates the object empty at once, then takes prewarm to
// answer (the flush); the writer's Close takes commit, honouring its context.
// With hold set, a prewarm waits for its context to end after creating the
// object, then fails with the context's error, or, with ignoreCancel, reports
// success anyway (a flush that completed as the pool closed).
type slowPrewarmer struct {
	blob.Store
	prewarm, commit time.Duration
	hold            atomic.Bool
	ignoreCancel    bool
	held            atomic.Int64
}

func (s *slowPrewarmer) Prewarm(ctx context.Context, key string, _ *blob.WriterOptions) (blob.Writer, error) {
	if err := blob.Put(context.WithoutCancel(ctx), s.Store, key, nil, &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		return nil, err
	}
	if s.hold.Load() {
		s.held.Add(1)
		<-ctx.Done()
		if !s.ignoreCancel {
			return nil, ctx.Err()
		}
	} else {
		time.Sleep(s.prewarm)
	}
	return &slowWriter{s: s, ctx: ctx, key: key}, nil
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
// closed, and prewarms in flight, whether they fail with Close's
// cancellation after creating their object or succeed as the pool closes.
func TestCreatorCloseLeavesNothing(t *testing.T) {
	for _, ignoreCancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("prewarm-succeeds-at-close=%v", ignoreCancel), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				sp := &slowPrewarmer{prewarm: 10 * time.Millisecond, ignoreCancel: ignoreCancel}
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
				if err := c.Close(); err != nil {
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
