package quorum_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
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
	var fs []*fault.Store
	var reps []blob.Store
	for i, m := range testkit.Mems(t, 3) {
		s := &sealing{Store: m, sealed: map[string]int{}}
		f := fault.Wrap(s, fault.Options{Seed: uint64(i)})
		seals = append(seals, s)
		fs = append(fs, f)
		reps = append(reps, f)
	}
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	// Replica 2 is down while the version is written and sealed: it does
	// not hold it, so it is not sealed there.
	fs[2].SetDown(true)
	if err := blob.Put(ctx, q, "seg", []byte("segment"), nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Finalize(ctx, "seg"); err != nil {
		t.Fatal(err)
	}
	if got := []int{seals[0].count("seg"), seals[1].count("seg"), seals[2].count("seg")}; got[0] != 1 || got[1] != 1 || got[2] != 0 {
		t.Errorf("sealed per replica = %v, want [1 1 0]", got)
	}
	// A replica whose object is being rewritten with the same version (a
	// repair, a straggler) finds none for a moment, as gcsrapid does while
	// an appendable object has no bytes flushed: it is surveyed and sealed
	// again, and Finalize succeeds.
	fs[2].SetDown(false)
	if err := q.Resolve(ctx, "seg"); err != nil {
		t.Fatal(err)
	}
	fs[1].FailNth(fault.OpFinalize, 1, blob.ErrNotFound)
	if err := q.Finalize(ctx, "seg"); err != nil {
		t.Fatalf("Finalize with a replica's object missing for a moment: %v", err)
	}
	if st := fs[1].Stats()[fault.OpFinalize]; st.Failures != 1 {
		t.Fatalf("replica 1's Finalize failed %d times, want 1", st.Failures)
	}
	if got := []int{seals[0].count("seg"), seals[1].count("seg"), seals[2].count("seg")}; got[0] != 2 || got[1] != 2 || got[2] != 1 {
		t.Errorf("sealed per replica = %v, want [2 2 1]", got)
	}
	if err := q.Finalize(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Finalize of a missing key: %v, want ErrNotFound", err)
	}
	plain := newQuorum(t, testkit.Mems(t, 3), testOptions())
	defer plain.Close()
	blob.Put(ctx, plain, "seg", []byte("segment"), nil)
	if err := plain.Finalize(ctx, "seg"); err != nil {
		t.Errorf("Finalize over replicas whose objects are final already: %v", err)
	}
}
