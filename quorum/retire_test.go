package quorum_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// replicaHolds reports what each replica's raw object is: "" when absent,
// else its quorum version.
func replicaHolds(t *testing.T, reps []blob.Store, key string) []string {
	t.Helper()
	var out []string
	for _, r := range reps {
		a, err := r.Stat(context.Background(), key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			out = append(out, "")
		case err != nil:
			t.Fatal(err)
		default:
			out = append(out, a.Metadata[quorum.VersionKey]+"/"+a.Metadata[quorum.StateKey])
		}
	}
	return out
}

// Retire deletes, on every replica, the objects at or below the version it
// retires, and touches nothing newer. An acknowledged write is on W of the
// replicas; its calls on the others, and the repair that copies it there,
// land in the background. So each case sets the replicas up
// deterministically: it waits until every replica holds a write, or keeps
// replica 2 behind one at a gate (its promise held past the round, then the
// repair's copy held until the retirement is done).
func TestRetire(t *testing.T) {
	ctx := context.Background()

	// The current version, with an older copy on replica 2, onto which
	// the repair is still copying the current one: all three are deleted,
	// and the repair, refused where the copy went, brings nothing back.
	t.Run("current", func(t *testing.T) {
		c := newCluster(t, 3, 1, testOptions(), 1)
		p := c.procs[0]
		q, reps := p.q, c.mems
		if err := blob.Put(ctx, q, "k", []byte("v1"), nil); err != nil {
			t.Fatal(err)
		}
		waitAll(t, c, "k", "v1")
		promise, hold := behind(t, p.gates[2], "v1", "v2")
		defer promise.Release()
		defer hold.Release()
		if err := blob.Put(ctx, q, "k", []byte("v2"), nil); err != nil {
			t.Fatal(err)
		}
		waitReached(t, hold, nil)
		h, err := q.Survey(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		a := h.Attributes()
		if a == nil {
			t.Fatal("survey found nothing")
		}
		b, err := q.ReadHeld(ctx, h)
		if err != nil || string(b) != "v2" {
			t.Fatalf("ReadHeld: %q, %v", b, err)
		}
		if ts, ok := quorum.GenerationTime(a.Generation); !ok || ts.IsZero() {
			t.Errorf("GenerationTime(%q) = %v, %v", a.Generation, ts, ok)
		}
		before := replicaHolds(t, reps, "k")
		if v1 := strings.TrimSuffix(before[2], "/"); v1 == "" || v1 >= a.Generation {
			t.Fatalf("replicas hold %q: want an older version than %s on replica 2", before, a.Generation)
		}
		res, err := q.Retire(ctx, h, a.Generation)
		if err != nil || !res.Complete || res.Newer || res.Deleted != 3 {
			t.Fatalf("Retire of the current version: %+v, %v (replicas held %q)", res, err, before)
		}
		if got := replicaHolds(t, reps, "k"); got[0] != "" || got[1] != "" || got[2] != "" {
			t.Fatalf("after Retire the replicas hold %q", got)
		}
		if _, err := q.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat after Retire: %v, want NotFound", err)
		}
		if st := q.Stats(); st.Retired != 3 {
			t.Errorf("Stats().Retired = %d, want 3", st.Retired)
		}
		// Close waits for the repair.
		hold.Release()
		c.stop(p)
		if got := replicaHolds(t, reps, "k"); got[0] != "" || got[1] != "" || got[2] != "" {
			t.Fatalf("after the repair the replicas hold %q", got)
		}
	})

	// A version replaced after the survey, the newer one on every replica:
	// nothing is deleted or touched.
	t.Run("replaced", func(t *testing.T) {
		c := newCluster(t, 3, 1, testOptions(), 1)
		q, reps := c.procs[0].q, c.mems
		if err := blob.Put(ctx, q, "n", []byte("old"), nil); err != nil {
			t.Fatal(err)
		}
		waitAll(t, c, "n", "old")
		h, err := q.Survey(ctx, "n")
		if err != nil {
			t.Fatal(err)
		}
		if err := blob.Put(ctx, q, "n", []byte("new"), nil); err != nil {
			t.Fatal(err)
		}
		waitAll(t, c, "n", "new")
		before := replicaHolds(t, reps, "n")
		res, err := q.Retire(ctx, h, h.Attributes().Generation)
		if err != nil || !res.Newer || res.Deleted != 0 || !res.Complete {
			t.Fatalf("Retire of a replaced version: %+v, %v", res, err)
		}
		if got := replicaHolds(t, reps, "n"); !slices.Equal(got, before) {
			t.Fatalf("Retire of a replaced version changed the replicas from %q to %q", before, got)
		}
		if b, err := blob.ReadAll(majority(ctx), q, "n"); err != nil || string(b) != "new" {
			t.Fatalf("after retiring the old version: %q, %v", b, err)
		}
		if _, err := q.ReadHeld(ctx, h); !errors.Is(err, blob.ErrPrecondition) {
			t.Errorf("ReadHeld of a replaced version: %v, want ErrPrecondition", err)
		}
	})

	// A version replaced after the survey by a write acknowledged by
	// replicas 0 and 1 that has not reached replica 2 yet: replica 2's copy
	// of the retired version is deleted (Deleted 1: as many as the replicas
	// the newer write has not reached, at most N-W), the newer version is
	// untouched, and the repair, refused there once, copies the newer
	// version onto replica 2: nothing newer is lost.
	t.Run("replaced-straggler", func(t *testing.T) {
		c := newCluster(t, 3, 1, testOptions(), 1)
		p := c.procs[0]
		q, reps := p.q, c.mems
		if err := blob.Put(ctx, q, "s", []byte("old"), nil); err != nil {
			t.Fatal(err)
		}
		waitAll(t, c, "s", "old")
		h, err := q.Survey(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		promise, hold := behind(t, p.gates[2], "old", "new")
		defer promise.Release()
		defer hold.Release()
		if err := blob.Put(ctx, q, "s", []byte("new"), nil); err != nil {
			t.Fatal(err)
		}
		waitReached(t, hold, nil)
		res, err := q.Retire(ctx, h, h.Attributes().Generation)
		if err != nil || !res.Newer || res.Deleted != 1 || !res.Complete {
			t.Fatalf("Retire of a replaced version under a straggler: %+v, %v", res, err)
		}
		if got := replicaHolds(t, reps, "s"); got[0] == "" || got[0] != got[1] || got[2] != "" {
			t.Fatalf("after Retire the replicas hold %q, want the newer version on 0 and 1 and nothing on 2", got)
		}
		if b, err := blob.ReadAll(majority(ctx), q, "s"); err != nil || string(b) != "new" {
			t.Fatalf("after retiring the old version under a straggler: %q, %v", b, err)
		}
		hold.Release()
		waitAll(t, c, "s", "new")
	})

	// A replica down: what can be deleted is, the rest is reported, and a
	// second Retire finishes.
	t.Run("down", func(t *testing.T) {
		c := newCluster(t, 3, 1, testOptions(), 1)
		p := c.procs[0]
		q, reps := p.q, c.mems
		if err := blob.Put(ctx, q, "d", []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
		waitAll(t, c, "d", "v")
		h, err := q.Survey(ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		p.faults[1].SetDown(true)
		res, err := q.Retire(ctx, h, h.Attributes().Generation)
		if !errors.Is(err, quorum.ErrNoQuorum) || res.Complete || res.Deleted != 2 {
			t.Fatalf("Retire with a replica down: %+v, %v", res, err)
		}
		p.faults[1].SetDown(false)
		res, err = q.Retire(ctx, h, h.Attributes().Generation)
		if err != nil || !res.Complete || res.Deleted != 1 {
			t.Fatalf("Retire again: %+v, %v", res, err)
		}
		if got := replicaHolds(t, reps, "d"); got[0] != "" || got[1] != "" || got[2] != "" {
			t.Fatalf("after the second Retire the replicas hold %q", got)
		}
		if st := q.Stats(); st.Retired != 3 {
			t.Errorf("Stats().Retired = %d, want 3", st.Retired)
		}
	})
}

// behind keeps a replica, through its gate, one write behind: the write of
// next over prev. The replica's promise (a rewrite of prev) is held until
// the round gives up waiting for it, so that the write is accepted and
// acknowledged by the other replicas alone, and the repair's copy of next
// onto it is held until the test releases hold (which waitReached sees
// parked before the test goes on).
func behind(t *testing.T, g *gate, prev, next string) (promise, hold *hold) {
	t.Helper()
	return g.holdData(prev, 1), g.holdData(next, 1)
}

// A write racing a retirement is never lost: a round that promised on a
// replica before its object was deleted has its accept refused there and
// tries again, and the version it writes is above the retired one.
func TestRetireRacingWrite(t *testing.T) {
	ctx := context.Background()
	reps := testkit.Mems(t, 3)
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	for i := range 20 {
		if err := blob.Put(ctx, q, "k", []byte("v0"), nil); err != nil {
			t.Fatal(err)
		}
		h, err := q.Survey(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- blob.Put(ctx, q, "k", []byte("v1"), nil) }()
		if _, err := q.Retire(ctx, h, h.Attributes().Generation); err != nil && !errors.Is(err, quorum.ErrNoQuorum) {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("run %d: the write racing a retirement: %v", i, err)
		}
		if b, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "k"); err != nil || string(b) != "v1" {
			t.Fatalf("run %d: after a write racing a retirement: %q, %v", i, b, err)
		}
	}
}
