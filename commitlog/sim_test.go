package commitlog

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// The simulation's size. The default run is short; the long one is
//
//	go test ./commitlog -run TestSimulation -sim.appends 9000 -sim.seeds 4 -timeout 80m
//
// (108,000 appends over the three layouts; add -sim.replace for zone
// replacements).
var (
	simAppends = flag.Int("sim.appends", 600, "appends per seed and backend in TestSimulation")
	simSeeds   = flag.Int("sim.seeds", 2, "seeds per backend in TestSimulation")
	simOnly    = flag.String("sim.backends", "", "comma-separated backends of TestSimulation (default all)")
	simReplace = flag.Bool("sim.replace", false, "replace zones by empty buckets in TestSimulation")
)

// TestSimulation runs writers, racing takeovers and restarting tailing
// readers over three fault-wrapped zones (W=2) while zones go down, slow
// down and fail commits before and after they take effect, while the log is
// truncated by hand and by retention (by bytes in even seeds, by age in odd
// ones) and the repairer runs every 10 ms. With -sim.replace, zones are
// also replaced by empty buckets (one at a time, the next once the writer's
// repair has put back what the last one lost, and never beside a down
// zone). Each Open is checked as it returns: its epoch is above every
// earlier writer's, and it recovered every record acknowledged or served
// before it began. It then checks the
// log against what was acknowledged: no acknowledged record at or after the
// start lost or moved, no record twice, no gap, no record served before it
// was committed (or served and later changed), no reader opened below a
// start that a truncation had returned served anything but ErrTruncated,
// and no ErrTruncated for an offset the log still holds.
//
// The choices (which fault, which zone, when a writer is replaced) come from
// the seed; the interleaving of goroutines does not, so a failure names its
// seed and reruns the same choices, not the same schedule.
func TestSimulation(t *testing.T) {
	t.Cleanup(func() {
		r := simTotal
		t.Logf("total: %d appends acknowledged, %d failed (ambiguous), %d fenced, %d records in the logs, %d writers, %d records served, %d injected failures, %d segments created ahead, %d unused segments at a takeover, %d segments moved to the regional store, %d markers, %d moves stopped midway, %d regional reads; %d truncations (%d failed), %d records truncated, %d segments deleted, %d ErrTruncated to readers (%d opened below a returned start), %d zones replaced, %d copies repaired",
			r.acked, r.failed, r.fenced, r.logLen, r.writers, r.served, r.injected, r.prewarms, r.unusedAtTakeover, r.moved, r.markers, r.moveStops, r.regionalReads,
			r.truncations, r.truncFailed, r.start, r.segsTruncated, r.truncErrs, r.belowOpens, r.replaced, r.repaired)
	})
	for _, be := range simBackends {
		if *simOnly != "" && !slices.Contains(strings.Split(*simOnly, ","), be.name) {
			continue
		}
		for seed := 1; seed <= *simSeeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", be.name, seed), func(t *testing.T) {
				res := simulate(t, be, uint64(seed), *simAppends)
				t.Logf("%s seed %d: %d appends acknowledged, %d failed (ambiguous), %d in the log, %d writers, %d fenced appends, %d records served to readers, %d reader restarts, %d fault changes, %d injected failures; %d segments created ahead, %d rolls waited, %d unused segments at a takeover; %d segments moved, %d markers, %d moves stopped midway, %d regional reads; %d truncations (%d failed), start %d, %d segments deleted, %d ErrTruncated (%d opened below a returned start), %d zones replaced, %d copies repaired",
					be.name, seed, res.acked, res.failed, res.logLen, res.writers, res.fenced, res.served, res.restarts, res.faults, res.injected,
					res.prewarms, res.rollWaits, res.unusedAtTakeover, res.moved, res.markers, res.moveStops, res.regionalReads,
					res.truncations, res.truncFailed, res.start, res.segsTruncated, res.truncErrs, res.belowOpens, res.replaced, res.repaired)
				simMu.Lock()
				simTotal.add(res)
				simMu.Unlock()
			})
		}
	}
}

