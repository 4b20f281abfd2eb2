package quorum_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
)

var (
	simSeed  = flag.Uint64("sim.seed", 0, "first simulation seed (0: $QUORUM_SIM_SEED, else 1)")
	simSeeds = flag.Int("sim.seeds", 4, "number of seeds TestSimulation runs")
	simOps   = flag.Int("sim.ops", 60, "operations per client per seed")
	simN     = flag.Int("sim.replicas", 3, "replicas in TestSimulation")
	simW     = flag.Int("sim.w", 0, "write quorum in TestSimulation (0: a majority)")
)

func firstSeed() uint64 {
	if *simSeed != 0 {
		return *simSeed
	}
	if v := os.Getenv("QUORUM_SIM_SEED"); v != "" {
		if s, err := strconv.ParseUint(v, 10, 64); err == nil {
			return s
		}
	}
	return 1
}

var allOps = []fault.Op{fault.OpRead, fault.OpReadData, fault.OpWrite, fault.OpWriteData, fault.OpCommit, fault.OpStat, fault.OpList, fault.OpDelete}

// workload is one seeded client: random plain, conditional and creating
// writes, unconditional and conditional deletes, and majority reads on a
// few shared keys, every operation recorded in h. Conditional operations
// carry the generation of the client's last read of the key.
type workload struct {
	h       *history
	keys    int
	seen    map[string][2]string // key -> value, generation last read
	rng     *rand.Rand
	id      int
	timeout time.Duration
	fast    *fastestCheck
	// read: generations this client read by majority since its last
	// acknowledged write of the key; gone: those its acknowledged writes
	// and deletes replaced, which its fastest reads must never return.
	read, gone map[string]map[string]bool
}

// fastestCheck holds fastest reads to what ReadFastest promises, which the
// register model (for majority reads) does not state: a read's bytes are
// those of the version whose attributes it returns (every read of one
// generation, by any client and either consistency, returns the same bytes,
// as many as its size, never a tombstone's), and a process never reads a
// version older than its own acknowledged writes.
type fastestCheck struct {
	mu         sync.Mutex
	bytes      map[string]string // generation -> value
	violations []string
	reads      int
}

func (f *fastestCheck) violation(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

// observe checks one read's value against its attributes and every other
// read of its generation.
func (f *fastestCheck) observe(key, value string, a *blob.Attributes) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if int64(len(value)) != a.Size {
		f.violations = append(f.violations, fmt.Sprintf("%s: read %q under attributes of size %d", key, value, a.Size))
	}
	if strings.HasPrefix(value, "\x00zonalblob-quorum") {
		f.violations = append(f.violations, fmt.Sprintf("%s: read a tombstone's or placeholder's bytes", key))
	}
	if prev, ok := f.bytes[a.Generation]; ok && prev != value {
		f.violations = append(f.violations, fmt.Sprintf("%s: generation %s read as %q and as %q", key, a.Generation, prev, value))
	}
	f.bytes[a.Generation] = value
}

// readAttrs reads key whole with its attributes.
func readAttrs(ctx context.Context, s blob.Store, key string) (string, *blob.Attributes, error) {
	r, err := s.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", nil, err
	}
	return string(b), r.Attributes(), nil
}

// acked notes that this client's write or delete of key was acknowledged:
// every version it read by majority before is replaced.
func (w *workload) acked(key string, err error) {
	if err != nil {
		return
	}
	if w.gone[key] == nil {
		w.gone[key] = map[string]bool{}
	}
	for g := range w.read[key] {
		w.gone[key][g] = true
	}
	delete(w.read, key)
}

// fastestRead reads key with ReadFastest (not recorded: the register model
// is for majority reads) and checks it.
func (w *workload) fastestRead(ctx context.Context, s blob.Store, key string) {
	value, a, err := readAttrs(ctx, s, key)
	if err != nil {
		return
	}
	w.fast.observe(key, value, a)
	if w.gone[key][a.Generation] {
		w.fast.violation("%s: client %d read %q (generation %s), which its own acknowledged write or delete replaced", key, w.id, value, a.Generation)
	}
}

func (w *workload) run(s blob.Store, n int) {
	for i := range n {
		key := fmt.Sprintf("k%d", w.rng.IntN(w.keys))
		v := fmt.Sprintf("c%d-%d", w.id, i)
		ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
		rctx := quorum.WithConsistency(ctx, quorum.ReadMajority)
		last, ok := w.seen[key]
		switch p := w.rng.IntN(100); {
		case p < 10:
			w.fastestRead(ctx, s, key)
		case p < 30 || (p >= 50 && p < 70 || p >= 90) && !ok:
			value, gen, err := w.h.read(rctx, w.id, s, key)
			switch {
			case err == nil:
				w.seen[key] = [2]string{value, gen}
				if w.read[key] == nil {
					w.read[key] = map[string]bool{}
				}
				w.read[key][gen] = true
				w.fast.observe(key, value, &blob.Attributes{Size: int64(len(value)), Generation: gen})
			case errors.Is(err, blob.ErrNotFound):
				delete(w.seen, key)
			}
		case p < 45:
			w.acked(key, w.h.put(ctx, w.id, s, key, v))
		case p < 50:
			w.acked(key, w.h.create(ctx, w.id, s, key, v))
		case p < 70:
			w.acked(key, w.h.cas(ctx, w.id, s, key, last[0], last[1], v))
		case p < 80:
			w.acked(key, w.h.del(ctx, w.id, s, key))
		case p < 90:
			w.acked(key, w.h.create(ctx, w.id, s, key, v))
		default:
			w.acked(key, w.h.cdel(ctx, w.id, s, key, last[0], last[1]))
		}
		cancel()
	}
}

