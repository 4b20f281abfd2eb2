package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/reconcile"
	"github.com/zonalblob/zonalblob/tiered"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "replay TestSimulation with this seed (0: a new one)")
	simSteps = flag.Int("sim.steps", 2000, "steps of TestSimulation")
	simSeeds = flag.Int("sim.seeds", 1, "seeds TestSimulation runs, one after another from -sim.seed")
	// The quorum mode is slower per step (every hot call is a round over
	// three replicas, and faults make moves fail and recover), so it runs
	// fewer steps by default.
	simQuorumSteps = flag.Int("sim.quorumsteps", 500, "steps of TestSimulation's quorum mode")
)

// simRecentGone is how many deleted keys each full check reads back. Older
// ones are checked by the listing, which must equal the model: a deleted key
// that came back would be listed. (Reading every key ever deleted made a
// check grow with the run, and a long run quadratic.)
const simRecentGone = 512

// sim is a seeded, single-threaded model check: a user process puts,
// overwrites, deletes and creates objects through one tiered store, while a
// second store over the same tiers compacts with injected faults, crashes and
// restarts, and a reconciler removes orphans. User actions also run inside
// moves, at hooked calls, to hit every race. The model is what the user was
// acknowledged; any difference is a violation.
type sim struct {
	t          *testing.T
	rng        *rand.Rand
	hot, cold  blob.Store
	hotF       *fault.Store
	coldF      *fault.Store
	user       *tiered.Store
	compactor  *tiered.Store
	model      map[string]string // acknowledged content
	gone       map[string]bool   // acknowledged deletes not since rewritten
	goneOrder  []string          // keys of gone, oldest first (may repeat)
	referenced map[string]bool   // tmp/ objects someone still refers to
	offset     time.Duration     // the reconciler's clock runs ahead of real time
	violations []string
	counts     map[string]int
	total      tiered.Stats // of the compactors before the current one
	quiet      bool         // no user actions inside moves
	// moving is the key of the move under way. A key another process deletes
	// while it moves may be read from the move's copy until the move (or, if
	// it failed, the recovery of its marker) removes the copy: settling holds
	// such keys until no marker is left.
	moving   string
	settling map[string]bool
	seq      int
	// packObjects is the compactor's PackMaxObjects (negative: each object
	// moved on its own).
	packObjects int
	// Over a quorum: the compactor's quorum client (over the fault-wrapped,
	// hooked replicas), and the replicas' fault wrappers.
	compactorHot blob.Store
	replicaFs    []*fault.Store
	duringMu     sync.Mutex
	inPass       bool // under duringMu
	overQuorum   bool // set before any replica is hooked: read by during
}

const simGrace = 30 * time.Second

// simMoveTimeout is short so that the pack log's window (two move timeouts
// and the clock skew) is short too: packs age past it, and are rewritten,
// within a run.
const simMoveTimeout = 250 * time.Millisecond

// simIndexCache holds about two packs' indexes, so that the stores read
// indexes back from their packs all the time.
const simIndexCache = 4 << 10

// markerPrefix is tiered's prefix of move markers in the hot store.
const markerPrefix = "\U0010FFFD\U0010FFFD"

func TestSimulation(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	for _, mode := range []struct {
		name        string
		packObjects int
		quorum      bool
	}{{"alone", alone, false}, {"packs", 4, false}, {"quorum", 4, true}} {
		steps, stepsFlag := *simSteps, "steps"
		if mode.quorum {
			steps, stepsFlag = *simQuorumSteps, "quorumsteps"
		}
		t.Run(mode.name, func(t *testing.T) {
			total := map[string]int{}
			for i := range max(*simSeeds, 1) {
				sd := seed + uint64(i)
				t.Logf("seed %d (replay: go test ./tiered -run TestSimulation/%s -sim.seed=%d -sim.%s=%d)", sd, mode.name, sd, stepsFlag, steps)
				for k, v := range runSimulation(t, sd, steps, mode.packObjects, mode.quorum) {
					total[k] += v
				}
				if t.Failed() {
					return
				}
			}
			user := total["put"] + total["conditional put"] + total["delete"] + total["create"]
			t.Logf("%d seeds, %d steps each: %d user writes and deletes (%d puts, %d conditional puts, %d deletes, %d creates; %d user actions inside moves), %d reads, %d compaction passes, %d compactor restarts, %d reconciler runs; 0 violations",
				max(*simSeeds, 1), steps, user, total["put"], total["conditional put"], total["delete"], total["create"], total["action inside a move"],
				total["read"], total["compaction pass"], total["compactor restart"], total["reconciler run"])
		})
	}
}

