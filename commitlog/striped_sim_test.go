package commitlog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// stripedSimAppends is TestStripedSimulation's size; the long run is
//
//	go test ./commitlog -run TestStripedSimulation -stripedsim.appends 5000 -timeout 60m
var stripedSimAppends = flag.Int("stripedsim.appends", 400, "appends per seed and backend in TestStripedSimulation")

// TestStripedSimulation runs striped logs (two stripes in odd seeds, three
// in even ones) through what TestSimulation runs plain logs through:
// writers that take over while the last one's appenders still run, some
// abandoned as crashed processes and some opened two at once, racing each
// other's fencing stripe by stripe; three fault-wrapped zones (W=2) going
// down, slowing down and failing commits before and after they take
// effect, and failing reads; segments moving to a regional store with
// faults of its own; truncations by hand; and tailing readers that restart
// from where they were or from earlier. Appends carry one to three records,
// so that one Append spans stripes.
//
// It then checks the history against the log a final writer recovers:
//   - each Open recovered every record acknowledged or served before it
//     began;
//   - no acknowledged record lost or moved; no record twice; the records of
//     an Append that failed without ErrUncertain nowhere;
//   - an Append acknowledged before another began has lower offsets;
//   - every record a reader was served is the log's at that offset, was
//     committed (on W zones of its stripe) when it was served, and no
//     reader skipped a record between two it was served;
//   - ErrTruncated only below an offset a truncation was asked for.
func TestStripedSimulation(t *testing.T) {
	for _, be := range backends {
		for seed := 1; seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", be.name, seed), func(t *testing.T) {
				stripedSimulate(t, be, uint64(seed), *stripedSimAppends)
			})
		}
	}
}

type simAppend struct {
	recs          []string
	first         int64 // offset of recs[0] as Append returned it
	inv, ret      time.Time
	call, done    int64 // the same on the history's logical clock
	ok, uncertain bool
}

type simSession struct {
	from   int64
	served []Record // Data as served
	// calls and rets: each Next that served a record, on the logical clock.
	calls, rets []int64
	// committedAt: per record served, whether it was committed then.
	uncommitted []bool
}