type simResult struct {
	acked, failed, fenced, logLen, served, restarts, faults, injected, writers      int64
	prewarms, rollWaits, unusedAtTakeover, moved, markers, moveStops, regionalReads int64
	truncations, truncFailed, start, segsTruncated, truncErrs, belowOpens           int64
	replaced, repaired                                                              int64
}

func (a *simResult) add(b simResult) {
	a.acked += b.acked
	a.failed += b.failed
	a.fenced += b.fenced
	a.logLen += b.logLen
	a.served += b.served
	a.restarts += b.restarts
	a.faults += b.faults
	a.injected += b.injected
	a.writers += b.writers
	a.prewarms += b.prewarms
	a.rollWaits += b.rollWaits
	a.unusedAtTakeover += b.unusedAtTakeover
	a.moved += b.moved
	a.markers += b.markers
	a.moveStops += b.moveStops
	a.regionalReads += b.regionalReads
	a.truncations += b.truncations
	a.truncFailed += b.truncFailed
	a.start += b.start
	a.segsTruncated += b.segsTruncated
	a.truncErrs += b.truncErrs
	a.belowOpens += b.belowOpens
	a.replaced += b.replaced
	a.repaired += b.repaired
}

var (
	simMu    sync.Mutex
	simTotal simResult
)

// describe says what a stuck reader sees, for the failure message.
func describe(ctx context.Context, r *Reader, inner []blob.Store, name string) string {
	out := fmt.Sprintf("chain %+v\n", r.chain)
	if r.cur != nil {
		out += fmt.Sprintf("cursor %+v zonePos %v buffered %d lac %d\n", r.cur.seg, r.cur.zonePos, len(r.cur.buf), r.lac)
	}
	zones, _ := zonesFor(inner, name, Options{})
	for i, z := range zones {
		keys, start, err := z.listLog(ctx, nil)
		out += fmt.Sprintf("zone %d (%v): %d segments, start %d, err %v\n", i, z.mode, len(keys), start, err)
		for _, k := range keys {
			frames, _, err := z.read(ctx, k, 0)
			if k.first > r.pos+200 || len(frames) == 0 {
				continue
			}
			lo, hi := int64(-1), int64(-1)
			var kinds []frameKind
			for _, f := range frames {
				kinds = append(kinds, f.kind)
				if f.kind == frameData && len(f.records) > 0 {
					if lo < 0 {
						lo = f.first
					}
					hi = max(hi, f.first+int64(len(f.records))-1)
				}
			}
			h := frames[0]
			out += fmt.Sprintf("  %s prev %d-%d records %d..%d kinds %v err %v\n", k, h.prevEpoch, h.prevFirst, lo, hi, kinds, err)
		}
	}
	return out
}

// zonesHolding counts the zones whose segments hold rec at its offset, or
// hold the marker of its segment's move to the regional store.
func zonesHolding(ctx context.Context, stores []blob.Store, name string, rec Record) int {
	zones, _ := zonesFor(stores, name, Options{})
	n := 0
	for _, z := range zones {
		segs, err := z.listSegments(ctx, nil)
		if err != nil {
			continue
		}
		// The record is in the last segment starting at or before it, or
		// close: a few orphans may sit in between.
		var near []segKey
		for _, k := range segs {
			if k.first <= rec.Offset {
				near = append(near, k)
			}
		}
		slices.SortFunc(near, func(a, b segKey) int { return cmp.Compare(a.first, b.first) })
		near = near[max(len(near)-6, 0):]
	seg:
		for _, k := range near {
			frames, _, _ := z.read(ctx, k, 0)
			for _, f := range frames {
				if f.kind == frameMoved && f.first <= rec.Offset && rec.Offset <= f.lac {
					// Moved to the regional store since the reader was
					// served, its copy here overwritten by the marker: a
					// segment moves only once all of it is committed.
					n++
					break seg
				}
				if f.kind == frameData && f.first <= rec.Offset && rec.Offset < f.first+int64(len(f.records)) &&
					string(f.records[rec.Offset-f.first]) == string(rec.Data) {
					n++
					break seg
				}
			}
		}
	}
	return n
}

