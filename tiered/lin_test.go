package tiered_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/register"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

const linMoveTimeout = 50 * time.Millisecond

var (
	linSeed = flag.Uint64("sim.linseed", 0, "replay TestLinearizable with this seed (0: a new one)")
	linOps  = flag.Int("sim.linops", 400, "operations per process of TestLinearizable")
	// A whole process paused (user operations as well as its pass): about
	// one run in ten of quorum/packs/three-compactors gave a history that
	// was not linearizable (a Delete that succeeds after one that found
	// nothing), as the paused process's catalog, refreshed only from its
	// last listing on, missed a tombstone written and removed while it was
	// paused and went on serving the removed pack the tombstone killed
	// (TestIdleCatalogMissesATombstone). Off by default; the pass's own
	// pause is checked by TestCompactorLease and TestFleet.
	linPause = flag.Bool("sim.linpause", true, "pause process 1 whole, past its lease, in TestLinearizable's three-compactors runs (every other fault; false: cut it off from cold every time)")
)

// This file checks tiered stores against a per-key register with porcupine,
// in the style of package quorum's checks: every operation is recorded with
// the interval in which it ran (ticks of one logical clock, taken before the
// call and after it returned) and its outcome, and each key's history must
// have a linearization.

// history records operations on one logical clock shared by every process.
type history struct {
	register.Recorder
	mu    sync.Mutex
	count map[string]int
	errs  []string // errors of operations whose outcome is unknown
}

// add records an operation and counts it by kind and outcome.
func (h *history) add(client int, in register.Input, call int64, out register.Output, ret int64) {
	h.Add(client, in, call, out, ret)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count == nil {
		h.count = map[string]int{}
	}
	h.count[in.Kind.String()+" "+out.Res.String()]++
}

func (h *history) write(client int, in register.Input, fn func() error) {
	call := h.Tick()
	err := fn()
	ret := h.Tick()
	var res register.Result
	switch {
	case err == nil:
		res = register.OK
	case errors.Is(err, blob.ErrPrecondition) && (in.Kind == register.CAS || in.Kind == register.CDelete):
		res = register.Precondition
	case errors.Is(err, blob.ErrExists) && in.Kind == register.Create:
		res = register.Exists
	case errors.Is(err, blob.ErrNotFound) && (in.Kind == register.Delete || in.Kind == register.CDelete):
		res = register.NotFound
	default:
		res, ret = register.Unknown, register.Never
		h.mu.Lock()
		h.errs = append(h.errs, fmt.Sprintf("p%d %s %s: %v", client, in.Kind, in.Key, err))
		h.mu.Unlock()
	}
	h.add(client, in, call, register.Output{Res: res}, ret)
}

// read reads key and records it; it returns what it read and its generation.
func (h *history) read(ctx context.Context, client int, s blob.Store, key string) (value, gen string, ok bool) {
	call := h.Tick()
	r, err := s.NewRangeReader(ctx, key, 0, -1)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(r)
		gen = r.Attributes().Generation
		r.Close()
	}
	ret := h.Tick()
	switch {
	case err == nil:
		h.add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Value: string(b)}, ret)
		return string(b), gen, true
	case errors.Is(err, blob.ErrNotFound):
		h.add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Res: register.NotFound}, ret)
	}
	return "", "", false
}

// readGen is read, with the generation from Stat where the reader gives
// none (mem:// readers do not): Stats before and after the read that agree
// name the generation of what was read.
func (h *history) readGen(ctx context.Context, client int, s blob.Store, key string) (value, gen string, ok bool) {
	before, err := s.Stat(ctx, key)
	if err != nil {
		return h.read(ctx, client, s, key)
	}
	value, gen, ok = h.read(ctx, client, s, key)
	if !ok || gen != "" {
		return value, gen, ok
	}
	if after, err := s.Stat(ctx, key); err != nil || after.Generation != before.Generation || after.Generation == "" {
		return "", "", false
	}
	return value, before.Generation, true
}

