package tiered_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/tiered"
)

// Another process deletes the object after the compactor read it, and the
// compactor dies right after its pack landed (or at a later step), so it
// never learns of the delete: the Delete's grave, which the move's
// conditional removal from hot left alone, must keep the packed copy
// unseen until it is retired with it.
func TestDeleteRacingACrashedMove(t *testing.T) {
	for _, crash := range []struct {
		name   string
		tier   string
		op     fault.Op
		key    string
		effect fault.Effect
	}{
		{"after the commit", "cold", fault.OpCommit, logPrefix, fault.FailAfter},
		{"at the verify", "cold", fault.OpStat, logPrefix, fault.FailBefore},
		{"at the hot delete", "hot", fault.OpDelete, "k", fault.FailBefore},
	} {
		t.Run(crash.name, func(t *testing.T) {
			hot, cold := memPair(t)
			hotF := fault.Wrap(hot, fault.Options{Seed: 1})
			coldF := fault.Wrap(cold, fault.Options{Seed: 2})
			user := manual(t, hot, cold)
			mustPut(t, user, "k", "value of k")
			mustPut(t, user, "other", "stays")
			var once sync.Once
			coldH := &hooked{Store: coldF, name: "cold", at: func(step, key string) {
				if step == "cold:write" && strings.HasPrefix(key, logPrefix) {
					// The pack of k (keys are moved in order).
					once.Do(func() {
						if err := user.Delete(ctxT(t), "k", nil); err != nil {
							t.Error(err)
						}
						f := map[string]*fault.Store{"hot": hotF, "cold": coldF}[crash.tier]
						// Only the compactor's own calls reach f from here on.
						f.Add(fault.Rule{Op: crash.op, KeyPrefix: crash.key, Count: 1, Effect: crash.effect})
					})
				}
			}}
			crashed := manual(t, hotF, coldH)
			if res := crashed.CompactOnce(ctxT(t)); res.Failed != 1 {
				t.Fatalf("pass %+v: want the injected failure", res)
			}
			restarted := manual(t, hot, cold)
			if res := restarted.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Fatalf("restarted pass %+v", res)
			}
			checkModel(t, user, map[string]string{"other": "stays"}, []string{"k"})
			retireGraves(t, hot, cold, aloneOpts)
			checkModel(t, user, map[string]string{"other": "stays"}, []string{"k"})
			if got := listKeys(t, user); !slices.Equal(got, []string{"other"}) {
				t.Errorf("the store lists %q", got)
			}
			if got := listKeys(t, hot); len(got) != 0 {
				t.Errorf("hot holds %q (locks included)", got)
			}
			if left := markersIn(t, cold); len(left) != 0 {
				t.Errorf("cold still holds the move markers %q", left)
			}
		})
	}
}

// packOpts are the options of the pack crash tests: packs of up to 10
// objects, and a pack log window short enough (two move timeouts and the
// clock skew) for a pack to become old enough to rewrite within the test.
var packOpts = tiered.Options{PackMaxObjects: 10, MoveTimeout: 100 * time.Millisecond, MaxClockSkew: time.Millisecond}

// packMoveOpts give the pack move crash test's moves room: it checks the
// model inside every hot call of the move, which on a loaded machine under
// the race detector outlasted 100ms.
var packMoveOpts = func() tiered.Options { o := packOpts; o.MoveTimeout = 2 * time.Second; return o }()

// packSteps counts the calls a pass makes on each tier, for a crash test to
// fail each one in turn.
type packStep struct {
	tier string
	op   fault.Op
	nth  int
}

func countSteps(t *testing.T, hotF, coldF *fault.Store, before map[string]map[fault.Op]int64) []packStep {
	t.Helper()
	var steps []packStep
	for tier, f := range map[string]*fault.Store{"hot": hotF, "cold": coldF} {
		for op, st := range f.Stats() {
			for n := 1; n <= int(st.Calls-before[tier][op]); n++ {
				steps = append(steps, packStep{tier, op, int(before[tier][op]) + n})
			}
		}
	}
	slices.SortFunc(steps, func(a, b packStep) int {
		return cmp.Or(cmp.Compare(a.tier, b.tier), cmp.Compare(a.op, b.op), cmp.Compare(a.nth, b.nth))
	})
	return steps
}

var effectNames = map[fault.Effect]string{fault.FailBefore: "before", fault.FailAfter: "after"}