// runSimulation runs one seed and returns what it did, by action. With
// overQuorum the hot tier is a 2-of-3 quorum: the user's and the
// compactor's quorum clients share three replicas, faults are injected on
// one replica at a time under the compactor's, and pack moves retire what
// they packed.
func runSimulation(t *testing.T, seed uint64, steps, packObjects int, overQuorum bool) map[string]int {
	hot, cold := memPair(t)
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), hot: hot, cold: cold,
		hotF:  fault.Wrap(hot, fault.Options{Seed: seed, Name: "hot"}),
		coldF: fault.Wrap(cold, fault.Options{Seed: seed + 1, Name: "cold"}),
		model: map[string]string{}, gone: map[string]bool{}, referenced: map[string]bool{}, counts: map[string]int{},
		settling: map[string]bool{}, packObjects: packObjects, overQuorum: overQuorum,
	}
	userHot := hot
	if overQuorum {
		// Rounds bounded tighter than by default, so that retirements are
		// confirmed within a run (InFlightBound), and the same for both
		// clients: a confirmation waits out the other's operations too.
		tune := func(o *quorum.Options) {
			o.StragglerTimeout, o.ProbeInterval = time.Second, 10*time.Millisecond
		}
		var raw, faulted []blob.Store
		for i := range 3 {
			r, _ := memPair(t)
			f := fault.Wrap(r, fault.Options{Seed: seed + 20 + uint64(i), Name: fmt.Sprint("hot", i)})
			s.replicaFs = append(s.replicaFs, f)
			raw, faulted = append(raw, nopClose{r}), append(faulted, &hooked{Store: f, name: "hot", at: func(step, key string) { s.during(step, key) }})
		}
		userHot = newQuorum(t, raw, tune)
		s.hot = userHot
		s.compactorHot = newQuorum(t, faulted, tune)
	}
	s.user = manualWith(t, userHot, cold, tiered.Options{PackMaxObjects: packObjects, MoveTimeout: simMoveTimeout, MaxClockSkew: time.Millisecond, IndexCacheBytes: simIndexCache})
	s.restart()
	for step := 0; step < steps && len(s.violations) < 20; step++ {
		s.offset += time.Duration(s.rng.IntN(3)) * time.Second
		switch r := s.rng.IntN(100); {
		case r < 30:
			s.put(s.randomKey())
		case r < 40:
			s.conditionalPut(s.randomKey())
		case r < 52:
			s.delete(s.randomKey())
		case r < 62:
			s.create()
		case r < 67:
			s.dropReference()
		case r < 90:
			s.compact()
		case r < 94:
			s.restart()
		default:
			s.reconcile()
		}
		if step%50 == 0 {
			s.checkAll("step " + fmt.Sprint(step))
		}
		if step > 0 && step%10000 == 0 {
			t.Logf("step %d: %d violations so far", step, len(s.violations))
		}
	}
	// With faults and users gone, one pass moves everything and the model
	// still holds.
	s.quiet = true
	s.resetFaults()
	// Graves are retired once no move that read what they deleted can be
	// running: a move's timeout (and the clock skew allowed) later.
	time.Sleep(tiered.GraveHold(simMoveTimeout, time.Millisecond))
	if res := s.compactor.CompactOnce(ctxT(t)); res.Failed != 0 {
		s.violate("final pass failed: %+v", res)
	}
	if s.markers() == 0 {
		clear(s.settling)
	}
	s.checkAll("end")
	if left := listKeys(t, hot); len(left) != 0 {
		s.violate("hot holds %q after the final pass", left)
	}
	if len(s.settling) != 0 {
		s.violate("keys still settling after the final pass: %v", s.settling)
	}
	s.addStats()
	t.Logf("actions %v; %d deletes raced a move of their key", s.counts, s.counts["delete racing its move"])
	t.Logf("compactors moved %d objects (%d bytes), %d conflicts with users, %d failed moves; %d packs written, %d rewritten, %d tombstones by maintenance",
		s.total.MovedObjects, s.total.MovedBytes, s.total.Conflicts, s.total.Errors, s.total.Packs, s.total.Rewrites, s.total.Tombstones)
	if st := s.user.Stats(); st.Tombstones > 0 {
		t.Logf("the user's deletes wrote %d tombstones", st.Tombstones)
	}
	if len(s.violations) > 0 {
		t.Fatalf("%d violations with seed %d:\n%s", len(s.violations), seed, joinLines(s.violations))
	}
	t.Logf("0 violations")
	return s.counts
}

