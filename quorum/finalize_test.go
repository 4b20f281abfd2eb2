package quorum_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// sealing is a replica that can finalize, counting the keys it sealed.
type sealing struct {
	blob.Store
	mu     sync.Mutex
	sealed map[string]int
}

func (s *sealing) Finalize(ctx context.Context, key string) error {
	if _, err := s.Stat(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed[key]++
	return nil
}

func (s *sealing) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealed[key]
}

// Finalize seals the acknowledged version on every replica holding it, and
// only there.
func TestFinalize(t *testing.T) {
	ctx := context.Background()
	var seals []*sealing
	var reps []blob.Store
	for _, m := range memReplicas(t, 3) {
		s := &sealing{Store: m, sealed: map[string]int{}}
		seals = append(seals, s)
		reps = append(reps, s)
	}
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	if err := blob.Put(ctx, q, "seg", []byte("segment"), nil); err != nil {
		t.Fatal(err)
	}
	// An older copy on replica 2, written around the quorum: not the
	// acknowledged version, so not sealed there.
	waitHeld(t, seals[2], "seg")
	if err := blob.Put(ctx, seals[2].Store, "seg", []byte("stale"), nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Finalize(ctx, "seg"); err != nil {
		t.Fatal(err)
	}
	if got := []int{seals[0].count("seg"), seals[1].count("seg"), seals[2].count("seg")}; got[0] != 1 || got[1] != 1 || got[2] != 0 {
		t.Errorf("sealed per replica = %v, want [1 1 0]", got)
	}
	if err := q.Finalize(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Finalize of a missing key: %v, want ErrNotFound", err)
	}
	plain := newQuorum(t, memReplicas(t, 3), testOptions())
	defer plain.Close()
	blob.Put(ctx, plain, "seg", []byte("segment"), nil)
	if err := plain.Finalize(ctx, "seg"); err != nil {
		t.Errorf("Finalize over replicas whose objects are final already: %v", err)
	}
}

func waitHeld(t *testing.T, s blob.Store, key string) {
	t.Helper()
	for range 1000 {
		if ok, _ := blob.Exists(context.Background(), s, key); ok {
			return
		}
		waitABit()
	}
	t.Fatalf("%s never reached the replica", key)
}

func waitABit() { time.Sleep(time.Millisecond) }
