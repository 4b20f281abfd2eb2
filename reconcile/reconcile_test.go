package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/reconcile"
	"github.com/zonalblob/zonalblob/tiered"
)

// nameAt makes a name as blob.NewName would have at t.
func nameAt(prefix string, t time.Time, n int) string {
	return fmt.Sprintf("%s%s-%016x", prefix, t.UTC().Format("20060102T150405.000000000Z"), n)
}

func put(t *testing.T, s blob.Store, key string) {
	t.Helper()
	if err := blob.Put(context.Background(), s, key, []byte(key), nil); err != nil {
		t.Fatal(err)
	}
}

func keys(t *testing.T, s blob.Store, prefix string) []string {
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

func liveSet(live ...string) func(context.Context, string) (bool, error) {
	return func(_ context.Context, k string) (bool, error) { return slices.Contains(live, k), nil }
}

func TestRefusesUnsafeConfiguration(t *testing.T) {
	s := testkit.Mem(t)
	ok := reconcile.Options{Prefix: "p/", GraceWindow: 10 * time.Minute, MaxItemAge: time.Minute, WriteTimeout: 30 * time.Second, IsLive: liveSet()}
	if _, err := reconcile.New(s, ok); err != nil {
		t.Fatalf("gcsrapid's defaults refused: %v", err)
	}
	for name, mod := range map[string]func(*reconcile.Options){
		"window equal to age+timeout":   func(o *reconcile.Options) { o.GraceWindow = 90 * time.Second },
		"window below age+timeout":      func(o *reconcile.Options) { o.GraceWindow = time.Minute },
		"clock skew eats the margin":    func(o *reconcile.Options) { o.ClockSkew = 9 * time.Minute },
		"no grace window":               func(o *reconcile.Options) { o.GraceWindow = 0; o.MaxItemAge = 0; o.WriteTimeout = 0 },
		"no prefix":                     func(o *reconcile.Options) { o.Prefix = "" },
		"no liveness check":             func(o *reconcile.Options) { o.IsLive = nil },
		"negative write timeout cheats": func(o *reconcile.Options) { o.WriteTimeout = -time.Hour },
	} {
		o := ok
		mod(&o)
		_, err := reconcile.New(s, o)
		if !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: New = %v, want ErrInvalidArgument", name, err)
		}
	}
	o := ok
	o.GraceWindow = time.Minute
	if _, err := reconcile.New(s, o); !errors.Is(err, reconcile.ErrUnsafe) {
		t.Errorf("unsafe window: %v, want ErrUnsafe", err)
	}
}

// fixture writes, named relative to now: old and young orphans, old and young
// live objects, and an object without a name time. Tests run the reconciler's
// clock an hour ahead of the real time of the writes (the store's CreateTime),
// so the store says every object is old and names decide.
func fixture(t *testing.T, s blob.Store, now time.Time, grace time.Duration) (oldOrphans, all []string, isLive func(context.Context, string) (bool, error)) {
	oldOrphan1 := nameAt("p/", now.Add(-grace-time.Second), 1)
	oldOrphan2 := nameAt("p/", now.Add(-10*grace), 2)
	youngOrphan := nameAt("p/", now.Add(-grace+time.Second), 3)
	futureOrphan := nameAt("p/", now.Add(time.Hour), 4) // a skewed clock
	oldLive := nameAt("p/", now.Add(-10*grace), 5)
	youngLive := nameAt("p/", now, 6)
	unnamed := "p/plain-object"
	outside := nameAt("q/", now.Add(-10*grace), 7)
	all = []string{oldOrphan1, oldOrphan2, youngOrphan, futureOrphan, oldLive, youngLive, unnamed}
	for _, k := range append(all, outside) {
		put(t, s, k)
	}
	slices.Sort(all)
	oldOrphans = []string{oldOrphan1, oldOrphan2}
	slices.Sort(oldOrphans)
	return oldOrphans, all, liveSet(oldLive, youngLive)
}

// storeAge is how far the reconciler's clock runs ahead of the writes.
const storeAge = time.Hour