func joinLines(ss []string) string {
	var b bytes.Buffer
	for _, s := range ss {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// violate records a violation, and logs it at once: a long run shows what
// went wrong while it is still running.
func (s *sim) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	s.violations = append(s.violations, v)
	s.t.Logf("violation: %s", v)
}

func (s *sim) randomKey() string { return fmt.Sprintf("k%02d", s.rng.IntN(16)) }

func (s *sim) value(key string) string {
	s.seq++
	return fmt.Sprintf("%s#%d%s", key, s.seq, bytes.Repeat([]byte{'.'}, s.rng.IntN(64)))
}

func (s *sim) put(key string) {
	s.counts["put"]++
	v := s.value(key)
	if err := blob.Put(ctxT(s.t), s.user, key, []byte(v), nil); err != nil {
		s.violate("put %s: %v", key, err)
		return
	}
	s.model[key] = v
	delete(s.gone, key)
	delete(s.settling, key)
}

func (s *sim) conditionalPut(key string) {
	s.counts["conditional put"]++
	v := s.value(key)
	old, exists := s.model[key]
	if !exists {
		err := blob.Put(ctxT(s.t), s.user, key, []byte(v), &blob.WriterOptions{If: blob.IfNotExist()})
		if errors.Is(err, blob.ErrExists) && s.settling[key] {
			return // the copy of a move still settling is seen
		}
		if err != nil {
			s.violate("IfNotExist put of absent %s: %v", key, err)
			return
		}
		s.model[key] = v
		delete(s.gone, key)
		return
	}
	a, err := s.user.Stat(ctxT(s.t), key)
	if err != nil {
		s.violate("stat %s (holding %q): %v", key, old, err)
		return
	}
	if err := blob.Put(ctxT(s.t), s.user, key, []byte("never"), &blob.WriterOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrExists) {
		s.violate("IfNotExist put of existing %s: %v, want ErrExists", key, err)
	}
	if err := blob.Put(ctxT(s.t), s.user, key, []byte(v), &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)}); err != nil {
		s.violate("IfGenerationMatch put of %s at its current generation: %v", key, err)
		return
	}
	s.model[key] = v
}

func (s *sim) delete(key string) {
	s.counts["delete"]++
	err := s.user.Delete(ctxT(s.t), key, nil)
	_, exists := s.model[key]
	switch {
	case exists && err != nil:
		s.violate("delete of %s: %v", key, err)
	case !exists && !errors.Is(err, blob.ErrNotFound) && !(err == nil && s.settling[key]):
		s.violate("delete of absent %s: %v, want ErrNotFound", key, err)
	}
	delete(s.model, key)
	delete(s.referenced, key)
	s.markGone(key)
}

// markGone records an acknowledged delete of key.
func (s *sim) markGone(key string) {
	s.gone[key] = true
	s.goneOrder = append(s.goneOrder, key)
}

