package tiered_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/tiered"
)

// packedKeys writes n keys through s and packs them all with one pass.
func packedKeys(t *testing.T, s *tiered.Store, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("k%03d", i)
		mustPut(t, s, k, "v"+k)
		keys = append(keys, k)
	}
	time.Sleep(time.Millisecond) // older than After
	if res := s.CompactOnce(ctxT(t)); res.Moved != n || s.Stats().Packs != 1 {
		t.Fatalf("pass %+v, stats %+v: want %d objects in one pack", res, s.Stats(), n)
	}
	return keys
}

// graveOpts pack everything a pass finds into one pack, with a MoveTimeout
// and clock skew short
// enough for a Delete's grave to be retired within a test.
var graveOpts = tiered.Options{PackMaxObjects: 1000, MoveTimeout: 200 * time.Millisecond, MaxClockSkew: time.Millisecond}

// packedWithOther packs n keys through s, whose cold store is fault-wrapped
// (to count and fail its calls), and returns another Store over the same
// tiers (another process) beside it.
func packedWithOther(t *testing.T, n int) (hot blob.Store, cold *fault.Store, s, other *tiered.Store, keys []string) {
	t.Helper()
	hot, coldMem := memPair(t)
	cold = fault.Wrap(coldMem, fault.Options{Seed: 1})
	s = manualWith(t, hot, cold, graveOpts)
	keys = packedKeys(t, s, n)
	return hot, cold, s, manualWith(t, hot, coldMem, graveOpts), keys
}

// TestPackedDeletesWriteGraves deletes 100 packed objects at once: each
// writes a grave to hot, and none writes to cold or waits for a log object.
// Another Store over the same tiers (another process) finds every key gone
// at once. A pass once the graves are old enough kills the packed versions
// with one tombstone and removes the graves; the keys stay gone, and a
// create of one succeeds.
func TestPackedDeletesWriteGraves(t *testing.T) {
	hot, cold, s, other, keys := packedWithOther(t, 100)

	commits, tombs := cold.Stats()[fault.OpCommit].Calls, s.Stats().Tombstones
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			if err := s.Delete(ctxT(t), k, nil); err != nil {
				t.Errorf("delete %s: %v", k, err)
			}
		})
	}
	wg.Wait()
	if c, n := cold.Stats()[fault.OpCommit].Calls-commits, s.Stats().Tombstones-tombs; c != 0 || n != 0 {
		t.Errorf("100 deletes committed %d objects to cold, %d tombstones: want none", c, n)
	}
	if st := s.Stats(); st.Graves != 100 {
		t.Errorf("%d graves written, want 100", st.Graves)
	}
	checkModel(t, other, nil, keys)
	if got := listKeys(t, other); len(got) != 0 {
		t.Errorf("another process lists %d keys after every key was deleted: %v", len(got), got)
	}
	for _, k := range keys[:5] {
		if err := other.Delete(ctxT(t), k, nil); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("a second Delete of %s: %v, want NotFound", k, err)
		}
	}

	time.Sleep(tiered.GraveHold(graveOpts.MoveTimeout, graveOpts.MaxClockSkew))
	if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
		t.Fatalf("pass: %+v", res)
	}
	if st := s.Stats(); st.GravesRetired != 100 || st.Tombstones-tombs != 1 {
		t.Errorf("the pass retired %d graves with %d tombstones, want 100 with 1", st.GravesRetired, st.Tombstones-tombs)
	}
	if left := listKeys(t, hot); len(left) != 0 {
		t.Errorf("hot still holds %v", left)
	}
	checkModel(t, other, nil, keys)
	if err := blob.Put(ctxT(t), other, keys[0], []byte("again"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		t.Fatalf("create after the delete: %v", err)
	}
	checkModel(t, s, map[string]string{keys[0]: "again"}, keys[1:])
}

// TestGraveRetirementFailure: a pass whose tombstone write fails removes
// no grave, so the keys stay deleted in every process; the next pass
// retires them.
func TestGraveRetirementFailure(t *testing.T) {
	_, cold, s, other, keys := packedWithOther(t, 20)
	for _, k := range keys {
		if err := s.Delete(ctxT(t), k, nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(tiered.GraveHold(graveOpts.MoveTimeout, graveOpts.MaxClockSkew))
	cold.Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: markerPrefix + "log/", Count: 1, Effect: fault.FailBefore})
	if res := s.CompactOnce(ctxT(t)); res.Failed == 0 || !errors.Is(res.Err, fault.ErrInjected) {
		t.Errorf("a pass whose tombstone failed: %+v", res)
	}
	if st := s.Stats(); st.GravesRetired != 0 {
		t.Errorf("%d graves retired without their tombstone", st.GravesRetired)
	}
	checkModel(t, other, nil, keys)
	if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
		t.Fatalf("the next pass: %+v", res)
	}
	if st := s.Stats(); st.GravesRetired != 20 {
		t.Errorf("the next pass retired %d graves, want 20", st.GravesRetired)
	}
	checkModel(t, other, nil, keys)
}