// moveStopper stops one writer's moves midway now and then, each time with
// a chance of one in six, at the requests that mark a move's steps (see
// Log.moveSegment): before the regional copy is written; before it is
// finalized; before a zone's marker is written; and after the markers,
// every marker of the move is written but reported failed, so that the
// writer does not count the move. Markers written again for zones that
// missed theirs (the mover's later passes, the repairer) are the same
// requests, and stop as the move's do.
type moveStopper struct {
	mu    sync.Mutex
	rng   *rand.Rand
	stops *atomic.Int64
	done  map[segKey]stopDone // per segment: its move's last finalization chose to stop after the markers
}

type stopDone int

const (
	stopNotDone   stopDone = iota
	stopDoneArmed          // chosen, no marker written yet
	stopDoneFired          // a marker written and reported failed (the stop counted)
)

// stop draws whether to stop at a step (m.mu held).
func (m *moveStopper) stop() bool {
	if m.rng.IntN(6) != 0 {
		return false
	}
	m.stops.Add(1)
	return true
}

// wrap returns zones and regional, the stores of log name, as the writer
// sees them.
func (m *moveStopper) wrap(name string, zones []blob.Store, regional blob.Store) ([]blob.Store, blob.Store) {
	rs := &watchStore{Store: regional, before: func(r watchReq) error {
		k, ok := watchedSeg(name, r.key)
		if !ok {
			return nil
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		switch r.op {
		case watchWrite:
			if m.stop() {
				return fmt.Errorf("move of %s stopped before its regional copy", k)
			}
		case watchFinalize:
			if m.stop() {
				return fmt.Errorf("move of %s stopped before finalizing its regional copy", k)
			}
			m.done[k] = stopNotDone
			if m.rng.IntN(6) == 0 {
				m.done[k] = stopDoneArmed
			}
		}
		return nil
	}}
	marker := func(r watchReq) (segKey, bool) {
		k, ok := watchedSeg(name, r.key)
		if !ok || r.op != watchWrite {
			return k, false
		}
		frames := framesOf(r.data)
		return k, len(frames) == 1 && frames[0].kind == frameMoved
	}
	zs := make([]blob.Store, len(zones))
	for i, z := range zones {
		zs[i] = &watchStore{Store: z,
			before: func(r watchReq) error {
				k, ok := marker(r)
				if !ok {
					return nil
				}
				m.mu.Lock()
				defer m.mu.Unlock()
				if m.stop() {
					return fmt.Errorf("move of %s stopped before its marker on zone %d", k, i)
				}
				return nil
			},
			after: func(r watchReq, err error) error {
				k, ok := marker(r)
				if !ok || err != nil {
					return err
				}
				m.mu.Lock()
				defer m.mu.Unlock()
				switch m.done[k] {
				case stopDoneArmed:
					m.done[k] = stopDoneFired
					m.stops.Add(1)
				case stopNotDone:
					return nil
				}
				return fmt.Errorf("move of %s stopped after its markers (zone %d)", k, i)
			},
		}
	}
	return zs, rs
}

func simulate(t *testing.T, be backend, seed uint64, appends int) simResult {
	ctx := context.Background()
	inner := be.zones(t, 3)
	stores, faults := wrapAll(inner, seed)
	// The regional store that sealed segments move to, with faults of its own.
	regionalInner := testkit.Mems(t, 1)[0]
	regionalFault := fault.Wrap(regionalInner, fault.Options{Seed: seed*31 + 99, Name: "regional"})
	faults = append(faults, regionalFault)
	opts := &Options{MaxSegmentAppends: 40, OpTimeout: 2 * time.Second, RelistInterval: 20 * time.Millisecond,
		Regional: regionalFault, MoveAfter: 20 * time.Millisecond, RepairInterval: 10 * time.Millisecond}
	if seed%2 == 0 {
		opts.RetainBytes = 16 << 10
	} else {
		opts.RetainFor = 500 * time.Millisecond
	}
	const name = "sim"
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	var (
		mu      sync.Mutex
		writers []*Log
		acked   = map[string]int64{} // record -> offset acknowledged
		res     simResult
	)
	committed := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		c := int64(-1)
		for _, w := range writers {
			c = max(c, w.Committed())
		}
		return c
	}
	latest := func() *Log {
		mu.Lock()
		defer mu.Unlock()
		if len(writers) == 0 {
			return nil
		}
		return writers[len(writers)-1]
	}
	// The highest start a truncation has returned: by hand (maxStart) or
	// by a writer's retention (its Stats).
	var maxStart atomic.Int64
	knownStart := func() int64 {
		s := maxStart.Load()
		mu.Lock()
		defer mu.Unlock()
		for _, w := range writers {
			s = max(s, w.Stats().Start)
		}
		return s
	}

	// Readers: tail the log, restart now and then from where they were or
	// from earlier, and record what they were served.
	type served struct {
		off       int64
		data      string
		committed int64
	}
	stopReaders := make(chan struct{})
	var rwg sync.WaitGroup
	// Stopped at the end, or when the run fails before it.
	stopReading := sync.OnceFunc(func() {
		close(stopReaders)
		rwg.Wait()
	})
	defer stopReading()
	var maxServed atomic.Int64
	maxServed.Store(-1)
	var wipes atomic.Int64 // zone replacements begun and ended (odd: one under way)
	servedBy := make([][]served, 2)
	truncatedAt := make([][]int64, 2) // where each reader got ErrTruncated
	var restarts, moveStops, regionalReads, belowOpens atomic.Int64
	for ri := range servedBy {
		rrng := rand.New(rand.NewPCG(seed, uint64(ri)+100))
		rwg.Go(func() {
			var from int64
			for {
				known := knownStart()
				// A record the reader buffered may lose a copy to a zone
				// replaced after it was read: from then on, the check that
				// it was committed counts one zone holding it.
				wiped := wipes.Load()
				r, err := NewReader(stores, name, from, opts)
				if err != nil {
					t.Error(err)
					return
				}
				// Opened below a start a truncation returned: the first
				// answer must be ErrTruncated.
				below := from < known
				truncated := false
				n := 20 + rrng.IntN(200)
				for range n {
					rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					rec, err := r.Next(rctx)
					cancel()
					select {
					case <-stopReaders:
						return
					default:
					}
					if errors.Is(err, ErrTruncated) {
						truncatedAt[ri] = append(truncatedAt[ri], r.Offset())
						if below {
							belowOpens.Add(1)
						}
						truncated = true
						break
					}
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("reader %d: %v", ri, err)
							return
						}
						continue
					}
					if below {
						t.Errorf("reader %d opened at %d, below the start %d a truncation had returned, was served offset %d", ri, from, known, rec.Offset)
						below = false
					}
					c := committed()
					if rec.Offset > c {
						// Past every writer's LAC: only a recovery that has
						// not returned yet can have committed it, by copying
						// it to W zones before starting its segment. Count
						// the zones that hold it, below the faults: one if a
						// zone was replaced since the reader began.
						n := zonesHolding(ctx, inner, name, rec)
						need := 2
						if wiped%2 == 1 || wipes.Load() != wiped {
							need = 1
						}
						if n >= need {
							c = rec.Offset
						}
					}
					servedBy[ri] = append(servedBy[ri], served{rec.Offset, string(rec.Data), c})
					raise(&maxServed, rec.Offset)
				}
				restarts.Add(1)
				regionalReads.Add(r.Stats().RegionalReads)
				r.Close()
				from = r.Offset()
				switch {
				case truncated:
					// On from the start; if none is known above it yet (a
					// truncation still under way), wait for one.
					if s := knownStart(); s > from {
						from = s
					} else {
						time.Sleep(2 * time.Millisecond)
					}
				case rrng.IntN(4) == 0:
					from -= rrng.Int64N(min(from+1, 500))
				}
			}
		})
	}

	// Faults: every few milliseconds change one zone's faults, keeping at
	// most one zone down so that the log can make progress. A zone replaced
	// by an empty bucket counts as down until the writer's repair has put
	// back what it lost (replaced): the down zone and the replaced one are
	// never two different zones, so every acknowledged record keeps a copy
	// that answers.
	var zmu sync.Mutex
	down, replaced := -1, -1
	var replacedLog []string
	// amnesicBut reports whether a zone other than z lacks the intact
	// marker, below the faults (down when the log began, or replaced): that
	// is a zone failed already.
	innerZones, _ := zonesFor(inner, name, Options{})
	intactZone := func(i int) bool {
		_, intact, err := innerZones[i].claims(ctx)
		return err == nil && intact
	}
	amnesicBut := func(z int) bool {
		for i := range innerZones {
			if i != z && !intactZone(i) {
				return true
			}
		}
		return false
	}
	stopFaults := make(chan struct{})
	var fwg sync.WaitGroup
	stopFaulting := sync.OnceFunc(func() {
		close(stopFaults)
		fwg.Wait()
	})
	defer stopFaulting()
	var nfaults atomic.Int64
	frng := rand.New(rand.NewPCG(seed, 7))
	fwg.Go(func() {
		rules := make([][]fault.RuleID, len(faults))
		for {
			select {
			case <-stopFaults:
				return
			case <-time.After(time.Duration(2+frng.IntN(8)) * time.Millisecond):
			}
			z := frng.IntN(len(faults))
			f := faults[z]
			nfaults.Add(1)
			switch c := frng.IntN(7); c {
			case 0: // zone down, or back up
				zmu.Lock()
				if down == z {
					f.SetDown(false)
					down = -1
				} else if down < 0 && (replaced < 0 || replaced == z) && !amnesicBut(z) {
					f.SetDown(true)
					down = z
				}
				zmu.Unlock()
			default:
				rules[z] = simFault(f, rules[z], c)
			}
		}
	})

	// Truncations by hand: every few tens of milliseconds the latest
	// writer truncates the log up to 400 records below what it committed.
	var truncations, truncFailed atomic.Int64
	trng := rand.New(rand.NewPCG(seed, 8))
	fwg.Go(func() {
		simEvery(stopFaults, trng, func() {
			w := latest()
			if w == nil {
				return
			}
			off := w.Committed() - trng.Int64N(400)
			if off <= 0 {
				return
			}
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start, err := w.TruncateBefore(tctx, off)
			cancel()
			truncations.Add(1)
			if err != nil {
				truncFailed.Add(1)
				return
			}
			raise(&maxStart, start)
		})
	})

	// Zone replacements: now and then a zone loses everything of the log
	// (below its faults), epoch claims and intact marker included. The next
	// may come once the latest writer has rolled past every record
	// acknowledged before and its repair has then found nothing missing,
	// unchecked or amnesic in three passes.
	var replacements atomic.Int64
	prng := rand.New(rand.NewPCG(seed, 9))
	fwg.Go(func() {
		for *simReplace {
			select {
			case <-stopFaults:
				return
			case <-time.After(time.Duration(50+prng.IntN(200)) * time.Millisecond):
			}
			// Not while a zone is amnesic (down when the log began, say):
			// two would leave too few intact zones to open the log.
			if latest() == nil || amnesicBut(-1) {
				continue
			}
			z := prng.IntN(len(inner))
			zmu.Lock()
			ok := down < 0 || down == z
			if ok {
				replaced = z
			}
			zmu.Unlock()
			if !ok {
				continue
			}
			before := committed()
			zmu.Lock()
			replacedLog = append(replacedLog, fmt.Sprintf("zone %d at %d (writer %d amnesic %d)", z, before, latest().Epoch(), latest().Stats().Amnesic))
			zmu.Unlock()
			wipes.Add(1)
			if err := wipe(ctx, inner[z], name+"/"); err != nil {
				t.Errorf("replacing zone %d: %v", z, err)
				return
			}
			wipes.Add(1)
			replacements.Add(1)
			var w *Log
			var passes int64
			for {
				select {
				case <-stopFaults:
					return
				case <-time.After(5 * time.Millisecond):
				}
				lw := latest()
				lw.mu.Lock()
				tip := lw.seg.key.first
				lw.mu.Unlock()
				if tip <= before {
					continue
				}
				st := lw.Stats()
				if lw != w {
					w, passes = lw, st.RepairPasses
					continue
				}
				if st.RepairPasses >= passes+3 && st.Missing == 0 && st.Unchecked == 0 && st.Amnesic == 0 && intactZone(z) {
					break
				}
			}
			zmu.Lock()
			replaced = -1
			zmu.Unlock()
		}
	})

	// Writers: each round opens a new writer (a takeover) while the last
	// one's appenders are still running, so they race it and get fenced;
	// sometimes the old writer is simply abandoned, as a crashed process.
	var seq atomic.Int64
	var awg sync.WaitGroup
	perRound := 100 + rng.IntN(200)
	for seq.Load() < int64(appends) {
		var l *Log
		// Every record acknowledged before an Open begins is in the log it
		// recovers, unless a truncation is the reason it is not.
		servedBefore := maxServed.Load()
		mu.Lock()
		ackedBefore := int64(-1)
		for _, off := range acked {
			ackedBefore = max(ackedBefore, off)
		}
		mu.Unlock()
		// Moves stop midway now and then, as if the writer crashed at that
		// step; the next pass (or the next writer) finishes them. The
		// writer sees the stores through its moveStopper, which stops them
		// at the requests that mark the steps.
		mstop := &moveStopper{rng: rand.New(rand.NewPCG(seed, uint64(len(writers))+1000)), stops: &moveStops, done: map[segKey]stopDone{}}
		wstores, wregional := mstop.wrap(name, stores, regionalFault)
		wopts := *opts
		wopts.Regional = wregional
		for attempt := 0; ; attempt++ {
			octx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var err error
			l, err = Open(octx, wstores, name, &wopts)
			cancel()
			if err == nil {
				break
			}
			if attempt > 1000 { // a down zone comes back within a second or so
				t.Fatalf("open: %v\n%s\nreplacements: %v", err, markers(ctx, inner, name), replacedLog)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Each writer's epoch is above every earlier writer's.
		mu.Lock()
		for _, w := range writers {
			if w.Epoch() >= l.Epoch() {
				t.Errorf("writer %d opened after writer %d (amnesic at its open %v)\n%s\nreplacements %v", l.Epoch(), w.Epoch(), amnesicZones(l.zones), markers(ctx, inner, name), replacedLog)
				break
			}
		}
		mu.Unlock()
		// Nor is a record served to a reader before it began.
		if got := l.Stats().RecoveredTo; servedBefore > got {
			zmu.Lock()
			t.Errorf("writer %d recovered to %d, but readers were served up to %d before it opened (replacements %v; amnesic at its open %v)",
				l.Epoch(), got, servedBefore, replacedLog, amnesicZones(l.zones))
			zmu.Unlock()
		}
		if got := l.Stats().RecoveredTo; got < ackedBefore {
			zmu.Lock()
			t.Errorf("writer %d recovered to %d, but %d was acknowledged before it opened (replacements %v; amnesic at its open %v)",
				l.Epoch(), got, ackedBefore, replacedLog, amnesicZones(l.zones))
			zmu.Unlock()
		}
		mu.Lock()
		writers = append(writers, l)
		// Every record an earlier writer acknowledged is committed now.
		mu.Unlock()
		var budget atomic.Int64
		budget.Store(int64(perRound))
		for a := range 4 {
			awg.Go(func() {
				for {
					n := seq.Add(1)
					if n > int64(appends) || budget.Add(-1) < 0 {
						return
					}
					data := fmt.Sprintf("e%d-a%d-%d", l.Epoch(), a, n)
					actx, cancel := context.WithTimeout(ctx, 3*time.Second)
					off, err := l.Append(actx, []byte(data))
					cancel()
					mu.Lock()
					switch {
					case err == nil:
						acked[data] = off
						res.acked++
					case errors.Is(err, ErrFenced):
						res.fenced++
					default:
						res.failed++
					}
					mu.Unlock()
					if errors.Is(err, ErrFenced) || errors.Is(err, ErrClosed) {
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		if rng.IntN(3) == 0 {
			// Crashed: never closed while the run lasts. Half of these
			// crash once the next segment was created ahead and before
			// the roll to it, if the appenders get there in time.
			if rng.IntN(2) == 0 {
				waitAhead(l, 50*time.Millisecond)
			}
			defer l.Close()
		}
	}
	awg.Wait()
	stopFaulting()
	for _, f := range faults {
		f.Reset()
	}

	// The final writer recovers everything; a fresh reader reads it all
	// from the start. The writers before it stop first, and it retains
	// nothing, so that the start stays where it is while it is read.
	mu.Lock()
	for _, w := range writers {
		w.Close()
	}
	mu.Unlock()
	finalOpts := *opts
	finalOpts.RetainBytes, finalOpts.RetainFor = 0, 0
	final, err := Open(ctx, stores, name, &finalOpts)
	if err != nil {
		t.Fatalf("final open: %v", err)
	}
	defer final.Close()
	mu.Lock()
	writers = append(writers, final)
	mu.Unlock()
	stopReading()
	end := final.Committed()
	// A truncation cut off part way leaves the segment it was deleting on
	// the zones it had not reached: below where it set out to go, and
	// readable from some zones and not others. The final writer finishes
	// them (a later call finishes a cut-off one), and the start is where it
	// leaves the log.
	truncateTo := maxStart.Load()
	mu.Lock()
	for _, w := range writers {
		truncateTo = max(truncateTo, w.Stats().TruncateTo)
	}
	mu.Unlock()
	start, err := final.TruncateBefore(ctx, truncateTo)
	if err != nil {
		t.Fatalf("final truncation to %d: %v", truncateTo, err)
	}
	r, err := NewReader(stores, name, start, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Generous: on a busy machine a reader from 0 of a long log reads
	// hundreds of moved segments, each a marker and a regional copy.
	rctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	logRecs := make([]Record, 0, end+1-start)
	for range end + 1 - start {
		rec, err := r.Next(rctx)
		if err != nil {
			t.Fatalf("final read at %d: %v\n%s", r.Offset(), err, describe(ctx, r, inner, name))
		}
		logRecs = append(logRecs, rec)
	}
	at := func(off int64) string { return string(logRecs[min(max(off, start), end)-start].Data) }
	seen := map[string]int64{}
	for i, rec := range logRecs {
		if rec.Offset != start+int64(i) {
			t.Fatalf("gap: record %d has offset %d", start+int64(i), rec.Offset)
		}
		if prev, dup := seen[string(rec.Data)]; dup {
			t.Errorf("duplicate: %q at %d and %d", rec.Data, prev, rec.Offset)
		}
		seen[string(rec.Data)] = rec.Offset
	}
	described := false
	for data, off := range acked {
		got, ok := seen[data]
		switch {
		case !ok && off < start:
			// Truncated.
		case !ok:
			t.Errorf("lost: acknowledged %q at %d is not in the log (it holds %q)", data, off, at(off))
			if !described {
				described = true
				r.pos = off
				t.Log(describe(ctx, r, inner, name))
			}
		case got != off:
			t.Errorf("moved: acknowledged %q at %d is at %d", data, off, got)
		}
	}
	// Below the start, what readers were served is checked against what
	// was acknowledged and against each other.
	below := map[int64]string{}
	ackedAt := map[int64]string{}
	for data, off := range acked {
		if prev, ok := ackedAt[off]; ok {
			t.Errorf("two acknowledged Appends hold offset %d: %q and %q", off, prev, data)
		}
		ackedAt[off] = data
		if off < start {
			below[off] = data
		}
	}
	for ri, ss := range servedBy {
		for _, s := range ss {
			res.served++
			switch {
			case s.off < start:
				if d, ok := below[s.off]; ok && d != s.data {
					t.Errorf("reader %d was served %q at %d, below the start %d, where %q was", ri, s.data, s.off, start, d)
				}
				below[s.off] = s.data
			case s.off > end || at(s.off) != s.data:
				t.Errorf("reader %d was served %q at %d, the log holds %q", ri, s.data, s.off, at(s.off))
			}
			if s.off > s.committed {
				t.Errorf("reader %d was served offset %d when only %d was committed", ri, s.off, s.committed)
			}
		}
	}
	// ErrTruncated is right for an offset below where any truncation set
	// out to go.
	truncateTo = max(truncateTo, start)
	for ri, offs := range truncatedAt {
		for _, off := range offs {
			res.truncErrs++
			if off >= truncateTo {
				t.Errorf("reader %d got ErrTruncated at %d, which the log holds (it starts at %d; no truncation set out beyond %d)", ri, off, start, truncateTo)
			}
		}
	}
	res.logLen = end + 1
	res.restarts = restarts.Load()
	res.faults = nfaults.Load()
	for _, f := range faults {
		for _, st := range f.Stats() {
			res.injected += st.Failures
		}
	}
	res.writers = int64(len(writers))
	mu.Lock()
	for _, w := range writers {
		st, ms := w.Stats(), w.MoveStats()
		res.prewarms += st.Prewarms
		res.rollWaits += st.RollWaits
		res.unusedAtTakeover += st.UnusedSkipped
		res.moved += ms.Moved
		res.markers += ms.Markers
		res.segsTruncated += st.Truncated
		res.repaired += st.Repaired
	}
	mu.Unlock()
	res.moveStops = moveStops.Load()
	res.truncations, res.truncFailed = truncations.Load(), truncFailed.Load()
	res.start, res.belowOpens, res.replaced = start, belowOpens.Load(), replacements.Load()
	res.regionalReads = r.Stats().RegionalReads + regionalReads.Load()
	return res
}

// simFault changes a zone's faults by choice c (1 to 6, from a draw of
// seven whose 0 the caller takes for a zone down) and returns its rules.
func simFault(f *fault.Store, rules []fault.RuleID, c int) []fault.RuleID {
	switch c {
	case 1: // slow zone
		return append(rules, f.AddLatency(fault.OpCommit, latency.Dist{P50: 2 * time.Millisecond, P99: 20 * time.Millisecond}))
	case 2: // commits that fail after they took effect
		return append(rules, f.Add(fault.Rule{Op: fault.OpCommit, Probability: 0.2, Effect: fault.FailAfter}))
	case 3: // commits that fail before
		return append(rules, f.Add(fault.Rule{Op: fault.OpCommit, Probability: 0.2}))
	case 4: // reads that fail
		return append(rules, f.Add(fault.Rule{Op: fault.OpRead, Probability: 0.2}))
	default: // heal the zone
		for _, id := range rules {
			f.Remove(id)
		}
		return nil
	}
}

// simEvery runs f every 10 to 50 ms (drawn from rng) until stop closes.
func simEvery(stop <-chan struct{}, rng *rand.Rand, f func()) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(10+rng.IntN(40)) * time.Millisecond):
		}
		f()
	}
}

// raise raises a to v if v is above it.
func raise(a *atomic.Int64, v int64) {
	for {
		if m := a.Load(); v <= m || a.CompareAndSwap(m, v) {
			return
		}
	}
}

// waitAhead waits up to d for l's open segment to have its successor created.
func waitAhead(l *Log, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		p := l.seg.next
		l.mu.Unlock()
		if p != nil {
			select {
			case <-p.done:
				return
			case <-time.After(time.Until(deadline)):
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// markers says what each zone holds of the log's claims, below the faults.
func markers(ctx context.Context, inner []blob.Store, name string) string {
	zones, _ := zonesFor(inner, name, Options{})
	var out []string
	for i, z := range zones {
		m, intact, err := z.claims(ctx)
		out = append(out, fmt.Sprintf("zone %d: claims to %d, intact %v, %v", i, m, intact, err))
	}
	return strings.Join(out, "\n")
}
