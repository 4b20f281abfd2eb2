package tiered_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// statGatedQuorum is a quorum (it still retires) whose first Stat of key, once
// armed, waits for release.
type statGatedQuorum struct {
	quorumHot
	mu      sync.Mutex
	key     string
	hit     chan struct{}
	release chan struct{}
}

func (g *statGatedQuorum) arm(key string) (hit, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.key, g.hit, g.release = key, make(chan struct{}), make(chan struct{})
	return g.hit, g.release
}

func (g *statGatedQuorum) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	g.mu.Lock()
	var hit, release chan struct{}
	if g.hit != nil && key == g.key {
		hit, release, g.hit = g.hit, g.release, nil
	}
	g.mu.Unlock()
	if hit != nil {
		close(hit)
		<-release
	}
	return g.quorumHot.Stat(ctx, key)
}

func (*statGatedQuorum) Close() error { return nil }

// TestListDuringFirstPackOverAQuorum lists a prefix while the pack that
// first holds one of its keys is committed by this Store's compactor. Over
// a quorum, a listing sets aside the hot copies of versions the pack log
// knows (filterStale) and relies on what packs serve instead: the keys packs
// serve must be read no earlier than the catalog that judged hot's copies
// stale, or a key in hot is dropped from both. (adapters/objstore's
// acceptance test over tiered with after=0 saw "id1/obj_3.some" missing from
// a listing of "id1/".)
func TestListDuringFirstPackOverAQuorum(t *testing.T) {
	rs := memReplicas(t, 3)
	_, cold := memPair(t)
	hot := &statGatedQuorum{quorumHot: newQuorum(t, rs).(quorumHot)}
	s, err := tiered.New(hot, nopClose{cold}, tiered.Options{
		After: time.Nanosecond, Manual: true, Concurrency: 1, PackMaxObjects: 100,
		MoveTimeout: 500 * time.Millisecond, MaxClockSkew: time.Millisecond,
		LeaseStore: leaseStoreFor(t, cold), Owner: "test-compactor",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := ctxT(t)

	mustPut(t, s, "p/a", "a")
	if res := s.CompactOnce(ctx); res.Err != nil || s.Stats().Packs != 1 {
		t.Fatalf("first pass: %+v, %d packs", res, s.Stats().Packs)
	}
	mustPut(t, s, "p/b", "b") // in hot only: no pack holds it yet

	// The listing lists hot (p/a, p/b) and the packs (p/a), then Stats
	// p/a, which a pack holds: it waits there while a pass packs p/b.
	hit, release := hot.arm("p/a")
	type listed struct {
		keys []string
		err  error
	}
	done := make(chan listed, 1)
	go func() {
		var l listed
		for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "p/"}) {
			if err != nil {
				l.err = err
				break
			}
			l.keys = append(l.keys, o.Key)
		}
		done <- l
	}()
	select {
	case <-hit:
	case <-time.After(10 * time.Second):
		t.Fatal("the listing never asked hot about p/a")
	}
	passed := make(chan tiered.PassResult, 1)
	go func() { passed <- s.CompactOnce(ctx) }()
	for s.Stats().Packs < 2 {
		select {
		case res := <-passed:
			t.Fatalf("second pass ended without a pack: %+v", res)
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	l := <-done
	<-passed
	if l.err != nil {
		t.Fatal(l.err)
	}
	if want := []string{"p/a", "p/b"}; !slices.Equal(l.keys, want) {
		t.Errorf("listing of p/ made while p/b was first packed: %q, want %q", l.keys, want)
	}
	var keys []string
	for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "p/"}) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	if want := []string{"p/a", "p/b"}; !slices.Equal(keys, want) {
		t.Errorf("listing of p/ after the pass: %q, want %q", keys, want)
	}
}

// TestListWhilePackingStress is the acceptance test's pattern without
// gates: keys are written under a fresh prefix while the background
// compactor packs everything at once (After of a nanosecond) over a quorum,
// and the prefix is listed over and over meanwhile; every listing must show
// every key.
func TestListWhilePackingStress(t *testing.T) {
	rs := memReplicas(t, 3)
	_, cold := memPair(t)
	s, err := tiered.New(newQuorum(t, rs), nopClose{cold}, tiered.Options{
		After: time.Nanosecond, PackMaxObjects: 100,
		MoveTimeout: 200 * time.Millisecond, MaxClockSkew: time.Millisecond, LeaseDuration: time.Second,
		LeaseStore: leaseStoreFor(t, cold),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := ctxT(t)
	bad, lists := 0, 0
	for round := range 30 {
		var want []string
		for i := range 4 {
			k := fmt.Sprintf("r%04d/obj_%d", round, i)
			mustPut(t, s, k, k)
			want = append(want, k)
		}
		// Listed over and over until two more packs are written: the
		// first that holds these keys is committed meanwhile.
		packs := s.Stats().Packs
		for i := 0; s.Stats().Packs < packs+2; i++ {
			if i > 100000 {
				t.Fatalf("round %d: the compactor wrote no pack in %d listings: %+v", round, i, s.Stats())
			}
			var got []string
			for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: fmt.Sprintf("r%04d/", round), Delimiter: "/"}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, o.Key)
			}
			lists++
			if !slices.Equal(got, want) {
				bad++
				if bad <= 5 {
					t.Errorf("round %d: listed %q, want %q", round, got, want)
				}
			}
		}
	}
	t.Logf("%d listings, %d wrong", lists, bad)
}

// memReplicas returns n mem stores to stand for a quorum's replicas.
func memReplicas(t *testing.T, n int) []blob.Store {
	var rs []blob.Store
	for range n {
		m, _ := memPair(t)
		rs = append(rs, m)
	}
	return rs
}
