package tiered_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// rawCopies counts the replicas whose raw object under key is a value with
// bytes (not a tombstone, a placeholder or a tiered grave).
func rawCopies(t *testing.T, replicas []*fault.Store, key string) int {
	t.Helper()
	n := 0
	for _, r := range replicas {
		a, err := r.Stat(ctxT(t), key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case a.Metadata[quorum.StateKey] == "" && a.Size > 0: // not a grave either
			n++
		}
	}
	return n
}

// A pack move over a quorum removes its objects from the replicas with free
// conditional deletes, not a tombstone round, and a retirement can stop
// part way: here one replica is down. Its copy then lingers,
// and the quorum itself brings it back onto the others (a majority read
// that finds it on one replica settles it). After a Delete in another
// process (which buries that copy under a grave), no read, Stat, listing or create of any process may see it
// again: not while it lingers, not after the pack holding it is due for
// rewriting and its tombstone for collection, and not after the recovery
// that finally removes it; and the replicas end with no copy.
func TestRetirementLeftPartWay(t *testing.T) {
	var replicas []*fault.Store
	var rs []blob.Store
	for i := range 3 {
		m, _ := memPair(t)
		f := fault.Wrap(m, fault.Options{Seed: uint64(i + 1), Name: fmt.Sprint("zone", i)})
		replicas, rs = append(replicas, f), append(rs, nopClose{f})
	}
	_, cold := memPair(t)
	o := tiered.Options{PackMaxObjects: 10, MoveTimeout: 500 * time.Millisecond, MaxClockSkew: time.Millisecond}
	mover := manualWith(t, newQuorum(t, rs), cold, o)
	user := manualWith(t, newQuorum(t, rs), cold, o)
	ctx := ctxT(t)

	mustPut(t, user, "k", "v1")
	mustPut(t, user, "other", "kept")
	// Zone 2 is down from before the move until after the Delete. The
	// objects are older than the quorum's in-flight bound, as objects
	// older than After are in any deployment, so the pass retires them.
	time.Sleep(quorumInFlight)
	replicas[2].SetDown(true)
	mover.CompactOnce(ctx)
	st := mover.Stats()
	if st.Packs != 1 || st.Unretired != 2 || st.Retired != 4 {
		t.Fatalf("the pass: stats %+v, want 1 pack, 4 copies retired, 2 retirements left", st)
	}
	if b, err := blob.ReadAll(ctx, user, "k"); err != nil || string(b) != "v1" {
		t.Fatalf("read of the packed k: %q, %v", b, err)
	}
	replicas[2].SetDown(false)
	if n := rawCopies(t, replicas, "k"); n != 1 {
		t.Fatalf("%d replicas hold k after the retirement, want the one that was down", n)
	}
	// The quorum settles the lingering copy back onto a majority.
	direct, err := quorum.New(rs, quorum.Options{Consistency: quorum.ReadMajority, AntiEntropyInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if b, err := blob.ReadAll(ctx, direct, "k"); err != nil || string(b) != "v1" {
		t.Fatalf("the quorum's own read of the lingering copy: %q, %v", b, err)
	}
	if n := rawCopies(t, replicas, "k"); n < 2 {
		t.Fatalf("%d replicas hold k after the quorum settled it, want a majority", n)
	}
	// The Delete finds the settled copy in hot, a version packs hold: it
	// buries that copy, on condition of its generation.
	if b, err := blob.ReadAll(ctx, user, "k"); err != nil || string(b) != "v1" {
		t.Fatalf("read of k with the copy back: %q, %v", b, err)
	}
	if err := user.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}

	// A second Delete is tried last: it also removes the copy from hot.
	gone := func(when string, deleteAgain bool) {
		t.Helper()
		for name, s := range map[string]*tiered.Store{"mover": mover, "user": user} {
			if _, err := blob.ReadAll(ctx, s, "k"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: read by the %s: %v, want NotFound", when, name, err)
			}
			if _, err := s.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: Stat by the %s: %v, want NotFound", when, name, err)
			}
			if keys := listKeys(t, s); slices.Contains(keys, "k") || !slices.Contains(keys, "other") {
				t.Errorf("%s: the %s lists %q", when, name, keys)
			}
			if !deleteAgain {
				continue
			}
			if err := s.Delete(ctx, "k", nil); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: a second Delete by the %s: %v, want NotFound", when, name, err)
			}
		}
	}
	gone("after the Delete of the settled copy", false)

	// Replica deletes fail for a while, so recovery cannot remove the
	// copies. Long enough for the pack (all dead) to be due for rewriting
	// and the tombstone for collection: the marker keeps both while the
	// retirement is unconfirmed.
	var rules []fault.RuleID
	for _, r := range replicas {
		rules = append(rules, r.FailFrom(fault.OpDelete, 1, -1, errors.New("deletes refused")))
	}
	time.Sleep(o.MoveTimeout + quorumInFlight + time.Second)
	mover.CompactOnce(ctx)
	user.CompactOnce(ctx)
	gone("after maintenance while deletes fail", false)

	// The next passes after the in-flight bound retire the copies, and
	// confirm it.
	for i, r := range replicas {
		r.Remove(rules[i])
	}
	for range 3 {
		time.Sleep(o.MoveTimeout + quorumInFlight)
		mover.CompactOnce(ctx)
	}
	if n := rawCopies(t, replicas, "k"); n != 0 {
		t.Errorf("%d replicas still hold k after recovery", n)
	}
	for o, err := range blob.All(ctx, cold, &blob.ListOptions{Prefix: markerPrefix + "batch/"}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a pack move's marker is left: %s", o.Key)
	}
	gone("after recovery", true)
	if err := blob.Put(ctx, user, "k", []byte("v2"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		t.Fatalf("create after the delete: %v", err)
	}
	if b, err := blob.ReadAll(ctx, mover, "k"); err != nil || string(b) != "v2" {
		t.Fatalf("read after the create: %q, %v", b, err)
	}
}