func (s *sim) create() {
	s.counts["create"]++
	v := s.value("tmp")
	key, err := blob.CreateBytes(ctxT(s.t), s.user, "tmp/", []byte(v), nil)
	if err != nil {
		s.violate("create: %v", err)
		return
	}
	s.model[key] = v
	s.referenced[key] = s.rng.IntN(3) > 0
}

func (s *sim) dropReference() {
	var live []string
	for k, ref := range s.referenced {
		if ref {
			live = append(live, k)
		}
	}
	if len(live) == 0 {
		return
	}
	slices.Sort(live) // map order is random; the seed must replay
	s.referenced[live[s.rng.IntN(len(live))]] = false
}

// compact runs one pass of the compactor with faults armed, and user actions
// at hooked calls inside the moves.
func (s *sim) compact() {
	s.counts["compaction pass"]++
	ops := []fault.Op{fault.OpStat, fault.OpRead, fault.OpReadData, fault.OpWrite, fault.OpWriteData, fault.OpCommit, fault.OpDelete, fault.OpList}
	for range s.rng.IntN(3) {
		f := s.hotF
		if s.replicaFs != nil {
			f = s.replicaFs[s.rng.IntN(len(s.replicaFs))]
		}
		if s.rng.IntN(2) == 0 {
			f = s.coldF
		}
		f.Add(fault.Rule{Op: ops[s.rng.IntN(len(ops))], Probability: 0.3, Effect: fault.Effect(s.rng.IntN(2))})
	}
	s.setInPass(true)
	s.compactor.CompactOnce(ctxT(s.t))
	s.setInPass(false) // and a hook that began in the pass has ended
	s.moving = ""
	s.resetFaults()
	if s.markers() == 0 {
		clear(s.settling)
	}
}

func (s *sim) setInPass(v bool) {
	s.duringMu.Lock()
	s.inPass = v
	s.duringMu.Unlock()
}

func (s *sim) resetFaults() {
	s.hotF.Reset()
	s.coldF.Reset()
	for _, f := range s.replicaFs {
		f.Reset()
	}
}

func (s *sim) markers() int {
	n := 0
	for _, k := range listKeys(s.t, s.hot) {
		if strings.HasPrefix(k, markerPrefix) {
			n++
		}
	}
	return n
}

// during runs at every hooked call of a move: sometimes the user acts on the
// key being moved (or another), and reads must always find acknowledged data.
func (s *sim) during(step, key string) {
	// A quorum calls its replicas at once, and finishes some calls in the
	// background after an operation returns: one hook at a time, and only
	// while a pass runs (the user is otherwise the main loop).
	s.duringMu.Lock()
	defer s.duringMu.Unlock()
	// overQuorum, not compactorHot: the quorum's prober calls a hooked
	// replica before newQuorum returns the store to assign.
	if s.overQuorum && !s.inPass {
		return
	}
	if !strings.HasPrefix(key, markerPrefix) {
		s.moving = key
	}
	if s.quiet || s.rng.IntN(100) >= 8 {
		return
	}
	s.counts["action inside a move"]++
	if s.rng.IntN(10) < 3 || key == "" || len(key) > 3 {
		key = s.randomKey()
	}
	switch s.rng.IntN(4) {
	case 0:
		s.put(key)
	case 1:
		s.conditionalPut(key)
	case 2:
		s.delete(key)
		if key == s.moving {
			s.counts["delete racing its move"]++
			s.settling[key] = true
		}
	case 3:
		s.checkKey(key, "inside a move at "+step)
	}
}

