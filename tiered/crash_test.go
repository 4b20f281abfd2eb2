package tiered_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zonalblob/zonalblob/blob/fault"
)

// TestCrashAtEveryStep fails each call a move makes, in turn, before and
// after it reaches the store (after: the call happened but the compactor was
// told it failed, as when a process dies before it hears the answer). The
// failed compactor is then dropped and a new one, as after a restart, runs
// over the same tiers. Throughout, every acknowledged object must read back
// with its bytes, and nothing deleted may come back.
func TestCrashAtEveryStep(t *testing.T) {
	steps := []struct {
		tier string
		op   fault.Op
	}{
		{"hot", fault.OpStat},
		{"hot", fault.OpRead},
		{"hot", fault.OpReadData},
		{"cold", fault.OpWrite},
		{"cold", fault.OpWriteData},
		{"cold", fault.OpCommit},
		{"cold", fault.OpStat},
		{"hot", fault.OpDelete},
	}
	for _, step := range steps {
		for _, effect := range []fault.Effect{fault.FailBefore, fault.FailAfter} {
			for _, nth := range []int{1, 2} {
				name := fmt.Sprintf("%s-%s-%s-%d", step.tier, step.op, map[fault.Effect]string{fault.FailBefore: "before", fault.FailAfter: "after"}[effect], nth)
				t.Run(name, func(t *testing.T) {
					hot, cold := memPair(t)
					hotF := fault.Wrap(hot, fault.Options{Seed: 1, Name: "hot"})
					coldF := fault.Wrap(cold, fault.Options{Seed: 2, Name: "cold"})
					user := manual(t, hot, cold) // the application, in its own process
					model := map[string]string{"a": "alpha", "b": "bravo-1", "c": "charlie", "d": "delta"}
					for k, v := range model {
						mustPut(t, user, k, v)
					}
					// Reads through the user's store at every step of every
					// move: the object is always in at least one tier.
					hotH := &hooked{Store: hotF, name: "hot"}
					hotH.at = func(string, string) { checkModel(t, user, model, nil) }
					crashed := manual(t, hotH, coldF)
					f := map[string]*fault.Store{"hot": hotF, "cold": coldF}[step.tier]
					f.Add(fault.Rule{Op: step.op, Skip: nth - 1, Count: 1, Effect: effect})
					res := crashed.CompactOnce(ctxT(t))
					if st := f.Stats()[step.op]; st.Failures != 1 {
						t.Fatalf("fault fired %d times, want 1 (pass %+v)", st.Failures, res)
					}
					if res.Failed == 0 && !(effect == fault.FailAfter && step.op == fault.OpReadData) {
						t.Errorf("pass %+v reported no failure", res)
					}
					hotH.at = nil
					checkModel(t, user, model, nil)

					// While the crashed compactor is down the user overwrites
					// one object and deletes another, either of which may have
					// a copy in cold from the failed move.
					model["b"] = "bravo-2"
					mustPut(t, user, "b", model["b"])
					if err := user.Delete(ctxT(t), "c", nil); err != nil {
						t.Fatal(err)
					}
					delete(model, "c")
					checkModel(t, user, model, []string{"c"})

					restarted := manual(t, hot, cold)
					if res := restarted.CompactOnce(ctxT(t)); res.Failed != 0 {
						t.Fatalf("restarted pass failed: %+v", res)
					}
					checkModel(t, user, model, []string{"c"})
					if left := listKeys(t, hot); len(left) != 0 {
						t.Errorf("hot still holds %q after the rerun", left)
					}
					got := listKeys(t, cold)
					want := []string{"a", "b", "d"}
					if !slices.Equal(got, want) {
						t.Errorf("cold holds %q, want %q", got, want)
					}
					// Cold copies carry the generation the object had in hot,
					// stripped from what users see.
					for _, k := range want {
						a, err := user.Stat(ctxT(t), k)
						if err != nil || a.Generation == "" || len(a.Metadata) != 0 {
							t.Errorf("%s: attributes %+v, %v", k, a, err)
						}
					}
				})
			}
		}
	}
}

// A failed cleanup of a stale cold copy is retried until it succeeds.
func TestFailedCleanupIsRetried(t *testing.T) {
	hot, cold := memPair(t)
	coldF := fault.Wrap(cold, fault.Options{Seed: 3})
	user := manual(t, hot, cold)
	mustPut(t, user, "k", "v")
	coldH := &hooked{Store: coldF, name: "cold"}
	coldH.at = func(step, key string) {
		if step == "cold:write" {
			// Another process deletes k after the compactor read it and before
			// its copy lands; the compactor's removal of the copy fails once.
			if err := user.Delete(ctxT(t), key, nil); err != nil {
				t.Error(err)
			}
			coldF.FailNth(fault.OpDelete, 1, nil)
		}
	}
	s := manual(t, hot, coldH)
	s.CompactOnce(ctxT(t))
	coldH.at = nil
	if st := s.Stats(); st.PendingCleanups != 1 || st.Conflicts != 1 {
		t.Fatalf("stats %+v: want 1 pending cleanup after 1 conflict", st)
	}
	s.CompactOnce(ctxT(t))
	if st := s.Stats(); st.PendingCleanups != 0 {
		t.Fatalf("stats %+v: cleanup not retried", st)
	}
	checkModel(t, user, nil, []string{"k"})
	if _, err := cold.Stat(ctxT(t), "k"); err == nil {
		t.Error("the stale copy is still in cold")
	}
}