// TestPackCrashAtEveryStep fails, in turn, every call of a pass that moves
// four objects (the marker, the Stats and reads, the pack log's listing and
// loads, the pack's write and verify, the removals from hot, the marker's
// delete, the maintenance's listing), before and after it reaches the
// store (after: the call happened but the compactor was told it failed, as
// when a process dies before it hears the answer). In one pack, and alone:
// each object a pack of its own whose bytes are streamed, read from hot
// twice. Reads at every step see every acknowledged object; after a restart
// the pass completes, hot ends empty, nothing deleted comes back.
func TestPackCrashAtEveryStep(t *testing.T) {
	// Four packs wait hotDeleteDelay each: a shorter MoveTimeout (a tenth
	// of it) keeps the cases short, while a move of one object still fits
	// in it with a check of the model at every call.
	alone := packMoveOpts
	alone.PackMaxBytes, alone.MoveTimeout = 1, time.Second
	for _, mode := range []struct {
		name string
		opts tiered.Options
	}{{"one-pack", packMoveOpts}, {"alone", alone}} {
		t.Run(mode.name, func(t *testing.T) { packCrashAtEveryStep(t, mode.opts) })
	}
}

func packCrashAtEveryStep(t *testing.T, opts tiered.Options) {
	var steps []packStep
	// The cold Stats that find nothing (of the pack log's inventory, before
	// the first pass writes it): a failure after one reaches the store is
	// the miss itself, so those steps are failed before only.
	misses := &statMisses{}
	packs := int64(1)
	if opts.PackMaxBytes == 1 {
		packs = 4
	}
	{
		hot, cold := memPair(t)
		hotF := fault.Wrap(hot, fault.Options{Name: "hot"})
		coldF := fault.Wrap(misses, fault.Options{Name: "cold"})
		misses.Store = cold
		for _, k := range []string{"a", "b", "c", "d"} {
			mustPut(t, hot, k, k+"-value")
		}
		s := manualWith(t, hotF, coldF, opts)
		if res := s.CompactOnce(ctxT(t)); res.Moved != 4 || s.Stats().Packs != packs {
			t.Fatalf("clean pass %+v, stats %+v", res, s.Stats())
		}
		steps = countSteps(t, hotF, coldF, nil)
		if len(steps) < 20 {
			t.Fatalf("a pack move made only %d calls: %v", len(steps), steps)
		}
	}
	for _, step := range steps {
		for _, effect := range []fault.Effect{fault.FailBefore, fault.FailAfter} {
			if effect == fault.FailAfter && step.tier == "cold" && step.op == fault.OpStat && misses.missed[step.nth] {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s-%d-%s", step.tier, step.op, step.nth, effectNames[effect]), func(t *testing.T) {
				// Most of a case is waiting (hotDeleteDelay, the bury
				// window): the cases run side by side.
				t.Parallel()
				hot, cold := memPair(t)
				hotF := fault.Wrap(hot, fault.Options{Seed: 1, Name: "hot"})
				coldF := fault.Wrap(cold, fault.Options{Seed: 2, Name: "cold"})
				user := manualWith(t, hot, cold, opts)
				model := map[string]string{"a": "alpha", "b": "bravo-1", "c": "charlie", "d": "delta"}
				for k, v := range model {
					mustPut(t, user, k, v)
				}
				hotH := &hooked{Store: hotF, name: "hot"}
				hotH.at = func(string, string) { checkModel(t, user, model, nil) }
				crashed := manualWith(t, hotH, coldF, opts)
				f := map[string]*fault.Store{"hot": hotF, "cold": coldF}[step.tier]
				f.Add(fault.Rule{Op: step.op, Skip: step.nth - 1, Count: 1, Effect: effect})
				res := crashed.CompactOnce(ctxT(t))
				if st := f.Stats()[step.op]; st.Failures != 1 {
					t.Fatalf("fault fired %d times, want 1 (pass %+v)", st.Failures, res)
				}
				hotH.at = nil
				checkModel(t, user, model, nil)

				// While the crashed compactor is down the user overwrites
				// one object and deletes another, either of which may be in
				// a pack the failed move left.
				model["b"] = "bravo-2"
				mustPut(t, user, "b", model["b"])
				if err := user.Delete(ctxT(t), "c", nil); err != nil {
					t.Fatal(err)
				}
				delete(model, "c")
				checkModel(t, user, model, []string{"c"})

				restarted := manualWith(t, hot, cold, opts)
				if res := restarted.CompactOnce(ctxT(t)); res.Failed != 0 {
					t.Fatalf("restarted pass failed: %+v", res)
				}
				checkModel(t, user, model, []string{"c"})
				// The Delete's grave over c goes once no move can still
				// be taking the version it deleted.
				retireGraves(t, hot, cold, opts)
				checkModel(t, user, model, []string{"c"})
				if left := listKeys(t, hot); len(left) != 0 {
					t.Errorf("hot still holds %q after the rerun (markers included)", left)
				}
				if got, want := listKeys(t, user), []string{"a", "b", "d"}; !slices.Equal(got, want) {
					t.Errorf("listing %q, want %q", got, want)
				}
				for _, k := range listKeys(t, cold) {
					if !strings.HasPrefix(k, markerPrefix) {
						t.Errorf("cold holds %q outside the pack log", k)
					}
				}
				for _, k := range []string{"a", "b", "d"} {
					a, err := user.Stat(ctxT(t), k)
					if err != nil || a.Generation == "" || a.Size != int64(len(model[k])) {
						t.Errorf("%s: attributes %+v, %v", k, a, err)
					}
				}
			})
		}
	}
}

