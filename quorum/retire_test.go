package quorum_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
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
// retires, and touches nothing newer: a version written after the survey
// survives it, and so does one written while a replica was down, whose
// stale copy there is deleted with the retired ones.
func TestRetire(t *testing.T) {
	ctx := context.Background()
	reps, faults := faulted(t, 3, 1)
	q := newQuorum(t, reps, testOptions())
	defer q.Close()

	// v1 on every replica; v2 while replica c is down: c keeps v1.
	if err := blob.Put(ctx, q, "k", []byte("v1"), nil); err != nil {
		t.Fatal(err)
	}
	faults[2].SetDown(true)
	if err := blob.Put(ctx, q, "k", []byte("v2"), nil); err != nil {
		t.Fatal(err)
	}
	faults[2].SetDown(false)
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

	// A version written after the survey is never touched.
	if err := blob.Put(ctx, q, "n", []byte("old"), nil); err != nil {
		t.Fatal(err)
	}
	h, err = q.Survey(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if err := blob.Put(ctx, q, "n", []byte("new"), nil); err != nil {
		t.Fatal(err)
	}
	res, err = q.Retire(ctx, h, h.Attributes().Generation)
	if err != nil || !res.Newer || res.Deleted != 0 || !res.Complete {
		t.Fatalf("Retire of a replaced version: %+v, %v", res, err)
	}
	if b, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "n"); err != nil || string(b) != "new" {
		t.Fatalf("after retiring the old version: %q, %v", b, err)
	}
	if _, err := q.ReadHeld(ctx, h); !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("ReadHeld of a replaced version: %v, want ErrPrecondition", err)
	}

	// A replica down: what can be deleted is, the rest is reported, and a
	// second Retire finishes.
	if err := blob.Put(ctx, q, "d", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	h, err = q.Survey(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	faults[1].SetDown(true)
	res, err = q.Retire(ctx, h, h.Attributes().Generation)
	if err == nil || res.Complete || res.Deleted != 2 {
		t.Fatalf("Retire with a replica down: %+v, %v", res, err)
	}
	faults[1].SetDown(false)
	res, err = q.Retire(ctx, h, h.Attributes().Generation)
	if err != nil || !res.Complete || res.Deleted != 1 {
		t.Fatalf("Retire again: %+v, %v", res, err)
	}
	if got := replicaHolds(t, reps, "d"); got[0] != "" || got[1] != "" || got[2] != "" {
		t.Fatalf("after the second Retire the replicas hold %q", got)
	}
	if st := q.Stats(); st.Retired != 6 {
		t.Errorf("Stats().Retired = %d, want 6", st.Retired)
	}
}

// A write racing a retirement is never lost: a round that promised on a
// replica before its object was deleted has its accept refused there and
// tries again, and the version it writes is above the retired one.
func TestRetireRacingWrite(t *testing.T) {
	ctx := context.Background()
	reps := memReplicas(t, 3)
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