func TestDeletesOnlyOldOrphans(t *testing.T) {
	s := testkit.Mem(t)
	const grace = time.Minute
	now := time.Now().Add(storeAge)
	oldOrphans, all, isLive := fixture(t, s, now, grace)
	r, err := reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, IsLive: isLive, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Deleted)
	// The unnamed object is dated by its CreateTime, an hour old.
	wantDeleted := append(slices.Clone(oldOrphans), "p/plain-object")
	slices.Sort(wantDeleted)
	if !slices.Equal(rep.Deleted, wantDeleted) {
		t.Errorf("deleted %q, want %q", rep.Deleted, wantDeleted)
	}
	want := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return slices.Contains(wantDeleted, k) })
	if got := keys(t, s, "p/"); !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
	if got := keys(t, s, "q/"); len(got) != 1 {
		t.Errorf("an object outside the prefix was touched: %q", got)
	}
	// Young: the young orphan, the future name and the young live object (age
	// is checked before liveness).
	if rep.Scanned != len(all) || rep.Live != 1 || rep.Young != 3 {
		t.Errorf("report %+v: want %d scanned, 1 live, 3 young", rep, len(all))
	}

	// An hour later the young orphan's name is old too.
	later := now.Add(time.Hour)
	r, _ = reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, IsLive: isLive, Now: func() time.Time { return later }})
	rep, err = r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Deleted)
	want = []string{nameAt("p/", now.Add(-grace+time.Second), 3)}
	if !slices.Equal(rep.Deleted, want) {
		t.Errorf("an hour later deleted %q, want %q (not the object named an hour ahead)", rep.Deleted, want)
	}
}

// A key that merely ends like a Create name, written a moment ago by a plain
// Put, is young by the store's clock whatever its name says: the name alone
// never gets an object deleted.
func TestNameThatOnlyLooksLikeACreateNameIsNotTrusted(t *testing.T) {
	s := testkit.Mem(t)
	const grace = time.Minute
	now := time.Now()
	forged := nameAt("p/", now.Add(-24*time.Hour), 1)
	put(t, s, forged)
	never := func(context.Context, string) (bool, error) { return false, nil }
	r, err := reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, IsLive: never, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 0 || rep.Young != 1 {
		t.Errorf("report %+v: a key written just now was not kept as young", rep)
	}
	if ok, _ := blob.Exists(context.Background(), s, forged); !ok {
		t.Errorf("%s, written just now, was deleted for its name", forged)
	}
	// Once the store's time is past the window as well, it is an orphan.
	later := now.Add(grace + time.Second)
	r, _ = reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, IsLive: never, Now: func() time.Time { return later }})
	if rep, err := r.Run(context.Background()); err != nil || len(rep.Deleted) != 1 {
		t.Errorf("after the window: report %+v, %v; want the orphan deleted", rep, err)
	}
}

func TestDryRunDeletesNothing(t *testing.T) {
	s := testkit.Mem(t)
	const grace = time.Minute
	now := time.Now().Add(storeAge)
	oldOrphans, all, isLive := fixture(t, s, now, grace)
	oldOrphans = append(oldOrphans, "p/plain-object")
	slices.Sort(oldOrphans)
	r, err := reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, IsLive: isLive, DryRun: true, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Deleted)
	if !slices.Equal(rep.Deleted, oldOrphans) {
		t.Errorf("dry run lists %q, want %q", rep.Deleted, oldOrphans)
	}
	if got := keys(t, s, "p/"); !slices.Equal(got, all) {
		t.Errorf("dry run changed the store: %q, want %q", got, all)
	}
}

