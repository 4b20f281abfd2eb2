package quorum

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
)

// TestRefusalAboveAnAbsentKey is the round a conditional write runs after
// its first attempt's accept landed on one replica only, when the others no
// longer hold the key (a caller retired it, as tiered does once it packed
// the version): the write is refused, and the attempt's version, the
// highest ballot left on replica 0, must never be chosen afterwards. It was,
// by the first read that heard replica 0, because the refusal accepted the
// absence again, and an absence carries no ballot.
func TestRefusalAboveAnAbsentKey(t *testing.T) {
	ctx := context.Background()
	var faults []*fault.Store
	var reps []blob.Store
	for range 3 {
		m, err := blob.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		f := fault.Wrap(m, fault.Options{})
		faults = append(faults, f)
		reps = append(reps, f)
	}
	s, err := New(reps, Options{Consistency: ReadMajority, ProbeInterval: time.Hour, AntiEntropyInterval: -1, FailureThreshold: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "k"
	if err := blob.Put(ctx, s, key, []byte("base"), nil); err != nil {
		t.Fatal(err)
	}
	a, err := s.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	g := a.Generation
	// The Put was acknowledged by two replicas: its call on the third (or
	// the repair that follows it) may still be landing. The test rewrites
	// the replicas' objects below, on condition of what it reads there,
	// and deletes them, so it waits until every replica holds the version.
	waitHeld(t, s, key, g)
	// The first attempt of a CAS on g: its version at ballot b1 accepted on
	// replica 0 only. Then replicas 1 and 2 lose the key.
	b1 := s.newToken("")
	attempt := &value{body: bodyOf([]byte("attempt")), kind: live, ver: b1, chain: []string{b1, g}}
	x := s.statReplica(ctx, s.reps[0], key)
	if err := s.writeReplica(ctx, key, &x, attempt, b1, b1); err != nil {
		t.Fatal(err)
	}
	for _, f := range faults[1:] {
		if err := f.Unwrap().Delete(ctx, key, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The retry, not hearing replica 0, finds no version: refused.
	faults[0].SetDown(true)
	_, err = s.consensus(ctx, "write", key, func(cur *rstate) (*value, error) {
		if !cur.visible() || cur.ver != g {
			return nil, &blob.Error{Op: "write", Key: key, Kind: blob.ErrPrecondition}
		}
		return &value{body: bodyOf([]byte("retry")), kind: live}, nil
	}, b1)
	faults[0].SetDown(false)
	if !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("the retry: %v, want a precondition failure", err)
	}
	// Every pair of replicas now reads the key as absent.
	for _, down := range []int{1, 2, 0} {
		faults[down].SetDown(true)
		got, err := blob.ReadAll(ctx, s, key)
		faults[down].SetDown(false)
		if !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("read with replica %d down: %q, %v; want not found (the refused write took effect)", down, got, err)
		}
	}
}

// waitHeld waits until every replica of s holds version ver of key.
func waitHeld(t *testing.T, s *Store, key, ver string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var held []string
		for _, r := range s.reps {
			x := s.statReplica(context.Background(), r, key)
			held = append(held, x.ver)
		}
		if !slices.ContainsFunc(held, func(v string) bool { return v != ver }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replicas hold versions %q of %q, want %s on each", held, key, ver)
		}
		time.Sleep(time.Millisecond)
	}
}