// runWorkload runs clients per process concurrently, n operations each,
// while faults (if given) runs, then checks the history after final reads.
func runWorkload(t *testing.T, c *cluster, seed uint64, clients, n, keys int, faults func(done <-chan struct{})) *history {
	t.Helper()
	h := &history{}
	done := make(chan struct{})
	var bg sync.WaitGroup
	if faults != nil {
		bg.Go(func() { faults(done) })
	}
	var wg sync.WaitGroup
	id := 0
	fast := &fastestCheck{bytes: map[string]string{}}
	for _, p := range c.procs {
		for range clients {
			w := &workload{h: h, keys: keys, seen: map[string][2]string{}, rng: rand.New(rand.NewPCG(seed, uint64(id))), id: id, timeout: 10 * time.Second,
				fast: fast, read: map[string]map[string]bool{}, gone: map[string]map[string]bool{}}
			id++
			wg.Go(func() { w.run(p.q, n) })
		}
	}
	wg.Wait()
	close(done)
	bg.Wait()
	for _, p := range c.procs {
		for _, f := range p.faults {
			f.Reset()
		}
	}
	var ks []string
	for k := range keys {
		ks = append(ks, fmt.Sprintf("k%d", k))
	}
	// A process started afterwards, as after a restart, runs anti-entropy
	// over whatever the replicas hold; then every process reads every key.
	n2 := c.start()
	n2.q.AntiEntropy(context.Background())
	c.finalReads(h, ks...)
	h.Check(t, 2*time.Minute)
	for _, v := range fast.violations {
		t.Errorf("fastest read: %s", v)
	}
	h.fastest.Add(int64(fast.reads))
	return h
}

// faultSchedule returns a seeded fault schedule over c: one replica at a
// time (N-W = 1) is down, slow, erring with commits that report failure
// after taking effect, or cut off from one process only.
func faultSchedule(c *cluster, seed uint64) func(done <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 7))
	return func(done <-chan struct{}) {
		for {
			victim := rng.IntN(c.n)
			kind := rng.IntN(5)
			var fs []*fault.Store
			if kind == 4 {
				fs = []*fault.Store{c.procs[rng.IntN(len(c.procs))].faults[victim]}
			} else {
				for _, p := range c.procs {
					fs = append(fs, p.faults[victim])
				}
			}
			ids := make([][]fault.RuleID, len(fs))
			for i, f := range fs {
				switch kind {
				case 0, 4:
					f.SetDown(true)
				case 1:
					for _, op := range allOps {
						ids[i] = append(ids[i], f.AddLatency(op, latency.Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond}))
					}
				case 2:
					for _, op := range allOps {
						ids[i] = append(ids[i], f.FailRandom(op, 0.3, nil))
					}
					ids[i] = append(ids[i], f.Add(fault.Rule{Op: fault.OpCommit, Probability: 0.2, Effect: fault.FailAfter}))
					ids[i] = append(ids[i], f.Add(fault.Rule{Op: fault.OpDelete, Probability: 0.2, Effect: fault.FailAfter}))
				case 3:
					ids[i] = append(ids[i], f.Add(fault.Rule{Op: fault.OpCommit, Probability: 0.5, Effect: fault.FailAfter}))
				}
			}
			select {
			case <-done:
				return
			case <-time.After(time.Duration(5+rng.IntN(20)) * time.Millisecond):
			}
			for i, f := range fs {
				f.SetDown(false)
				for _, id := range ids[i] {
					f.Remove(id)
				}
			}
		}
	}
}

// TestSimulation runs seeded random workloads from three processes (three
// Stores over the same three replicas, two clients each) under a seeded
// fault schedule, and checks each history for linearizability. Goroutine
// scheduling still varies, so a failing seed replays up to interleaving:
//
//	go test ./quorum -run TestSimulation -sim.seed N -sim.seeds 1
//
// The long run (documented in the package doc) is
//
//	go test ./quorum -run TestSimulation -sim.seeds 300 -sim.ops 70 -timeout 2h
func TestSimulation(t *testing.T) {
	first := firstSeed()
	total := int64(0)
	var injected int64
	for seed := first; seed < first+uint64(*simSeeds); seed++ {
		o := testOptions()
		o.W = *simW
		c := newCluster(t, *simN, 3, o, seed)
		// Every replica call takes a little time, so that operations of
		// different clients and processes overlap.
		for _, p := range c.procs {
			for _, f := range p.faults {
				for _, op := range []fault.Op{fault.OpCommit, fault.OpStat, fault.OpRead, fault.OpDelete} {
					f.AddLatency(op, latency.Dist{P50: 100 * time.Microsecond, P99: time.Millisecond})
				}
			}
		}
		h := runWorkload(t, c, seed, 2, *simOps, 4, faultSchedule(c, seed))
		ops := h.acked.Load() + h.refused.Load() + h.unknown.Load() + h.reads.Load()
		total += ops
		failures := int64(0)
		for _, p := range c.procs[:3] {
			for _, f := range p.faults {
				for _, st := range f.Stats() {
					failures += st.Failures
				}
			}
		}
		injected += failures
		t.Logf("seed %d: %d operations (%d acknowledged writes, %d refused, %d uncertain, %d reads), %d reads checked for bytes and floors, %d injected failures",
			seed, ops, h.acked.Load(), h.refused.Load(), h.unknown.Load(), h.reads.Load(), h.fastest.Load(), failures)
		for _, p := range c.procs {
			if p.q != nil {
				p.q.Close()
				p.q = nil
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d failed (replay: go test ./quorum -run TestSimulation -sim.seed %d -sim.seeds 1)", seed, seed)
		}
	}
	if injected == 0 {
		t.Error("the fault schedule injected no failure")
	}
	t.Logf("%d seeds from %d: %d operations, %d injected replica failures, every history linearizable", *simSeeds, first, total, injected)
}