// Ages scattered around the boundary: every object inside the window stays,
// every orphan outside it goes.
func TestGraceWindowBoundary(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	s := testkit.Mem(t)
	const grace = 10 * time.Minute
	now := time.Now().Add(storeAge)
	inside, outside := map[string]bool{}, map[string]bool{}
	for i := range 200 {
		age := grace + time.Duration(rng.Int64N(int64(2*time.Second))) - time.Second
		k := nameAt("p/", now.Add(-age), i)
		put(t, s, k)
		if age <= grace {
			inside[k] = true
		} else {
			outside[k] = true
		}
	}
	r, err := reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: grace, MaxItemAge: time.Minute, WriteTimeout: 30 * time.Second,
		IsLive: liveSet(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rep.Deleted {
		if inside[k] {
			t.Errorf("deleted %s inside the grace window", k)
		}
	}
	left := keys(t, s, "p/")
	for _, k := range left {
		if outside[k] {
			t.Errorf("orphan %s outside the window kept", k)
		}
	}
	if len(left) != len(inside) {
		t.Errorf("%d objects left, want the %d inside the window", len(left), len(inside))
	}
}

// An object rewritten after it was examined is kept: the delete is
// conditional on the generation seen. A failing liveness check keeps too.
func TestChangedOrUncertainObjectsAreKept(t *testing.T) {
	s := testkit.Mem(t)
	now := time.Now().Add(storeAge)
	rewritten := nameAt("p/", now.Add(-time.Hour), 1)
	uncertain := nameAt("p/", now.Add(-time.Hour), 2)
	put(t, s, rewritten)
	put(t, s, uncertain)
	r, err := reconcile.New(s, reconcile.Options{Prefix: "p/", GraceWindow: time.Minute, Concurrency: 1, Now: func() time.Time { return now },
		IsLive: func(ctx context.Context, k string) (bool, error) {
			if k == uncertain {
				return false, errors.New("reference index unavailable")
			}
			// Someone reuses the object while the reconciler decides.
			return false, blob.Put(ctx, s, k, []byte("reused"), nil)
		}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Deleted) != 0 || rep.Changed != 1 || len(rep.Errors) != 1 {
		t.Errorf("report %+v: want nothing deleted, 1 changed, 1 error", rep)
	}
	if got := keys(t, s, "p/"); len(got) != 2 {
		t.Errorf("left %q, want both", got)
	}
}

// Over a tiered store an orphan already moved to cold is deleted from it.
func TestOrphansInBothTiers(t *testing.T) {
	hot, cold := testkit.Mem(t), testkit.Mem(t)
	ts, err := tiered.New(nopClose{hot}, nopClose{cold}, tiered.Options{After: time.Nanosecond, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	now := time.Now().Add(storeAge)
	movedOrphan := nameAt("p/", now.Add(-time.Hour), 1)
	put(t, ts, movedOrphan)
	if res := ts.CompactOnce(context.Background()); res.Moved != 1 {
		t.Fatalf("compaction %+v, want 1 moved", res)
	}
	hotOrphan := nameAt("p/", now.Add(-time.Hour), 2)
	put(t, ts, hotOrphan)
	r, err := reconcile.New(ts, reconcile.Options{Prefix: "p/", GraceWindow: time.Minute, IsLive: liveSet(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(context.Background())
	if err != nil || len(rep.Deleted) != 2 {
		t.Fatalf("report %+v, %v: want 2 deleted", rep, err)
	}
	// The moved orphan lived in a regional pack: its delete is a tombstone
	// in the tiered store's own log (outside the prefix), collected with the
	// pack by the compactor once no move can depend on them. The hot
	// orphan, old enough to be moving, was deleted by a grave in hot, which
	// the compactor retires once no move can be taking it. Nothing of
	// either orphan is left to read or list, in the tiered store or (after
	// that pass) under the prefix in either tier.
	later, err := tiered.New(testkit.AgedBy(hot, tiered.GraveHold(0, 0)+time.Minute), nopClose{cold}, tiered.Options{After: time.Nanosecond, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if res := later.CompactOnce(context.Background()); res.Failed != 0 {
		t.Fatalf("compaction %+v", res)
	}
	if got := append(keys(t, hot, "p/"), keys(t, cold, "p/")...); len(got) != 0 {
		t.Errorf("left in the tiers: %q", got)
	}
	if got := keys(t, ts, ""); len(got) != 0 {
		t.Errorf("the tiered store lists %q", got)
	}
	for _, k := range []string{movedOrphan, hotOrphan} {
		if _, err := ts.Stat(context.Background(), k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat(%q) after the reconciler deleted it: %v, want ErrNotFound", k, err)
		}
	}
}

type nopClose struct{ blob.Store }

func (nopClose) Close() error { return nil }