// TestLinearizable runs several processes (tiered stores over the same
// tiers, each with its own quorum client of the same three hot replicas)
// against a few keys while the first one compacts continuously, with every
// hot read slowed by a random delay so that reads overlap moves. Every
// process reads, puts, writes conditionally (IfGenerationMatch of a
// generation it read) and deletes (on condition of a generation it read,
// or not), and After is a nanosecond, so the versions they act on are
// moved (and retired) under them: a Delete in one process races the move
// of the very version it deletes in another, which its grave decides.
// Process 0 also creates (IfNotExist: such a write relies on After being
// longer than the write; see the package documentation). What orders a
// conditional write in one process against a conditional write or a
// Delete in another is the stores (a grave, the key's lock in hot), not a
// process's key lock. Each key's history must be linearizable. The hot
// tier is one mem store, a 2-of-3 quorum, or that quorum with one replica
// at a time down for a few milliseconds (flaky: moves fail part way, reads
// settle what failed operations left on one replica, later passes
// recover). The run is on synctest's clock, so delays cost no time.
func TestLinearizable(t *testing.T) {
	seed := *linSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./tiered -run TestLinearizable -sim.linseed=%d)", seed, seed)
	for _, hotKind := range []string{"mem", "quorum", "flaky"} {
		for _, packs := range []int{alone, 3} {
			name := hotKind + "/alone"
			if packs > 0 {
				name = hotKind + "/packs"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { runLinearizable(t, seed, hotKind, packs, 1, 1, 0) })
			})
		}
	}
	// Every process compacts, as every process that opens a tiered URL
	// does by default: the compactor lease lets one pass run at a time, and
	// each pass gives it up after, so the holder changes all through.
	for _, hotKind := range []string{"mem", "quorum"} {
		t.Run(hotKind+"/packs/three-compactors", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runLinearizable(t, seed, hotKind, 3, 3, 1, 0) })
		})
	}
	// Versions young for a while (After 20 ms of the run's clock, which
	// with the skew and MoveTimeout still lets a move take any of them):
	// most Deletes are of a version in hot, and a process deleting what it
	// wrote itself writes the grave on condition of the generation its
	// write reported, with no Stat first, while other processes overwrite,
	// delete and move that version under it.
	for _, hotKind := range []string{"mem", "quorum", "flaky"} {
		t.Run(hotKind+"/packs/after=20ms", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runLinearizable(t, seed, hotKind, 3, 1, 1, 20*time.Millisecond) })
		})
	}
	// The keys in two shards (a and c in one, b in the other), each under
	// a lease of its own: the passes of different shards run at once, in
	// one process or two, and their holders change all through.
	for _, hotKind := range []string{"mem", "quorum"} {
		t.Run(hotKind+"/packs/three-compactors/two-shards", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runLinearizable(t, seed, hotKind, 3, 3, 2, 0) })
		})
	}
}

