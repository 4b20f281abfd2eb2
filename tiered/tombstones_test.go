package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/cost"
	"github.com/zonalblob/zonalblob/tiered"
)

// tombstoneOpts packs everything a pass finds into one pack.
var tombstoneOpts = tiered.Options{PackMaxObjects: 1000, MoveTimeout: 2 * time.Second}

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

// isTombstoneWrite reports whether a hooked cold call is the write of a
// tombstone in the pack log.
func isTombstoneWrite(step, key string) bool {
	return step == "cold:write" && strings.HasPrefix(key, markerPrefix+"log/") && strings.Contains(key, "-t-")
}

// holdFirstTombstone returns a hook that holds the first tombstone write
// until release is closed, closing held when it does; later writes pass.
func holdFirstTombstone(held, release chan struct{}) func(step, key string) {
	var first atomic.Bool
	return func(step, key string) {
		if isTombstoneWrite(step, key) && first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
	}
}

// TestDeletesShareTombstones deletes 100 packed objects at once, with
// cold's commits taking a regional write's latency, on synctest's clock:
// every Delete reaches its tombstone before the first tombstone's write
// returns, so the first is written alone (or with the Deletes that arrived
// before its write began) and all the others share the next. A second
// Store over the same tiers (another process) finds every key gone.
func TestDeletesShareTombstones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hot, coldMem := memPair(t)
		cold := fault.Wrap(coldMem, fault.Options{Seed: 1})
		s := manualWith(t, hot, cold, tombstoneOpts)
		keys := packedKeys(t, s, 100)
		other := manualWith(t, hot, coldMem, tombstoneOpts)

		cold.AddLatency(fault.OpCommit, latency.Fixed(cost.RegionalWriteLatency))
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
		commits = cold.Stats()[fault.OpCommit].Calls - commits
		tombs = s.Stats().Tombstones - tombs
		if tombs < 1 || tombs > 2 || commits != tombs {
			t.Errorf("100 deletes at once wrote %d tombstones (%d commits to cold): want 1 or 2, shared", tombs, commits)
		}
		t.Logf("100 deletes at once wrote %d tombstones", tombs)
		checkModel(t, other, nil, keys)
		if got := listKeys(t, other); len(got) != 0 {
			t.Errorf("another process lists %d keys after every key was deleted: %v", len(got), got)
		}
	})
}

// TestTombstoneWriteErrorFailsItsBatch holds the first Delete's tombstone
// write, gathers 99 more Deletes into the next tombstone, and fails that
// one's commit: the first Delete succeeds and every one of the 99 fails.
// Each Delete that returned nil reads NotFound from another process; as
// the failed tombstone was never committed (the fault fails it before it
// reaches the store), each failed Delete's object is still served there.
// Deleting them again then works.
func TestTombstoneWriteErrorFailsItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hot, coldMem := memPair(t)
		cold := fault.Wrap(coldMem, fault.Options{Seed: 1})
		held, release := make(chan struct{}), make(chan struct{})
		hooked := &hooked{Store: cold, name: "cold", at: holdFirstTombstone(held, release)}
		s := manualWith(t, hot, hooked, tombstoneOpts)
		other := manualWith(t, hot, coldMem, tombstoneOpts)
		keys := packedKeys(t, s, 100)
		cold.Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: markerPrefix + "log/", Skip: 1, Count: 1, Effect: fault.FailBefore})
		tombs := s.Stats().Tombstones

		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		wg.Go(func() { errs[0] = s.Delete(ctxT(t), keys[0], nil) })
		<-held // its tombstone is being written
		for i := 1; i < len(keys); i++ {
			wg.Go(func() { errs[i] = s.Delete(ctxT(t), keys[i], nil) })
		}
		synctest.Wait() // the 99 wait for the next tombstone
		close(release)
		wg.Wait()

		if errs[0] != nil {
			t.Errorf("delete %s, alone in the first tombstone: %v", keys[0], errs[0])
		}
		var failed []string
		for i, err := range errs[1:] {
			if !errors.Is(err, fault.ErrInjected) {
				t.Errorf("delete %s, in the failed tombstone: %v, want the injected failure", keys[i+1], err)
			}
			if err != nil {
				failed = append(failed, keys[i+1])
			}
		}
		if got := s.Stats().Tombstones - tombs; got != 1 {
			t.Errorf("%d tombstones written, want 1 (the second failed)", got)
		}
		if f := cold.Stats()[fault.OpCommit].Failures; f != 1 {
			t.Errorf("%d commits failed, want 1", f)
		}
		for i, err := range errs {
			k := keys[i]
			got, rerr := blob.ReadAll(ctxT(t), other, k)
			switch {
			case err == nil && !errors.Is(rerr, blob.ErrNotFound):
				t.Errorf("%s: deleted, but another process reads %q, %v", k, got, rerr)
			case err != nil && (rerr != nil || string(got) != "v"+k):
				t.Errorf("%s: its tombstone was never committed, but another process reads %q, %v", k, got, rerr)
			}
		}

		for _, k := range failed {
			wg.Go(func() {
				if err := s.Delete(ctxT(t), k, nil); err != nil {
					t.Errorf("delete %s again: %v", k, err)
				}
			})
		}
		wg.Wait()
		checkModel(t, other, nil, keys)
	})
}

// TestTombstoneWaitEndsWithItsContext: a Delete whose context ends while
// it waits for a shared tombstone returns its context's error, and the
// write goes on for the Deletes that share it, even when the one that
// left began the batch.
func TestTombstoneWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hot, cold := memPair(t)
		held, release := make(chan struct{}), make(chan struct{})
		hooked := &hooked{Store: cold, name: "cold", at: holdFirstTombstone(held, release)}
		s := manualWith(t, hot, hooked, tombstoneOpts)
		other := manualWith(t, hot, cold, tombstoneOpts)
		keys := packedKeys(t, s, 3)
		tombs := s.Stats().Tombstones

		var wg sync.WaitGroup
		errs := make([]error, 3)
		wg.Go(func() { errs[0] = s.Delete(ctxT(t), keys[0], nil) })
		<-held
		leaving, leave := context.WithCancel(ctxT(t))
		wg.Go(func() { errs[1] = s.Delete(leaving, keys[1], nil) })
		synctest.Wait() // keys[1] began the next tombstone
		wg.Go(func() { errs[2] = s.Delete(ctxT(t), keys[2], nil) })
		synctest.Wait() // keys[2] joined it
		leave()
		synctest.Wait()
		close(release)
		wg.Wait()

		if !errors.Is(errs[1], context.Canceled) {
			t.Errorf("delete %s whose context ended: %v, want its context's error", keys[1], errs[1])
		}
		for _, i := range []int{0, 2} {
			if errs[i] != nil {
				t.Errorf("delete %s: %v", keys[i], errs[i])
			}
		}
		if got := s.Stats().Tombstones - tombs; got != 2 {
			t.Errorf("%d tombstones written, want 2", got)
		}
		checkModel(t, other, nil, []string{keys[0], keys[2]})
	})
}