// restart drops the compactor as a crash would and starts a new one.
func (s *sim) restart() {
	s.counts["compactor restart"]++
	if s.compactor != nil {
		s.addStats()
	}
	at := func(step, key string) { s.during(step, key) }
	var hot blob.Store = &hooked{Store: s.hotF, name: "hot", at: at}
	if s.compactorHot != nil {
		// The compactor's quorum client outlives its crashes: it is the
		// tiered store's state that a crash loses.
		hot = s.compactorHot
	}
	c, err := tiered.New(hot, &hooked{Store: s.coldF, name: "cold", at: at},
		bound(tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 1, Owner: "sim-compactor", PackMaxObjects: s.packObjects,
			MoveTimeout: simMoveTimeout, MaxClockSkew: time.Millisecond, IndexCacheBytes: simIndexCache}))
	if err != nil {
		s.t.Fatal(err)
	}
	s.compactor = c
}

func (s *sim) reconcile() {
	s.counts["reconciler run"]++
	dry := s.rng.IntN(4) == 0
	now := time.Now().Add(s.offset)
	r, err := reconcile.New(s.user, reconcile.Options{
		Prefix: "tmp/", GraceWindow: simGrace, MaxItemAge: 10 * time.Second, WriteTimeout: 10 * time.Second,
		DryRun: dry, Concurrency: 1, Now: func() time.Time { return now },
		IsLive: func(_ context.Context, k string) (bool, error) { return s.referenced[k], nil },
	})
	if err != nil {
		s.t.Fatal(err)
	}
	rep, err := r.Run(ctxT(s.t))
	if err != nil || len(rep.Errors) > 0 {
		s.violate("reconciler: %v %v", err, rep.Errors)
		return
	}
	deleted := map[string]bool{}
	for _, k := range rep.Deleted {
		deleted[k] = true
	}
	for k := range s.model {
		born, ok := blob.NameTime(k)
		if !ok {
			continue
		}
		orphan := !s.referenced[k] && now.Sub(born) > simGrace
		switch {
		case deleted[k] && !orphan:
			s.violate("reconciler deleted %s (referenced %v, age %v)", k, s.referenced[k], now.Sub(born))
		case !deleted[k] && orphan:
			s.violate("reconciler kept orphan %s (age %v)", k, now.Sub(born))
		}
		if deleted[k] && !dry {
			delete(s.model, k)
			delete(s.referenced, k)
			s.markGone(k)
		}
	}
	s.checkAll("after reconcile")
}

func (s *sim) checkKey(key, when string) {
	s.counts["read"]++
	got, err := blob.ReadAll(ctxT(s.t), s.user, key)
	want, exists := s.model[key]
	switch {
	case exists && (err != nil || string(got) != want):
		s.violate("%s: %s reads %.20q, %v; want %.20q", when, key, got, err, want)
	case !exists && s.gone[key] && !s.settling[key] && !errors.Is(err, blob.ErrNotFound):
		s.violate("%s: deleted %s came back: %.20q, %v", when, key, got, err)
	}
}

func (s *sim) checkAll(when string) {
	keys := make([]string, 0, len(s.model)+len(s.gone))
	for k := range s.model {
		keys = append(keys, k)
	}
	if n := len(s.goneOrder); n > 2*simRecentGone {
		s.goneOrder = slices.Delete(s.goneOrder, 0, n-simRecentGone)
	}
	for _, k := range s.goneOrder[max(0, len(s.goneOrder)-simRecentGone):] {
		if s.gone[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		s.checkKey(k, when)
	}
	// The merged listing is exactly the model.
	var want []string
	for k := range s.model {
		want = append(want, k)
	}
	slices.Sort(want)
	got := slices.DeleteFunc(listKeys(s.t, s.user), func(k string) bool { _, ok := s.model[k]; return !ok && s.settling[k] })
	if !slices.Equal(got, want) {
		s.violate("%s: listing %q, want %q", when, got, want)
	}
}

func (s *sim) addStats() {
	st := s.compactor.Stats()
	s.total.MovedObjects += st.MovedObjects
	s.total.MovedBytes += st.MovedBytes
	s.total.Conflicts += st.Conflicts
	s.total.Errors += st.Errors
	s.total.Packs += st.Packs
	s.total.Rewrites += st.Rewrites
	s.total.Tombstones += st.Tombstones
}
