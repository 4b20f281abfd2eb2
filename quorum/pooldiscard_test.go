package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// creatingPrewarmer creates the object when it prewarms, as gcsrapid does
// (an appendable object exists from the write stream's first message), and
// writes the data over it at Close. While hold is set, a prewarm's create
// is held until release, and lands then even if the prewarm was cancelled
// meanwhile: a create the store received but had not applied.
type creatingPrewarmer struct {
	blob.Store
	hold    bool
	release chan struct{}
	held    atomic.Int64
	landed  sync.WaitGroup
	refused atomic.Int64 // held creates that found the name taken
}

func (p *creatingPrewarmer) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	o := blob.WriterOptions{If: blob.IfNotExist()}
	if opts != nil {
		o = *opts
		o.If = blob.IfNotExist()
	}
	create := func() error { return blob.Put(context.WithoutCancel(ctx), p.Store, key, nil, &o) }
	if !p.hold {
		if err := create(); err != nil {
			return nil, err
		}
		return &overWriter{p: p, ctx: ctx, key: key, opts: opts}, nil
	}
	p.held.Add(1)
	p.landed.Add(1)
	answer := make(chan error, 1)
	go func() {
		defer p.landed.Done()
		<-p.release
		err := create()
		if errors.Is(err, blob.ErrExists) {
			p.refused.Add(1)
		}
		answer <- err
	}()
	select {
	case err := <-answer:
		if err != nil {
			return nil, err
		}
		return &overWriter{p: p, ctx: ctx, key: key, opts: opts}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close leaves the replica open, for the test to look at afterwards.
func (p *creatingPrewarmer) Close() error { return nil }

// overWriter writes its bytes over the prewarmed object at Close.
type overWriter struct {
	p    *creatingPrewarmer
	ctx  context.Context
	key  string
	opts *blob.WriterOptions
	buf  []byte
}

func (w *overWriter) Write(b []byte) (int, error) { w.buf = append(w.buf, b...); return len(b), nil }

func (w *overWriter) Close() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	var o blob.WriterOptions
	if w.opts != nil {
		o = *w.opts
		o.If = blob.Condition{}
	}
	return blob.Put(w.ctx, w.p.Store, w.key, w.buf, &o)
}

// TestPooledQuorumCloseLeavesNoLateCreate closes a pool of quorum writers
// while one replica's prewarm of a pooled name is held, its create landing
// only after the pool has discarded the writer and deleted the name. What
// remains must be the one acknowledged create: no replica may hold a value
// for another name, and a quorum opened afterwards lists and reads only it.
func TestPooledQuorumCloseLeavesNoLateCreate(t *testing.T) {
	ctx := context.Background()
	mems := testkit.Mems(t, 3)
	held := &creatingPrewarmer{Store: mems[2], hold: true, release: make(chan struct{})}
	reps := []blob.Store{&creatingPrewarmer{Store: mems[0]}, &creatingPrewarmer{Store: mems[1]}, held}
	o := testOptions()
	o.StragglerTimeout = time.Second
	q := newQuorum(t, reps, o)
	c, err := pool.NewCreator(q, pool.CreatorOptions{Capacity: 2, MinIdle: 1, LoadConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	key, err := blob.CreateBytes(ctx, c, "log/", []byte("acknowledged"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The pool loads a spare: its prewarm is ready on replicas 0 and 1,
	// and held on replica 2.
	for deadline := time.Now().Add(10 * time.Second); held.held.Load() < 2 || c.Stats()["log/"].Ready < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool's spare was never ready: %d held creates, stats %+v", held.held.Load(), c.Stats()["log/"])
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	// The discard's Delete has written (a placeholder or a tombstone)
	// before the held creates are let go.
	for deadline := time.Now().Add(10 * time.Second); !holdsHidden(t, mems); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool's discard never deleted the name it prewarmed")
		}
	}
	close(held.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	held.landed.Wait()

	// A quorum opened afterwards, reading by majority, sees the one
	// acknowledged create and nothing else.
	mctx := majority(ctx)
	fresh := newQuorum(t, memsAsIs(mems), testOptions())
	defer fresh.Close()
	var listed []string
	for obj, err := range blob.All(mctx, fresh, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, obj.Key)
	}
	if len(listed) != 1 || listed[0] != key {
		t.Errorf("a quorum opened afterwards lists %q, want only %q", listed, key)
	}
	if got, err := blob.ReadAll(mctx, fresh, key); err != nil || string(got) != "acknowledged" {
		t.Errorf("read %q: %q, %v", key, got, err)
	}
	names := map[string]bool{}
	for _, m := range mems {
		for obj, err := range blob.All(ctx, m, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names[obj.Key] = obj.Key != key
		}
	}
	for name, other := range names {
		if _, err := fresh.Stat(mctx, name); other && !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat of the discarded name %q: %v, want not found", name, err)
		}
	}
	// A replica may still hold what a prewarm made for a discarded name,
	// when the pool's delete reached the others first and the store closed
	// before its repair: anti-entropy finishes it.
	if left := valuesLeft(t, mems, key); len(left) > 0 {
		t.Logf("before anti-entropy: %q", left)
	}
	if _, err := fresh.AntiEntropy(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		left := valuesLeft(t, mems, key)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after anti-entropy, replicas still hold values no one wrote: %q", left)
		}
	}
	if held.refused.Load() == 0 {
		t.Logf("no held create found its name taken: each landed before the pool's delete reached its replica")
	}
}

// valuesLeft lists, for each replica, the names other than key for which it
// holds a value (not a tombstone or placeholder).
func valuesLeft(t *testing.T, mems []blob.Store, key string) []string {
	return replicaObjects(t, mems, func(name string, hidden bool) bool { return name != key && !hidden })
}

// holdsHidden reports whether a replica holds a tombstone or a placeholder.
func holdsHidden(t *testing.T, mems []blob.Store) bool {
	return len(replicaObjects(t, mems, func(_ string, hidden bool) bool { return hidden })) > 0
}

// replicaObjects lists, as "replica I: NAME", the replicas' objects for
// which keep is true (hidden: a tombstone or a placeholder).
func replicaObjects(t *testing.T, mems []blob.Store, keep func(name string, hidden bool) bool) []string {
	ctx := context.Background()
	var out []string
	for i, m := range mems {
		for obj, err := range blob.All(ctx, m, nil) {
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.Stat(ctx, obj.Key)
			if err == nil && keep(obj.Key, a.Metadata[quorum.StateKey] != "") {
				out = append(out, fmt.Sprintf("replica %d: %s", i, obj.Key))
			}
		}
	}
	return out
}

// memsAsIs is the replicas themselves, with a Close that leaves them open.
func memsAsIs(mems []blob.Store) []blob.Store {
	out := make([]blob.Store, len(mems))
	for i, m := range mems {
		out[i] = keepOpen{m}
	}
	return out
}

type keepOpen struct{ blob.Store }

func (keepOpen) Close() error { return nil }