func runLinearizable(t *testing.T, seed uint64, hotKind string, packObjects, compactors, shards int, after time.Duration) {
	const processes = 3
	slowRead := latency.Dist{P50: time.Millisecond, P99: 6 * time.Millisecond}
	var replicas []*fault.Store
	nReplicas := 1
	if hotKind != "mem" {
		nReplicas = 3
	}
	for i := range nReplicas {
		m, _ := memPair(t)
		f := fault.Wrap(m, fault.Options{Seed: seed + uint64(i), Name: fmt.Sprintf("hot%d", i)})
		f.AddLatency(fault.OpRead, slowRead)
		f.AddLatency(fault.OpStat, slowRead)
		replicas = append(replicas, f)
	}
	_, coldMem := memPair(t)
	cold := fault.Wrap(coldMem, fault.Options{Seed: seed + 10, Name: "cold"})
	cold.AddLatency(fault.OpRead, latency.Dist{P50: 2 * time.Millisecond, P99: 8 * time.Millisecond})
	cold.AddLatency(fault.OpCommit, latency.Dist{P50: 2 * time.Millisecond, P99: 8 * time.Millisecond})
	// With several compactors, process 2 is cut off from cold now and then,
	// for longer than its lease at times, and with -sim.linpause process
	// 1 is paused now and then past its lease (every call of its stops where
	// it is, then goes on): each holds the lease in turn, and loses it so.
	var gates []*paused
	through := func(p int, s blob.Store) blob.Store {
		if compactors > 1 && p == 1 {
			g := newPaused(s, p, false, nil)
			gates = append(gates, g)
			return g
		}
		return s
	}
	coldOf := make([]blob.Store, processes)
	var cutOff *fault.Store
	for p := range processes {
		coldOf[p] = through(p, cold)
		if compactors > 1 && p == 2 {
			cutOff = fault.Wrap(cold, fault.Options{Seed: seed + 11, Name: "cold-of-2"})
			coldOf[p] = cutOff
		}
	}
	hotFor := func(p int) blob.Store {
		if hotKind == "mem" {
			return nopClose{through(p, replicas[0])}
		}
		var rs []blob.Store
		for _, r := range replicas {
			rs = append(rs, nopClose{through(p, r)})
		}
		// Rounds are bounded tighter than by default, so that versions are
		// old enough to retire within the run (InFlightBound), and down
		// replicas are probed often (the flaky tier's go down: flap below).
		return newQuorum(t, rs, func(o *quorum.Options) {
			o.StragglerTimeout, o.ProbeInterval = 60*time.Millisecond, 5*time.Millisecond
		})
	}
	var stores []*tiered.Store
	for p := range processes {
		stores = append(stores, manualWith(t, hotFor(p), coldOf[p], tiered.Options{After: after, PackMaxObjects: packObjects, MoveTimeout: linMoveTimeout, MaxClockSkew: time.Millisecond, IndexCacheBytes: 4 << 10, Owner: fmt.Sprint("process-", p), LeaseStore: coldOf[p], LeaseDuration: time.Second, Shards: shards}))
	}
	// With several compactors, a fourth process compacts and nothing else,
	// and is killed mid-pass: after a few of its pass's writes, every call
	// it has not yet made fails (those under way go on and may land). It
	// holds the lease when it dies, so the others wait for the lease to
	// end and then recover the moves it left (its markers).
	var victim *tiered.Store
	var killedAfter atomic.Int64
	if compactors > 1 {
		var wraps []*paused
		wrap := func(s blob.Store, cold bool) blob.Store {
			g := newPaused(s, processes, cold, nil)
			wraps = append(wraps, g)
			return g
		}
		var vhot blob.Store
		if hotKind == "mem" {
			vhot = nopClose{wrap(replicas[0], false)}
		} else {
			var rs []blob.Store
			for _, r := range replicas {
				rs = append(rs, nopClose{wrap(r, false)})
			}
			vhot = newQuorum(t, rs, func(o *quorum.Options) {
				o.StragglerTimeout, o.ProbeInterval = 60*time.Millisecond, 5*time.Millisecond
			})
		}
		vcold := wrap(cold, true)
		killAt := int64(1 + rand.New(rand.NewPCG(seed, 78)).IntN(6))
		var effects atomic.Int64
		for _, g := range wraps {
			g.onEffect = func() {
				if n := effects.Add(1); n == killAt {
					for _, g := range wraps {
						g.killed.Store(true)
					}
					killedAfter.Store(n)
				}
			}
		}
		victim = manualWith(t, vhot, vcold, tiered.Options{After: after, PackMaxObjects: packObjects, MoveTimeout: linMoveTimeout, MaxClockSkew: time.Millisecond, IndexCacheBytes: 4 << 10, Owner: fmt.Sprint("process-", processes), LeaseStore: vcold, LeaseDuration: time.Second, Shards: shards})
	}
	h := &history{}
	keys := []string{"a", "b", "c"}
	ctx := ctxT(t)
	var moved atomic.Int64
	stop := make(chan struct{})
	var compactor sync.WaitGroup
	var flaps atomic.Int64
	if hotKind == "flaky" {
		// One replica at a time is down for a few milliseconds: pack moves
		// retire from the others only, and leave copies that reads settle
		// back, that later passes retire again and confirm.
		frng := rand.New(rand.NewPCG(seed, 99))
		compactor.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(2+frng.IntN(10)) * time.Millisecond):
				}
				r := replicas[frng.IntN(len(replicas))]
				r.SetDown(true)
				flaps.Add(1)
				time.Sleep(time.Duration(1+frng.IntN(8)) * time.Millisecond)
				r.SetDown(false)
			}
		})
	}
	var handovers, pauses, cuts atomic.Int64
	if compactors > 1 {
		frng := rand.New(rand.NewPCG(seed, 77))
		compactor.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(20+frng.IntN(100)) * time.Millisecond):
				}
				if *linPause && n%2 == 0 {
					for _, g := range gates {
						g.pause()
					}
					pauses.Add(1)
					time.Sleep(time.Duration(1500+frng.IntN(2000)) * time.Millisecond) // past the 1s lease
					for _, g := range gates {
						g.resume()
					}
				} else {
					cutOff.SetDown(true)
					cuts.Add(1)
					time.Sleep(time.Duration(10+frng.IntN(2000)) * time.Millisecond)
					cutOff.SetDown(false)
				}
			}
		})
	}
	if victim != nil {
		compactor.Go(func() {
			for killedAfter.Load() == 0 {
				select {
				case <-stop:
					return
				default:
				}
				res := victim.CompactOnce(ctx)
				moved.Add(int64(res.Moved))
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	for p := range compactors {
		compactor.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res := stores[p].CompactOnce(ctx)
				moved.Add(int64(res.Moved))
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	var wg sync.WaitGroup
	for p := range processes {
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		s := stores[p]
		wg.Go(func() {
			for i := range *linOps {
				key := keys[rng.IntN(len(keys))]
				v := fmt.Sprintf("p%d-%d", p, i)
				r := rng.IntN(100)
				switch {
				case r < 45:
					h.read(ctx, p, s, key)
				case r < 70:
					h.write(p, register.Input{Kind: register.Put, Key: key, Value: v}, func() error {
						return blob.Put(ctx, s, key, []byte(v), nil)
					})
				case r < 77:
					h.write(p, register.Input{Kind: register.Delete, Key: key}, func() error { return s.Delete(ctx, key, nil) })
				case r < 80:
					// IfGenerationMatch needs a generation: a read that gave
					// none is not followed by a conditional Delete.
					if old, gen, ok := h.readGen(ctx, p, s, key); ok && gen != "" {
						h.write(p, register.Input{Kind: register.CDelete, Key: key, Expect: old}, func() error {
							return s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(gen)})
						})
					}
				case r < 85 && p == 0:
					h.write(p, register.Input{Kind: register.Create, Key: key, Value: v}, func() error {
						return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfNotExist()})
					})
				case r < 85:
					h.write(p, register.Input{Kind: register.Put, Key: key, Value: v}, func() error {
						return blob.Put(ctx, s, key, []byte(v), nil)
					})
				default:
					if old, gen, ok := h.readGen(ctx, p, s, key); ok {
						h.write(p, register.Input{Kind: register.CAS, Key: key, Value: v, Expect: old}, func() error {
							return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfGenerationMatch(gen)})
						})
					}
				}
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	close(stop)
	compactor.Wait()
	// Once no move can be running, a pass retires the graves the last
	// Deletes left; every process then reads every key.
	time.Sleep(tiered.GraveHold(linMoveTimeout, time.Millisecond))
	stores[0].CompactOnce(ctx)
	for p, s := range stores {
		for _, key := range keys {
			h.read(ctx, p, s, key)
		}
	}
	var delayed int64
	for _, r := range replicas {
		delayed += r.Stats()[fault.OpRead].Delays
	}
	st := stores[0].Stats()
	for _, s := range stores[1:] {
		o := s.Stats()
		st.Packs, st.Retired, st.Unretired, st.StaleHot, st.Recovered = st.Packs+o.Packs, st.Retired+o.Retired, st.Unretired+o.Unretired, st.StaleHot+o.StaleHot, st.Recovered+o.Recovered
		st.GravesRetired += o.GravesRetired
		handovers.Add(o.Lease.Acquired)
	}
	handovers.Add(stores[0].Stats().Lease.Acquired)
	if compactors > 1 {
		handovers.Add(victim.Stats().Lease.Acquired)
		t.Logf("%d epochs of the compactor lease among %d compacting processes; process 1 paused %d times, process 2 cut off from cold %d times, process %d killed after %d writes of its passes (%d epochs its)", handovers.Load(), compactors+1, pauses.Load(), cuts.Load(), processes, killedAfter.Load(), victim.Stats().Lease.Acquired)
		if killedAfter.Load() == 0 {
			t.Errorf("process %d, to be killed mid-pass, made no write of a pass (%d epochs its)", processes, victim.Stats().Lease.Acquired)
		}
		if handovers.Load() < 3 {
			t.Errorf("the lease changed hands %d times: the compactors did not take turns", handovers.Load())
		}
		byShard := make([]int64, shards)
		for _, s := range append(stores, victim) {
			for _, l := range s.Stats().Lease.Shards {
				byShard[l.Shard] += l.Acquired
			}
		}
		if shards > 1 {
			t.Logf("epochs by shard: %v", byShard)
		}
		for sh, n := range byShard {
			if n == 0 {
				t.Errorf("shard %d: no process ever held its lease", sh)
			}
		}
	}
	t.Logf("%d operations %v; %d objects moved, %d packs; %d hot reads slowed; %d replica copies retired, %d retirements left for recovery, %d stale hot versions set aside, %d markers recovered, %d replica outages",
		len(h.Ops()), h.count, moved.Load(), st.Packs, delayed, st.Retired, st.Unretired, st.StaleHot, st.Recovered, flaps.Load())
	for _, e := range h.errs {
		t.Logf("outcome unknown: %s", e)
	}
	var graves, ofWritten, changed int64
	for _, s := range stores {
		graves += s.Stats().Graves
		ofWritten += s.Stats().DeletesOfWritten
		changed += s.Stats().WrittenChanged
	}
	t.Logf("%d graves written by the processes' Deletes, %d retired by the compactor; %d Deletes of a process's own write in one write, %d that found it changed by another", graves, st.GravesRetired, ofWritten, changed)
	if moved.Load()+st.Packs == 0 || delayed == 0 || graves == 0 {
		t.Fatalf("moved %d, slowed %d, %d graves: the run did not overlap reads and deletes with moves", moved.Load(), delayed, graves)
	}
	h.Check(t, time.Minute)
}