func stripedSimulate(t *testing.T, be backend, seed uint64, appends int) {
	ctx := context.Background()
	k := 3 - int(seed%2)
	inner := be.zones(t, 3)
	stores, faults := wrapAll(inner, seed+500)
	regionalFault := fault.Wrap(testkit.Mems(t, 1)[0], fault.Options{Seed: seed*31 + 599, Name: "regional"})
	faults = append(faults, regionalFault)
	opts := &Options{MaxSegmentAppends: 40, OpTimeout: 2 * time.Second, RelistInterval: 20 * time.Millisecond,
		Regional: regionalFault, MoveAfter: 20 * time.Millisecond, RepairInterval: 10 * time.Millisecond}
	const name = "ssim"
	rng := rand.New(rand.NewPCG(seed, 0x57e1))
	// The logical clock of the history that porcupine checks.
	var clock atomic.Int64

	var (
		mu      sync.Mutex
		writers []*Striped
		history []*simAppend
	)
	latest := func() *Striped {
		mu.Lock()
		defer mu.Unlock()
		if len(writers) == 0 {
			return nil
		}
		return writers[len(writers)-1]
	}
	// committedIn reports whether stripe i's record at local is committed
	// by what its writers know, or else found on W zones below the faults
	// (a recovery under way commits records before its Open returns).
	committedIn := func(i int, local int64, data []byte) bool {
		mu.Lock()
		for _, w := range writers {
			if w.subs[i].Committed() >= local {
				mu.Unlock()
				return true
			}
		}
		mu.Unlock()
		return zonesHolding(ctx, inner, stripeName(name, i), Record{local, append([]byte{stripeData}, data...)}) >= 2
	}
	var maxAsked, maxStart atomic.Int64 // truncations: highest offset asked for, highest start returned
	var maxServed atomic.Int64
	maxServed.Store(-1)

	// Readers.
	stopReaders := make(chan struct{})
	var rwg sync.WaitGroup
	stopReading := sync.OnceFunc(func() {
		close(stopReaders)
		rwg.Wait()
	})
	defer stopReading()
	sessions := make([][]*simSession, 2)
	truncatedAt := make([][]int64, 2)
	for ri := range sessions {
		rrng := rand.New(rand.NewPCG(seed, uint64(ri)+200))
		rwg.Go(func() {
			var from int64
			for {
				r, err := NewStripedReader(stores, name, k, from, opts)
				if err != nil {
					t.Error(err)
					return
				}
				ss := &simSession{from: from}
				sessions[ri] = append(sessions[ri], ss)
				// Whether each record was committed is checked when its
				// stripe's reader returns it, which may be well before the
				// merge serves it (a truncation may have removed it since).
				var umu sync.Mutex
				uncommitted := map[int64]bool{}
				r.readHook = func(i int, rec Record) {
					if len(rec.Data) == 0 || rec.Data[0] != stripeData {
						return
					}
					u := !committedIn(i, rec.Offset, rec.Data[1:])
					umu.Lock()
					uncommitted[rec.Offset*int64(k)+int64(i)] = u
					umu.Unlock()
				}
				truncated := false
				for range 20 + rrng.IntN(200) {
					rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					call := clock.Add(1)
					rec, err := r.Next(rctx)
					ret := clock.Add(1)
					cancel()
					select {
					case <-stopReaders:
						r.Close()
						return
					default:
					}
					if errors.Is(err, ErrTruncated) {
						truncatedAt[ri] = append(truncatedAt[ri], r.Offset())
						truncated = true
						break
					}
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("reader %d: %v", ri, err)
							r.Close()
							return
						}
						continue
					}
					ss.served = append(ss.served, rec)
					ss.calls, ss.rets = append(ss.calls, call), append(ss.rets, ret)
					umu.Lock()
					u, seen := uncommitted[rec.Offset]
					umu.Unlock()
					if !seen {
						t.Errorf("reader %d was served %d, which no stripe's reader returned", ri, rec.Offset)
					}
					ss.uncommitted = append(ss.uncommitted, u)
					raise(&maxServed, rec.Offset)
				}
				r.Close()
				from = r.Offset()
				switch {
				case truncated:
					if s := maxStart.Load(); s > from {
						from = s
					} else {
						time.Sleep(2 * time.Millisecond)
					}
				case rrng.IntN(4) == 0:
					from -= rrng.Int64N(min(from+1, 300))
				}
			}
		})
	}

	// Faults, as in TestSimulation (no zone replacements).
	stopFaults := make(chan struct{})
	var fwg sync.WaitGroup
	stopFaulting := sync.OnceFunc(func() {
		close(stopFaults)
		fwg.Wait()
	})
	defer stopFaulting()
	// A zone goes down only while every other zone holds each stripe's
	// intact marker: a zone down when a stripe began lacks it until a
	// writer's repair gives it back, and two such zones leave too few to
	// open the stripe (as in TestSimulation).
	stripeZones := make([][]*zone, k)
	for i := range stripeZones {
		stripeZones[i], _ = zonesFor(inner, stripeName(name, i), Options{})
	}
	amnesicBut := func(z int) bool {
		for _, zs := range stripeZones {
			for j, sz := range zs {
				if j == z {
					continue
				}
				if intact, err := blob.Exists(ctx, sz.s, sz.epochKey(intactEpoch)); err != nil || !intact {
					return true
				}
			}
		}
		return false
	}
	frng := rand.New(rand.NewPCG(seed, 17))
	fwg.Go(func() {
		rules := make([][]fault.RuleID, len(faults))
		down := -1
		for {
			select {
			case <-stopFaults:
				return
			case <-time.After(time.Duration(2+frng.IntN(8)) * time.Millisecond):
			}
			z := frng.IntN(len(faults))
			f := faults[z]
			switch c := frng.IntN(7); c {
			case 0:
				if down == z {
					f.SetDown(false)
					down = -1
				} else if down < 0 && !amnesicBut(z) {
					f.SetDown(true)
					down = z
				}
			default:
				rules[z] = simFault(f, rules[z], c)
			}
		}
	})
	// Truncations by hand.
	trng := rand.New(rand.NewPCG(seed, 18))
	fwg.Go(func() {
		simEvery(stopFaults, trng, func() {
			w := latest()
			if w == nil {
				return
			}
			off := w.Committed() - 200 - trng.Int64N(400)
			if off <= 0 {
				return
			}
			raise(&maxAsked, off)
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			start, err := w.TruncateBefore(tctx, off)
			cancel()
			if err == nil {
				raise(&maxStart, start)
			}
		})
	})

	// Writers.
	open := func(racing bool) *Striped {
		for attempt := 0; ; attempt++ {
			octx, cancel := context.WithTimeout(ctx, 10*time.Second)
			s, err := OpenStriped(octx, stores, name, k, opts)
			cancel()
			if err == nil {
				return s
			}
			if racing && errors.Is(err, ErrFenced) {
				// Lost a race with the other Open.
				return nil
			}
			if attempt > 1000 {
				t.Fatalf("open: %v", err)
			}
			if testing.Verbose() {
				t.Logf("open attempt %d: %v", attempt, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	var seq atomic.Int64
	var awg sync.WaitGroup
	var nwriters, crashed, racing atomic.Int64
	for seq.Load() < int64(appends) {
		servedBefore := maxServed.Load()
		ackedBefore := int64(-1)
		mu.Lock()
		for _, a := range history {
			if a.ok {
				ackedBefore = max(ackedBefore, a.first+int64(len(a.recs))-1)
			}
		}
		mu.Unlock()
		n := 1
		if rng.IntN(4) == 0 {
			n = 2 // two Opens at once
			racing.Add(1)
		}
		opened := make([]*Striped, n)
		var owg sync.WaitGroup
		for j := range opened {
			owg.Go(func() { opened[j] = open(n > 1) })
		}
		owg.Wait()
		for _, s := range opened {
			if s == nil {
				continue
			}
			nwriters.Add(1)
			if got := s.Stats().RecoveredTo; got < ackedBefore || got < servedBefore {
				t.Errorf("a writer recovered to %d, but %d was acknowledged and %d served before it opened", got, ackedBefore, servedBefore)
			}
			mu.Lock()
			writers = append(writers, s)
			mu.Unlock()
			budget := new(atomic.Int64)
			budget.Store(int64(60 + rng.IntN(120)))
			for a := range 4 {
				awg.Go(func() {
					arng := rand.New(rand.NewPCG(seed, uint64(seq.Load())*8+uint64(a)))
					for {
						n := seq.Add(1)
						if n > int64(appends) || budget.Add(-1) < 0 {
							return
						}
						h := &simAppend{}
						recs := make([][]byte, 1+arng.IntN(3))
						for j := range recs {
							h.recs = append(h.recs, fmt.Sprintf("w%p-a%d-%d-%d", s, a, n, j))
							recs[j] = []byte(h.recs[j])
						}
						actx, cancel := context.WithTimeout(ctx, 3*time.Second)
						h.inv, h.call = time.Now(), clock.Add(1)
						off, err := s.Append(actx, recs...)
						h.ret, h.done = time.Now(), clock.Add(1)
						cancel()
						h.first, h.ok, h.uncertain = off, err == nil, errors.Is(err, ErrUncertain)
						if h.ok {
							// Acknowledged: readers serve it without waiting
							// for any writer, so every record below it is
							// committed in its stripe.
							last := off + int64(len(recs)) - 1
							for i, sub := range s.subs {
								if c := sub.Committed(); c < s.heldBy(i, last)-1 {
									t.Errorf("records %d..%d acknowledged while stripe %d had committed its records up to %d, not %d", off, last, i, c, s.heldBy(i, last)-1)
								}
							}
						}
						mu.Lock()
						history = append(history, h)
						mu.Unlock()
						if errors.Is(err, ErrFenced) || errors.Is(err, ErrClosed) {
							return
						}
					}
				})
			}
		}
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		if rng.IntN(3) == 0 {
			crashed.Add(1)
			defer func() {
				for _, s := range opened {
					if s != nil {
						s.Close()
					}
				}
			}()
		}
	}
	awg.Wait()
	stopFaulting()
	for _, f := range faults {
		f.Reset()
	}
	mu.Lock()
	for _, w := range writers {
		w.Close()
	}
	mu.Unlock()
	final, err := OpenStriped(ctx, stores, name, k, opts)
	if err != nil {
		t.Fatalf("final open: %v", err)
	}
	defer final.Close()
	mu.Lock()
	writers = append(writers, final)
	mu.Unlock()
	stopReading()
	end := final.Committed()
	start, err := final.TruncateBefore(ctx, maxAsked.Load())
	if err != nil {
		t.Fatalf("final truncation: %v", err)
	}
	r, err := final.NewReader(start)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	logAt := map[int64]string{}
	var offs []int64
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	finalRead := &simSession{from: start}
	for r.Offset() <= end {
		call := clock.Add(1)
		rec, err := r.Next(rctx)
		if err != nil {
			// What the stripe's reader sees, and where each writer's
			// truncations set out to start each stripe and started it.
			i := int(r.Offset() % int64(k))
			out := fmt.Sprintf("offsets asked up to %d, final start %d\n", maxAsked.Load(), start)
			mu.Lock()
			for j, w := range writers {
				for si, st := range w.Stats().Stripes {
					if st.TruncateTo > 0 || st.Start > 0 {
						out += fmt.Sprintf("writer %d stripe %d: set out to %d, started %d\n", j, si, st.TruncateTo, st.Start)
					}
				}
			}
			mu.Unlock()
			if i < len(r.subs) && r.subs[i] != nil {
				out += fmt.Sprintf("stripe %d:\n%s", i, describe(ctx, r.subs[i], inner, stripeName(name, i)))
			}
			t.Fatalf("final read at %d: %v\n%s", r.Offset(), err, out)
		}
		finalRead.served = append(finalRead.served, rec)
		finalRead.calls, finalRead.rets = append(finalRead.calls, call), append(finalRead.rets, clock.Add(1))
		if len(offs) > 0 && rec.Offset <= offs[len(offs)-1] {
			t.Fatalf("final read: %d after %d", rec.Offset, offs[len(offs)-1])
		}
		logAt[rec.Offset] = string(rec.Data)
		offs = append(offs, rec.Offset)
	}
	where := map[string]int64{}
	for _, off := range offs {
		d := logAt[off]
		if prev, dup := where[d]; dup {
			t.Errorf("duplicate: %q at %d and %d", d, prev, off)
		}
		where[d] = off
	}
	issued := map[string]bool{}
	// Every acknowledged record, wherever the log starts now: no two
	// Appends are acknowledged at one offset, and every reader served an
	// acknowledged offset was served its record.
	ackedAt := map[int64]string{}
	for _, h := range history {
		if !h.ok {
			continue
		}
		for j, d := range h.recs {
			o := h.first + int64(j)
			if prev, ok := ackedAt[o]; ok {
				t.Errorf("two acknowledged Appends hold offset %d: %q and %q", o, prev, d)
			}
			ackedAt[o] = d
		}
	}
	var acked []*simAppend
	var nok, nuncertain, nfailed int
	for _, h := range history {
		for j, d := range h.recs {
			issued[d] = true
			off, in := where[d]
			switch {
			case h.ok && h.first+int64(j) < start:
			case h.ok && !in:
				t.Errorf("lost: acknowledged %q at %d is not in the log (%q is there)", d, h.first+int64(j), logAt[h.first+int64(j)])
			case h.ok && off != h.first+int64(j):
				t.Errorf("moved: acknowledged %q at %d is at %d", d, h.first+int64(j), off)
			case !h.ok && !h.uncertain && in:
				t.Errorf("an Append that failed without ErrUncertain has %q in the log at %d", d, off)
			case !h.ok && in && off != h.first+int64(j):
				t.Errorf("an uncertain Append's %q is at %d, not at the offset %d it returned", d, off, h.first+int64(j))
			}
		}
		switch {
		case h.ok:
			nok++
			acked = append(acked, h)
		case h.uncertain:
			nuncertain++
		default:
			nfailed++
		}
	}
	// Real time: an Append acknowledged before another began has lower
	// offsets than it.
	sort.Slice(acked, func(i, j int) bool { return acked[i].ret.Before(acked[j].ret) })
	prefixMax := make([]int64, len(acked))
	for i, h := range acked {
		prefixMax[i] = h.first + int64(len(h.recs)) - 1
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, h := range acked {
		n := sort.Search(len(acked), func(i int) bool { return !acked[i].ret.Before(h.inv) })
		if n > 0 && prefixMax[n-1] >= h.first {
			t.Errorf("an Append acknowledged before %q began holds offset %d, at or after its first %d", h.recs[0], prefixMax[n-1], h.first)
		}
	}
	// What readers were served.
	served, below := 0, map[int64]string{}
	for ri, ss := range sessions {
		for _, s := range ss {
			prev := s.from - 1
			for j, rec := range s.served {
				served++
				d := string(rec.Data)
				if !issued[d] {
					t.Errorf("reader %d was served %q at %d, which no Append carried", ri, d, rec.Offset)
				}
				if a, ok := ackedAt[rec.Offset]; ok && a != d {
					t.Errorf("reader %d was served %q at %d, where an acknowledged Append holds %q", ri, d, rec.Offset, a)
				}
				if s.uncommitted[j] {
					t.Errorf("reader %d was served %q at %d before it was committed", ri, d, rec.Offset)
				}
				if rec.Offset <= prev {
					t.Errorf("reader %d was served %d after %d", ri, rec.Offset, prev)
				}
				if rec.Offset < start {
					if b, ok := below[rec.Offset]; ok && b != d {
						t.Errorf("reader %d was served %q at %d, below the start, where another was served %q", ri, d, rec.Offset, b)
					}
					below[rec.Offset] = d
				} else if rec.Offset > end || logAt[rec.Offset] != d {
					t.Errorf("reader %d was served %q at %d, the log holds %q", ri, d, rec.Offset, logAt[rec.Offset])
				}
				// Nothing skipped between the last record served and this.
				lo := sort.Search(len(offs), func(i int) bool { return offs[i] > max(prev, start-1) })
				if lo < len(offs) && offs[lo] < rec.Offset {
					t.Errorf("reader %d skipped %q at %d: served %d after %d", ri, logAt[offs[lo]], offs[lo], rec.Offset, prev)
				}
				prev = rec.Offset
			}
		}
	}
	asked := maxAsked.Load()
	for ri, at := range truncatedAt {
		for _, off := range at {
			if off >= asked {
				t.Errorf("reader %d got ErrTruncated at %d, and no truncation asked beyond %d", ri, off, asked)
			}
		}
	}
	// The whole history, the final read included, against the model of a
	// log (striped_lin_test.go). Each record of an Append that failed with
	// ErrUncertain may be in the log or not, whatever the others' fate
	// (they went to different stripes): one that a reader was served took
	// effect before the first read that served it returned, and is checked
	// as an Append that ended then; one never served is not in the log at
	// or after the start (checked above), and left out: the model could
	// always place it after everything, where it does nothing.
	reads := append(slices.Concat(sessions...), finalRead)
	servedBy := map[string]int64{} // record -> the earliest return of a read that served it
	for _, ss := range reads {
		for j, rec := range ss.served {
			if at, ok := servedBy[string(rec.Data)]; !ok || ss.rets[j] < at {
				servedBy[string(rec.Data)] = ss.rets[j]
			}
		}
	}
	var ops []porcupine.Operation
	for _, h := range history {
		switch {
		case h.ok:
			ops = append(ops, porcupine.Operation{Input: logOp{recs: h.recs, first: h.first}, Call: h.call, Return: h.done})
		case h.uncertain:
			for j, rec := range h.recs {
				if at, ok := servedBy[rec]; ok {
					ops = append(ops, porcupine.Operation{Input: logOp{recs: []string{rec}, first: h.first + int64(j)}, Call: h.call, Return: at})
				}
			}
		}
	}
	for _, ss := range reads {
		after := ss.from - 1
		for j, rec := range ss.served {
			ops = append(ops, porcupine.Operation{Input: logOp{read: true, after: after, off: rec.Offset, data: string(rec.Data)}, Call: ss.calls[j], Return: ss.rets[j]})
			after = rec.Offset
		}
	}
	checkStart := time.Now()
	// With the model's floors a check takes milliseconds; the bound only
	// turns a search gone wrong into a failure instead of a hang.
	if !checkLog(t, ops, 5*time.Minute) {
		return
	}
	checkTook := time.Since(checkStart)
	var fillers, moved int64
	for _, w := range writers {
		fillers += w.Stats().Fillers
		for _, sub := range w.subs {
			moved += sub.MoveStats().Moved
		}
	}
	var injected int64
	for _, f := range faults {
		for _, st := range f.Stats() {
			injected += st.Failures
		}
	}
	t.Logf("%s seed %d, %d stripes: %d appends acknowledged, %d uncertain, %d failed; %d writers (%d crashed, %d rounds of two Opens at once); %d records in the log from %d to %d, %d fillers written; %d records served; %d segments moved; %d injected failures; %d operations linearizable (checked in %v)",
		be.name, seed, k, nok, nuncertain, nfailed, nwriters.Load(), crashed.Load(), racing.Load(), len(offs), start, end, fillers, served, moved, injected, len(ops), checkTook.Round(time.Millisecond))
	if nok == 0 || served == 0 {
		t.Errorf("nothing acknowledged (%d) or served (%d): the run checked nothing", nok, served)
	}
}
