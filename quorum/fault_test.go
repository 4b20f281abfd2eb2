package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
)

// Each scenario keeps at most N-W = 1 replica faulty, runs the seeded
// workload from one process and from three, and checks the history with the
// linearizability checker.
func TestFaults(t *testing.T) {
	slow := latency.Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond}
	cases := []struct {
		name   string
		setup  func(c *cluster)
		during func(c *cluster, done <-chan struct{})
	}{
		{name: "one replica down throughout", setup: func(c *cluster) {
			for _, p := range c.procs {
				p.faults[2].SetDown(true)
			}
		}},
		{name: "one replica down mid-run and back", during: func(c *cluster, done <-chan struct{}) {
			time.Sleep(30 * time.Millisecond)
			for _, p := range c.procs {
				p.faults[1].SetDown(true)
			}
			select {
			case <-done:
			case <-time.After(150 * time.Millisecond):
			}
			for _, p := range c.procs {
				p.faults[1].SetDown(false)
			}
		}},
		{name: "one replica 10x slower", setup: func(c *cluster) {
			for _, p := range c.procs {
				for i, f := range p.faults {
					d := slow.Scale(0.1)
					if i == 0 {
						d = slow
					}
					for _, op := range allOps {
						f.AddLatency(op, d)
					}
				}
			}
		}},
		{name: "10% random errors on every replica", setup: func(c *cluster) {
			for _, p := range c.procs {
				for _, f := range p.faults {
					for _, op := range allOps {
						f.FailRandom(op, 0.1, nil)
					}
					// Commits and deletes that happen although the caller
					// hears they failed.
					f.Add(fault.Rule{Op: fault.OpCommit, Probability: 0.03, Effect: fault.FailAfter})
					f.Add(fault.Rule{Op: fault.OpDelete, Probability: 0.03, Effect: fault.FailAfter})
				}
			}
		}},
	}
	for i, tc := range cases {
		for _, procs := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%d processes", tc.name, procs), func(t *testing.T) {
				c := newCluster(t, 3, procs, testOptions(), uint64(100*i+procs))
				if tc.setup != nil {
					tc.setup(c)
				}
				var during func(<-chan struct{})
				if tc.during != nil {
					during = func(done <-chan struct{}) { tc.during(c, done) }
				}
				h := runWorkload(t, c, uint64(i+1), 6/procs, 50, 4, during)
				t.Logf("%d acknowledged, %d refused, %d uncertain, %d reads; %+v", h.acked.Load(), h.refused.Load(), h.unknown.Load(), h.reads.Load(), c.procs[0].q.Stats())
				if h.acked.Load() == 0 || h.reads.Load() == 0 {
					t.Fatal("the workload did nothing")
				}
			})
		}
	}
}

// A replica down for part of a run holds everything written meanwhile once it
// is back: writes skip it, the repairer fills it.
func TestDownReplicaIsRepaired(t *testing.T) {
	reps, fs := faulted(t, 3, 7)
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	ctx := context.Background()
	fs[1].SetDown(true)
	want := map[string]string{}
	for i := range 50 {
		k := fmt.Sprintf("seg/%03d", i)
		want[k] = "data " + k
		if err := blob.Put(ctx, q, k, []byte(want[k]), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := blob.Exists(ctx, fs[1].Unwrap(), "seg/049"); n {
		t.Fatal("a down replica received a write")
	}
	if !q.Stats().Replicas[1].Down {
		t.Fatalf("replica 1 failed every call yet is not marked down: %+v", q.Stats())
	}
	if calls := fs[1].Stats()[fault.OpWrite].Calls; calls > 10 {
		t.Errorf("writes kept waiting on the down replica: %d calls reached it", calls)
	}
	fs[1].SetDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for k, v := range want {
		for {
			b, err := blob.ReadAll(ctx, fs[1].Unwrap(), k)
			if err == nil && string(b) == v {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica 1 was not repaired: %s: %q, %v; %+v", k, b, err, q.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Every object is on the replica (checked above); a few may have got
	// there through their own write's retry rather than a counted repair,
	// so the counter need only show that repair ran.
	if st := q.Stats(); st.Repairs == 0 || st.CameBack == 0 || st.Replicas[1].Down {
		t.Errorf("repairs = %d, came back %d times, down now %v", st.Repairs, st.CameBack, st.Replicas[1].Down)
	}
}

// A writer whose context ends mid-write, or before Close, commits nothing on
// any replica.
func TestCanceledWriter(t *testing.T) {
	reps, fs := faulted(t, 3, 3)
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	for _, prewarm := range []bool{false, true} {
		key := fmt.Sprintf("cancel/%v", prewarm)
		ctx, cancel := context.WithCancel(context.Background())
		var w blob.Writer
		var err error
		if prewarm {
			w, err = q.Prewarm(ctx, key, nil)
		} else {
			w, err = q.NewWriter(ctx, key, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("half of it"))
		cancel()
		if _, err := w.Write([]byte("the rest")); err == nil {
			t.Errorf("%s: Write after cancel succeeded", key)
		}
		if err := w.Close(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: Close after cancel: %v, want context.Canceled", key, err)
		}
		for i, f := range fs {
			if a, err := f.Unwrap().Stat(context.Background(), key); err == nil && a.Size > 0 {
				t.Errorf("%s: replica %d holds %d bytes of a canceled write", key, i, a.Size)
			}
		}
	}
}

// Racing IfNotExist creators, with a slow replica and random failures: at
// most one wins in every round, and the object holds the winner's bytes.
func TestRacingCreators(t *testing.T) {
	reps, fs := faulted(t, 3, 11)
	fs[0].AddLatency(fault.OpCommit, latency.Fixed(time.Millisecond))
	for _, f := range fs {
		f.FailRandom(fault.OpCommit, 0.05, nil)
	}
	q := newQuorum(t, reps, testOptions())
	defer q.Close()
	ctx := context.Background()
	wins, rounds := 0, 30
	for round := range rounds {
		key := fmt.Sprintf("race/%d", round)
		const n = 12
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = blob.Put(ctx, q, key, fmt.Appendf(nil, "creator %d", i), &blob.WriterOptions{If: blob.IfNotExist()})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("%s: creators %d and %d both won", key, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			continue
		}
		wins++
		b, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, key)
		if err != nil || string(b) != fmt.Sprintf("creator %d", winner) {
			t.Errorf("%s: read %q, %v; want creator %d", key, b, err, winner)
		}
	}
	if wins < rounds/2 {
		t.Errorf("only %d of %d rounds had a winner", wins, rounds)
	}
	t.Logf("%d of %d rounds had a winner; %+v", wins, rounds, q.Stats())
}