// TestPackRewriteCrashAtEveryStep fails, in turn, every call of a pass that
// rewrites a pack whose objects were mostly deleted (one of four live), and
// then lets a restarted compactor finish. The live object reads back at
// every step, the deleted ones never do, and in the end one pack holds the
// live object alone.
func TestPackRewriteCrashAtEveryStep(t *testing.T) {
	setup := func(t *testing.T, hot, cold blob.Store) *tiered.Store {
		user := manualWith(t, hot, cold, packOpts)
		for _, k := range []string{"a", "b", "c", "d"} {
			mustPut(t, user, k, k+"-value")
		}
		if res := user.CompactOnce(ctxT(t)); res.Moved != 4 {
			t.Fatalf("packing pass %+v", res)
		}
		for _, k := range []string{"a", "b", "c"} {
			if err := user.Delete(ctxT(t), k, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Past the pack log's window: the pack may now be rewritten.
		time.Sleep(2*packOpts.MoveTimeout + packOpts.MaxClockSkew + 50*time.Millisecond)
		return user
	}
	packs := func(t *testing.T, cold blob.Store) []string {
		var out []string
		for _, k := range listKeys(t, cold) {
			if strings.Contains(k, "-p-") {
				out = append(out, k)
			}
		}
		return out
	}
	var steps []packStep
	misses := &statMisses{} // as in TestPackCrashAtEveryStep
	{
		hot, cold := memPair(t)
		hotF := fault.Wrap(hot, fault.Options{Name: "hot"})
		coldF := fault.Wrap(misses, fault.Options{Name: "cold"})
		misses.Store = cold
		setup(t, hot, cold)
		before := packs(t, cold)
		s := manualWith(t, hotF, coldF, packOpts)
		if s.CompactOnce(ctxT(t)); s.Stats().Rewrites != 1 {
			t.Fatalf("clean rewrite pass: stats %+v", s.Stats())
		}
		if after := packs(t, cold); len(before) != 1 || len(after) != 1 || after[0] == before[0] {
			t.Fatalf("packs %q before the rewrite, %q after", before, after)
		}
		steps = countSteps(t, hotF, coldF, nil)
	}
	for _, step := range steps {
		for _, effect := range []fault.Effect{fault.FailBefore, fault.FailAfter} {
			if effect == fault.FailAfter && step.tier == "cold" && step.op == fault.OpStat && misses.missed[step.nth] {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s-%d-%s", step.tier, step.op, step.nth, effectNames[effect]), func(t *testing.T) {
				hot, cold := memPair(t)
				user := setup(t, hot, cold)
				hotF := fault.Wrap(hot, fault.Options{Seed: 1, Name: "hot"})
				coldF := fault.Wrap(cold, fault.Options{Seed: 2, Name: "cold"})
				model := map[string]string{"d": "d-value"}
				gone := []string{"a", "b", "c"}
				coldH := &hooked{Store: coldF, name: "cold"}
				coldH.at = func(string, string) { checkModel(t, user, model, gone) }
				crashed := manualWith(t, hotF, coldH, packOpts)
				f := map[string]*fault.Store{"hot": hotF, "cold": coldF}[step.tier]
				f.Add(fault.Rule{Op: step.op, Skip: step.nth - 1, Count: 1, Effect: effect})
				crashed.CompactOnce(ctxT(t))
				if st := f.Stats()[step.op]; st.Failures != 1 {
					t.Fatalf("fault fired %d times, want 1", st.Failures)
				}
				coldH.at = nil
				checkModel(t, user, model, gone)
				restarted := manualWith(t, hot, cold, packOpts)
				if res := restarted.CompactOnce(ctxT(t)); res.Failed != 0 {
					t.Fatalf("restarted pass failed: %+v", res)
				}
				checkModel(t, user, model, gone)
				if got := listKeys(t, user); !slices.Equal(got, []string{"d"}) {
					t.Errorf("listing %q, want [d]", got)
				}
				// A crash after the new pack landed leaves two packs for a
				// moment; the restarted pass removes the old one, or, if it
				// was already gone, there was one all along.
				if p := packs(t, cold); len(p) != 1 {
					t.Errorf("packs %q after the restarted pass, want one", p)
				}
			})
		}
	}
}

// statMisses records which of its Stats (counted from 1) found no object.
type statMisses struct {
	blob.Store
	mu     sync.Mutex
	n      int
	missed map[int]bool
}

func (m *statMisses) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	a, err := m.Store.Stat(ctx, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	if errors.Is(err, blob.ErrNotFound) {
		if m.missed == nil {
			m.missed = map[int]bool{}
		}
		m.missed[m.n] = true
	}
	return a, err
}
