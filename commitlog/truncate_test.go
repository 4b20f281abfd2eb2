package commitlog

import (
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
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// TruncateBefore deletes whole segments below the offset, on every layout
// (with moved segments' regional copies, where segments move): readers from
// the start read every record on, readers below it get ErrTruncated, a
// reader that was below it when it ran stops with ErrTruncated, and the
// next writer recovers the rest. A truncation cut off at each of its
// deletes in turn leaves every record from the offset on readable, and a
// later one finishes it.
func TestTruncateBefore(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := be.zones(t, 3)
			stores, faults := wrapAll(inner, 3)
			regional := testkit.Mems(t, 1)[0]
			opts := &Options{MaxSegmentAppends: 5, Regional: regional, MoveAfter: time.Millisecond}
			for range 2 { // earlier writers' epoch claims
				mustOpen(t, stores, "L", opts).Close()
			}
			l := mustOpen(t, stores, "L", opts)
			const n, cut = 60, 23
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
			}
			if be.mode != modeSlots {
				for i := 0; l.MoveStats().Moved < 2; i++ {
					if i > 20000 {
						t.Fatalf("no segment moved: %+v", l.MoveStats())
					}
					time.Sleep(time.Millisecond)
				}
			}
			below, err := NewReader(stores, "L", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer below.Close()
			readN(t, ctx, below, 2)

			// Cut off at each delete in turn.
			cutOff := 0
			for skip := 0; ; skip++ {
				ids := make([]fault.RuleID, len(faults))
				for i, f := range faults {
					ids[i] = f.Add(fault.Rule{Op: fault.OpDelete, Skip: skip, Count: 1})
				}
				_, err := l.TruncateBefore(ctx, cut)
				fired := false
				for i, f := range faults {
					fired = !f.Remove(ids[i]) || fired
				}
				if err == nil {
					if fired {
						t.Fatalf("a truncation whose delete %d failed succeeded", skip)
					}
					break
				}
				cutOff++
				r, rerr := NewReader(stores, "L", cut, opts)
				if rerr != nil {
					t.Fatal(rerr)
				}
				for i, rec := range readN(t, ctx, r, n-cut) {
					if want := fmt.Sprintf("r%d", cut+i); string(rec.Data) != want {
						t.Fatalf("after a truncation cut off at delete %d: record %d = %q", skip, cut+i, rec.Data)
					}
				}
				r.Close()
				if skip > 1000 {
					t.Fatalf("truncation never finished: %v", err)
				}
			}
			if cutOff < 3 {
				t.Fatalf("%d truncations cut off, want one per delete", cutOff)
			}
			start, err := l.TruncateBefore(ctx, cut)
			if err != nil || start > cut || start == 0 {
				t.Fatalf("TruncateBefore(%d) = %d, %v", cut, start, err)
			}
			if st := l.Stats(); st.Truncated == 0 || st.Start != start {
				t.Errorf("stats %+v, start %d", st, start)
			}
			for _, from := range []int64{0, start - 1} {
				r, err := NewReader(stores, "L", from, opts)
				if err == nil {
					_, err = r.Next(ctx)
					r.Close()
				}
				if !errors.Is(err, ErrTruncated) {
					t.Errorf("reader from %d, below the start %d: %v, want ErrTruncated", from, start, err)
				}
			}
			if _, err := below.Next(ctx); !errors.Is(err, ErrTruncated) {
				t.Errorf("a reader below the start when it was truncated: %v, want ErrTruncated", err)
			}
			// Nothing of the truncated segments is left in the regional store.
			for o, err := range blob.All(ctx, regional, nil) {
				if err != nil {
					t.Fatal(err)
				}
				var k segKey
				if _, err := fmt.Sscanf(o.Key[len("L/seg/"):], "%010d-%020d", &k.epoch, &k.first); err == nil && k.first < start {
					t.Errorf("regional copy %s of a truncated segment is left", o.Key)
				}
			}
			// A truncated log keeps no segment below its start and one
			// epoch claim: this writer's.
			for i, z := range inner {
				epochs := 0
				for o, err := range blob.All(ctx, z, &blob.ListOptions{Prefix: "L/"}) {
					if err != nil {
						t.Fatal(err)
					}
					var k segKey
					switch {
					case o.Key == "L/epoch/00000000000000000000": // the intact marker
					case strings.HasPrefix(o.Key, "L/epoch/"):
						epochs++
					case strings.HasPrefix(o.Key, "L/seg/"):
						if _, err := fmt.Sscanf(o.Key[len("L/seg/"):], "%010d-%020d", &k.epoch, &k.first); err == nil && k.first < start {
							t.Errorf("zone %d keeps %s, below the start %d", i, o.Key, start)
						}
					}
				}
				if epochs != 1 {
					t.Errorf("zone %d keeps %d epoch claims, want 1", i, epochs)
				}
			}
			l.Close()
			w2 := mustOpen(t, stores, "L", opts)
			if got := w2.Stats().RecoveredTo; got != n-1 {
				t.Fatalf("recovered to %d after truncation, want %d", got, n-1)
			}
			r, err := NewReader(stores, "L", start, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, rec := range readN(t, ctx, r, int(n-start)) {
				if want := fmt.Sprintf("r%d", start+int64(i)); string(rec.Data) != want {
					t.Fatalf("record %d = %q, want %q", start+int64(i), rec.Data, want)
				}
			}
		})
	}
}

// Retention by bytes and by age, on every layout: the repair passes
// truncate the oldest sealed segments beyond RetainBytes, and those whose
// last write is older than RetainFor; every record from the start on reads
// back, readers below it get ErrTruncated, and the segment being written
// stays.
func TestRetention(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stores := be.zones(t, 3)
			const n = 60
			opts := &Options{MaxSegmentAppends: 5, RepairInterval: 20 * time.Millisecond, RetainBytes: 1}
			l := mustOpen(t, stores, "bytes", opts)
			defer l.Close()
			for i := range n {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			// Passes truncate until what they keep is within bounds: here
			// (one byte) the segment being written alone, at most 5
			// appends a segment.
			waitStart := func(l *Log, what string, atLeast int64) int64 {
				t.Helper()
				for i := 0; ; i++ {
					if st := l.Stats(); st.Start >= atLeast && st.Truncated > 0 {
						return st.Start
					}
					if i > 5000 {
						t.Fatalf("%s: start %d after %d passes, want at least %d: %+v", what, l.Stats().Start, l.Stats().RepairPasses, atLeast, l.Stats())
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			start := waitStart(l, "RetainBytes 1", n-5)
			r, err := NewReader(stores, "bytes", start, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range readN(t, ctx, r, int(n-start)) {
				if want := fmt.Sprintf("r%d", start+int64(i)); string(rec.Data) != want {
					t.Fatalf("record %d = %q, want %q", start+int64(i), rec.Data, want)
				}
			}
			r.Close()
			r, err = NewReader(stores, "bytes", 0, opts)
			if err == nil {
				_, err = r.Next(ctx)
				r.Close()
			}
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("reader from 0 after retention: %v, want ErrTruncated", err)
			}

			// By age: nothing goes while the segments are young.
			aopts := &Options{MaxSegmentAppends: 5, RepairInterval: 20 * time.Millisecond, RetainFor: time.Hour}
			a := mustOpen(t, stores, "age", aopts)
			defer a.Close()
			for i := range 20 {
				if _, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			for a.Stats().RepairPasses < 3 {
				time.Sleep(5 * time.Millisecond)
			}
			if st := a.Stats(); st.Truncated != 0 || st.RetainErrors != 0 {
				t.Errorf("RetainFor 1h truncated young segments: %+v", st)
			}
			a.Close()
			// A writer that keeps a millisecond of history drops every
			// sealed segment once they are that old.
			aopts.RetainFor = time.Millisecond
			a = mustOpen(t, stores, "age", aopts)
			defer a.Close()
			waitStart(a, "RetainFor 1ms", 20) // all but the new writer's segment
		})
	}
}

func TestRetentionOptions(t *testing.T) {
	stores := testkit.Mems(t, 3)
	for _, o := range []*Options{{RetainFor: -time.Second}, {RetainBytes: -1}, {RetainBytes: 1 << 20, RepairInterval: -1}} {
		if l, err := Open(context.Background(), stores, "L", o); err == nil {
			l.Close()
			t.Errorf("Open with %+v: no error", *o)
		}
	}
}

// An idle, truncated log, on every layout: what it keeps on each zone, and
// the requests each repair pass makes while nothing is appended (counted
// on the fault wrapper). A pass only lists: no write, no Stat, no read.
func TestIdleTruncatedLog(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := be.zones(t, 3)
			stores, faults := wrapAll(inner, 21)
			opts := &Options{MaxSegmentAppends: 5, RepairInterval: 5 * time.Millisecond}
			for range 2 { // earlier writers' epoch claims
				mustOpen(t, stores, "L", opts).Close()
			}
			l := mustOpen(t, stores, "L", opts)
			defer l.Close()
			const n = 60
			for i := range n {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			start, err := l.TruncateBefore(ctx, n-2)
			if err != nil {
				t.Fatal(err)
			}
			waitPasses := func(k int64) {
				t.Helper()
				p := l.Stats().RepairPasses
				for i := 0; l.Stats().RepairPasses < p+k; i++ {
					if i > 20000 {
						t.Fatalf("no repair passes: %+v", l.Stats())
					}
					time.Sleep(time.Millisecond)
				}
			}
			count := func() (calls map[fault.Op]int64, passes int64) {
				passes = l.Stats().RepairPasses
				calls = map[fault.Op]int64{}
				for _, f := range faults {
					for op, st := range f.Stats() {
						calls[op] += st.Calls
					}
				}
				return calls, passes
			}
			onlyLists := func(before, after map[fault.Op]int64) bool {
				for op, c := range after {
					if op != fault.OpList && c != before[op] {
						return false
					}
				}
				return true
			}
			// What the writer did, counted as its calls return (the calls
			// are counted as they start).
			writes := func() [4]int64 {
				st := l.Stats()
				return [4]int64{st.Appends, st.Segments, st.LACFrames, st.Repaired}
			}
			// Idle: once the passes have read every copy whole, they read
			// none again (a copy found whole is not read again). The
			// writer's last frames may land after TruncateBefore returns
			// (its roll past the last records, a slow zone catching up
			// with the seal frames): a pass that reads a copy such a zone
			// is still being given finds it short and reads it again the
			// next pass, and on a loaded machine that outlasts any fixed
			// number of 5ms passes. So the log counts as idle once the
			// passes over three in a row made lists only and the writer
			// wrote nothing (a window holds at least two whole passes); a
			// log that never gets there (a pass that reads every time)
			// fails here.
			settle := 0
			prev, _ := count()
			for prevW := writes(); ; settle++ {
				if settle == 100 {
					t.Fatalf("not idle after %d windows of 3 passes: %+v", settle, l.Stats())
				}
				waitPasses(3)
				cur, _ := count()
				curW := writes()
				if onlyLists(prev, cur) && curW == prevW {
					break
				}
				prev, prevW = cur, curW
			}
			before, p0 := count()
			waitPasses(20)
			after, p1 := count()
			// The pass under way at either count may be counted in part:
			// per pass, the counts are within one pass of these.
			passes := p1 - p0
			perOp := map[fault.Op]int64{}
			for op, c := range after {
				perOp[op] = c - before[op]
			}
			for op, c := range perOp {
				if op != fault.OpList && c != 0 {
					t.Errorf("idle passes made %d calls of %v, want lists only", c, op)
				}
			}
			lists := perOp[fault.OpList]
			// Each pass lists each zone's segments (which give the chain
			// too) and its epochs above the writer's.
			if lists > (passes+1)*3*2 || lists < (passes-1)*3*2 {
				t.Errorf("%d lists in %d passes over 3 zones, want 2 a zone a pass", lists, passes)
			}
			// What it keeps: the segments at or after the start (the one
			// being written and the one created ahead), one epoch claim,
			// the intact marker and the start.
			var objects, bytes int64
			for z, s := range inner {
				var segs, epochs, intact, starts int
				for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "L/"}) {
					if err != nil {
						t.Fatal(err)
					}
					objects++
					bytes += o.Size
					switch {
					case o.Key == "L/epoch/00000000000000000000":
						intact++
					case strings.HasPrefix(o.Key, "L/epoch/"):
						epochs++
					case strings.HasPrefix(o.Key, "L/seg/"+startPrefix):
						starts++
					case strings.HasPrefix(o.Key, "L/seg/"):
						segs++
					}
				}
				if starts != 1 {
					t.Errorf("zone %d keeps %d starts, want 1", z, starts)
				}
				if epochs != 1 {
					t.Errorf("zone %d keeps %d epoch claims, want 1", z, epochs)
				}
				if segs == 0 || intact != 1 {
					t.Errorf("zone %d keeps %d segments and %d intact markers, want some and 1", z, segs, intact)
				}
			}
			t.Logf("%s: idle after truncating to %d (after %d windows of 3 passes that did more than list): %d lists in %d repair passes (%.1f a zone a pass, nothing else); keeps %d objects, %d bytes on 3 zones",
				be.name, start, settle, lists, passes, float64(lists)/float64(passes)/3, objects, bytes)
		})
	}
}

// deleteGateStore holds the first Delete of a key under the armed prefix
// until released, as a delete in flight (a slow request) that reaches the
// store late.
type deleteGateStore struct {
	blob.Store
	opGate
}

func (g *deleteGateStore) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := g.wait(ctx, func(prefix string) bool { return strings.HasPrefix(key, prefix) }); err != nil {
		return err
	}
	return g.Store.Delete(ctx, key, opts)
}

// A writer's truncation deletes its oldest segment on two zones, while its
// delete on the third is on the way; meanwhile a newer writer opens, and
// its repair finds the segment on that zone alone. Were the segment on its
// chain, the repair would copy it back to the other two, and a reader
// opened below the start the old writer's truncation returns would be
// served its records, not ErrTruncated. The start the truncation recorded
// before deleting keeps the segment off every chain: the repair leaves it,
// and readers below get ErrTruncated. The truncation that a newer writer
// overtook still fails with ErrFenced (the newer writer, which claimed its
// epoch before it listed anything it could repair, truncates again if it
// must).
func TestTruncateOvertakenByNewerRepair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inner := testkit.Mems(t, 3)
	stores, gates := wrapEach(inner, func(s blob.Store) *deleteGateStore { return &deleteGateStore{Store: s} })
	aOpts := &Options{Slots: true, MaxSegmentAppends: 5, RepairInterval: -1, OpTimeout: time.Minute}
	a := mustOpen(t, stores, "L", aOpts)
	const n = 20
	for i := range n {
		if _, err := a.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	a.mu.Lock()
	cur := a.seg.key
	a.mu.Unlock()
	chain, err := a.chainTo(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) < 3 {
		t.Fatalf("chain %v: want at least 3 segments", chain)
	}
	oldest := chain[0]
	zones, _ := zonesFor(inner, "L", Options{Slots: true})
	// The zone whose delete is held must hold every record of the
	// segment (W of 3 zones acknowledged them; the third may lack some),
	// so that the newer writer has a copy to repair from.
	held := -1
	for i, z := range zones {
		frames, _, err := z.read(ctx, oldest, 0)
		if err == nil && contiguous(frames, oldest.first) >= chain[1].first-1 {
			held = i
			break
		}
	}
	if held < 0 {
		t.Fatalf("no zone holds every record of segment %s", oldest)
	}
	gate := gates[held]
	gate.arm(zones[held].segKey(oldest))
	type result struct {
		start int64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		start, err := a.TruncateBefore(ctx, chain[2].first)
		done <- result{start, err}
	}()
	<-gate.held
	// The oldest segment is gone from the other zones (the deletes ran
	// on every zone at once; the held zone's waits).
	others := func(want bool) bool {
		for z := range zones {
			ks, err := zones[z].listSegments(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if z != held && slices.Contains(ks, oldest) != want {
				return false
			}
		}
		return true
	}
	for i := 0; !others(false); i++ {
		if i > 10000 {
			t.Fatalf("segment %s not deleted from the zones other than %d", oldest, held)
		}
		time.Sleep(time.Millisecond)
	}
	b := mustOpen(t, stores, "L", &Options{Slots: true, MaxSegmentAppends: 5, RepairInterval: time.Millisecond, OpTimeout: time.Minute})
	for i := 0; b.Stats().RepairPasses < 5; i++ {
		if i > 60000 {
			t.Fatalf("b ran no repair passes: %+v", b.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if !others(false) {
		t.Fatalf("b's repair copied segment %s back, below the start a recorded: %+v", oldest, b.Stats())
	}
	b.Close()
	close(gate.release)
	res := <-done
	if !errors.Is(res.err, ErrFenced) {
		t.Fatalf("a's truncation: %v, start %d; want ErrFenced", res.err, res.start)
	}
	r, err := NewReader(stores, "L", oldest.first, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rec, err := r.Next(ctx); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a reader at %d, below the start a recorded, got %q at %d, err %v; want ErrTruncated", oldest.first, rec.Data, rec.Offset, err)
	}
	if st := a.Stats().Start; st > oldest.first {
		t.Fatalf("a's Stats().Start is %d after its truncation failed, above segment %s, which b brought back", st, oldest)
	}
}

// A copy of a truncated segment lands on one zone after the truncation
// deleted it: a create or a repair copy that was on the wire when the
// truncation listed (a service applies a request after its client gave
// up), or an older writer's repair made before it learned of a newer
// writer. The copy must be garbage: readers opened below the start get
// ErrTruncated rather than its records (or a wait for the rest of them),
// the writer's view of the chain (its start, its moves, its repair) does
// not reach below the start, and the next truncation deletes the copy.
func TestLateCopyBelowStart(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := be.zones(t, 3)
			opts := &Options{MaxSegmentAppends: 5, RepairInterval: time.Millisecond}
			l := mustOpen(t, inner, "L", opts)
			defer func() { l.Close() }()
			const n, cut = 40, 23
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
			}
			// What zone 2 holds of the first segment, as a late copy
			// would put it back.
			first := l.zones[2].segKey(segKey{l.epoch, 0})
			saved := map[string][]byte{}
			for o, err := range blob.All(ctx, inner[2], &blob.ListOptions{Prefix: first}) {
				if err != nil {
					t.Fatal(err)
				}
				p, err := blob.ReadAll(ctx, inner[2], o.Key)
				if err != nil {
					t.Fatal(err)
				}
				saved[o.Key] = p
			}
			if len(saved) == 0 {
				t.Fatalf("zone 2 holds nothing under %s", first)
			}
			start, err := l.TruncateBefore(ctx, cut)
			if err != nil || start == 0 || start > cut {
				t.Fatalf("TruncateBefore(%d) = %d, %v", cut, start, err)
			}
			for k, p := range saved {
				if err := blob.Put(ctx, inner[2], k, p, nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, from := range []int64{0, start - 1} {
				r, err := NewReader(inner, "L", from, opts)
				if err == nil {
					var rec Record
					rec, err = r.Next(ctx)
					if err == nil {
						err = fmt.Errorf("served offset %d, %q", rec.Offset, rec.Data)
					}
					r.Close()
				}
				if !errors.Is(err, ErrTruncated) {
					t.Errorf("reader from %d, below the start %d, with a late copy of the first segment on zone 2: %v, want ErrTruncated", from, start, err)
				}
			}
			// Repair passes run meanwhile: they copied nothing below the
			// start back to the other zones.
			for i := 0; l.Stats().RepairPasses < 3; i++ {
				if i > 60000 {
					t.Fatalf("no repair pass: %+v", l.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			for i := range 2 {
				if ks, err := l.zones[i].listSegments(ctx, nil); err != nil {
					t.Fatal(err)
				} else if ks[0].first < start {
					t.Errorf("zone %d holds segment %s, below the start %d", i, ks[0], start)
				}
			}
			// The next truncation (to the same start) deletes the copy.
			if again, err := l.TruncateBefore(ctx, cut); err != nil || again != start {
				t.Fatalf("TruncateBefore(%d) again = %d, %v, want %d", cut, again, err, start)
			}
			if ks, err := l.zones[2].listSegments(ctx, nil); err != nil {
				t.Fatal(err)
			} else if ks[0].first < start {
				t.Errorf("zone 2 keeps segment %s, below the start %d, after a second truncation", ks[0], start)
			}
			// And a new writer recovers the log, which reads from the start.
			l.Close()
			l = mustOpen(t, inner, "L", opts)
			if got := l.Stats().RecoveredTo; got != n-1 {
				t.Fatalf("recovered to %d, want %d", got, n-1)
			}
			r, err := NewReader(inner, "L", start, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, rec := range readN(t, ctx, r, int(n-start)) {
				if want := fmt.Sprintf("r%d", start+int64(i)); string(rec.Data) != want {
					t.Fatalf("record %d = %q, want %q", start+int64(i), rec.Data, want)
				}
			}
		})
	}
}

// A zone replaced by an empty bucket after a truncation gets the start
// back from the repair before its intact marker: counted again, it must
// not show a late copy of a truncated segment as the log's first.
func TestRepairedZoneGetsTheStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inner := testkit.Mems(t, 3)
	opts := &Options{Slots: true, MaxSegmentAppends: 4, RepairInterval: time.Millisecond}
	l := mustOpen(t, inner, "L", opts)
	defer l.Close()
	const n, cut = 30, 17
	for i := range n {
		if _, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	start, err := l.TruncateBefore(ctx, cut)
	if err != nil || start == 0 {
		t.Fatalf("TruncateBefore(%d) = %d, %v", cut, start, err)
	}
	if err := wipe(ctx, inner[2], "L/"); err != nil {
		t.Fatal(err)
	}
	found := false // a repair pass found zone 2 without its marker
	for i := n; ; i++ {
		st := l.Stats()
		found = found || st.Amnesic > 0
		if found && st.Amnesic == 0 && st.Missing == 0 && st.Unchecked == 0 && !l.zones[2].amnesic.Load() {
			break
		}
		if i > n+4000 {
			t.Fatalf("zone 2 was never counted again: %+v", st)
		}
		if _, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if _, got, err := l.zones[2].listLog(ctx, nil); err != nil || got < start {
		t.Fatalf("zone 2, counted again, records the start %d (%v), want at least %d", got, err, start)
	}
}

// Each request of a truncation has OpTimeout of its own: a zone that takes
// most of it for every Delete still has its old epochs and every slot of a
// segment deleted, where one bound for the zone's whole cleanup failed it
// with many epochs or slots to go.
func TestTruncateBoundsEachRequest(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			stores, faults := wrapAll(be.zones(t, 3), 5)
			const slow = 200 * time.Millisecond
			opts := &Options{MaxSegmentAppends: 5, OpTimeout: 5 * slow}
			const earlier = 6 // earlier writers' epoch claims: 6 slow Deletes, past OpTimeout
			for range earlier {
				mustOpen(t, stores, "L", opts).Close()
			}
			l := mustOpen(t, stores, "L", opts)
			for i := range 12 {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			before := faults[2].Stats()[fault.OpDelete].Calls
			faults[2].AddLatency(fault.OpDelete, latency.Fixed(slow))
			start, err := l.TruncateBefore(ctx, 10)
			if err != nil {
				t.Fatalf("truncation with a zone's Deletes at %v each: %v", slow, err)
			}
			deletes := faults[2].Stats()[fault.OpDelete].Calls - before
			// More slow Deletes than fit in one OpTimeout: the test shows
			// the bound is each request's.
			if time.Duration(deletes)*slow <= opts.OpTimeout {
				t.Fatalf("zone 2 had %d Deletes, %v in all: not past OpTimeout %v", deletes, time.Duration(deletes)*slow, opts.OpTimeout)
			}
			t.Logf("zone 2: %d Deletes", deletes)
			if start != 10 {
				t.Fatalf("start %d, want 10", start)
			}
			for i, z := range stores {
				var epochs []string
				for o, err := range blob.All(ctx, z, &blob.ListOptions{Prefix: "L/epoch/"}) {
					if err != nil {
						t.Fatal(err)
					}
					epochs = append(epochs, o.Key)
				}
				if len(epochs) > 2 { // this writer's claim, and the intact marker where kept
					t.Errorf("zone %d still holds epochs %q", i, epochs)
				}
			}
			r, err := NewReader(stores, "L", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Next(ctx); !errors.Is(err, ErrTruncated) {
				t.Fatalf("reading from 0 after the truncation: %v, want ErrTruncated", err)
			}
		})
	}
}

// A truncation cut off after recording its start on one zone leaves that
// start there alone, and listings that reach that zone drop the segments
// below it: for readers that list it the log starts there. A later
// truncation to a lower offset whose quorum listing missed that zone
// returned its own, lower start, and a reader opened at it that listed the
// zone got ErrTruncated (the error the striped simulation's final read got
// once, which this may or may not explain).
// The later truncation returns the recorded start, and finishes the cut-off
// one's deletes.
func TestTruncateAfterCutOffStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wrapped, faults := wrapAll(testkit.Mems(t, 3), 3)
	stores, gates := wrapEach(wrapped, func(s blob.Store) *listGateStore { return &listGateStore{Store: s} })
	const n = 12
	l, opts := openAppended(t, ctx, stores, n)
	defer l.Close()
	// The first truncation records its start on zone 0 alone.
	for _, f := range faults[1:] {
		f.Add(fault.Rule{Op: fault.OpWrite, KeyPrefix: "L/seg/" + startPrefix, Count: 1})
	}
	if _, err := l.TruncateBefore(ctx, 8); err == nil {
		t.Fatal("TruncateBefore(8) with the start's Put failing on two zones succeeded")
	}
	_, high, err := l.zones[0].listLog(ctx, nil)
	if err != nil || high == 0 || high > 8 {
		t.Fatalf("zone 0 records the start %d (%v), want one in 1..8", high, err)
	}
	// The next one's quorum listing misses zone 0: zone 0's listing fails
	// before zones 1 and 2 answer theirs.
	faults[0].Add(fault.Rule{Op: fault.OpList, KeyPrefix: "L/seg/", Count: 1})
	for _, g := range gates[1:] {
		g.arm("L/seg/")
	}
	type result struct {
		start int64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		start, err := l.TruncateBefore(ctx, 1)
		done <- result{start, err}
	}()
	for i, g := range gates[1:] {
		select {
		case <-g.held:
		case <-ctx.Done():
			t.Fatalf("zone %d was never listed", i+1)
		}
	}
	for faults[0].Stats()[fault.OpList].Failures == 0 {
		if ctx.Err() != nil {
			t.Fatal("zone 0 was never listed")
		}
		time.Sleep(time.Millisecond)
	}
	for _, g := range gates[1:] {
		close(g.release)
	}
	res := <-done
	start, err := res.start, res.err
	if err != nil || start < high {
		t.Fatalf("TruncateBefore(1) = %d, %v after a truncation recorded the start %d on zone 0", start, err, high)
	}
	// It deleted what the cut-off one left (a zone that lagged may still
	// get a late create of a segment below, which the start hides).
	if st := l.Stats(); st.Truncated == 0 {
		t.Fatalf("no segment deleted: %+v", st)
	}
	for i, z := range l.zones {
		if _, rec, err := z.listLog(ctx, nil); err != nil || rec < start {
			t.Fatalf("zone %d records the start %d (%v), want %d", i, rec, err, start)
		}
	}
	// A reader at the start, listing zone 0 (zone 2 down), reads every
	// record from it; one below it gets ErrTruncated.
	faults[2].SetDown(true)
	readsFrom(t, ctx, stores, opts, start, n)
	below, err := NewReader(stores, "L", start-1, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer below.Close()
	if _, err := below.Next(ctx); !errors.Is(err, ErrTruncated) {
		t.Fatalf("reading at %d, below the start %d: %v, want ErrTruncated", start-1, start, err)
	}
}

// lateStartStore takes the Put of a truncation's start, when armed, and
// reports it failed, as a client that gave up on it would; land applies it
// later, as the service may.
type lateStartStore struct {
	blob.Store
	mu    sync.Mutex
	armed bool
	key   string
}

func (s *lateStartStore) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	s.mu.Lock()
	take := s.armed && strings.Contains(key, "/seg/"+startPrefix)
	if take {
		s.armed, s.key = false, key
	}
	s.mu.Unlock()
	if !take {
		return s.Store.NewWriter(ctx, key, opts)
	}
	return lateWriter{}, nil
}

func (s *lateStartStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

func (s *lateStartStore) land(ctx context.Context) error {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	return blob.Put(ctx, s.Store, key, nil, nil)
}

type lateWriter struct{}

func (lateWriter) Write(p []byte) (int, error) { return len(p), nil }
func (lateWriter) Close() error                { return context.DeadlineExceeded }

// A truncation's Put of its start times out on one zone and fails on the
// others, and lands on that zone after the next truncation, to a lower
// offset, listed every zone. That one returned its own, lower start, and
// readers at it that listed the zone then got ErrTruncated. It goes at
// least to the writer's own earlier target.
func TestTruncateAfterLateStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wrapped, faults := wrapAll(testkit.Mems(t, 3), 5)
	stores, late := wrapEach(wrapped, func(s blob.Store) *lateStartStore { return &lateStartStore{Store: s} })
	const n = 12
	l, opts := openAppended(t, ctx, stores, n)
	defer l.Close()
	late[1].arm()
	for _, f := range []*fault.Store{faults[0], faults[2]} {
		f.Add(fault.Rule{Op: fault.OpWrite, KeyPrefix: "L/seg/" + startPrefix, Count: 1})
	}
	if _, err := l.TruncateBefore(ctx, 8); err == nil {
		t.Fatal("TruncateBefore(8) with the start's Put failing on every zone succeeded")
	}
	target := l.Stats().TruncateTo
	for i, z := range l.zones {
		if _, rec, err := z.listLog(ctx, nil); err != nil || rec != 0 {
			t.Fatalf("zone %d records the start %d (%v) before the late Put lands", i, rec, err)
		}
	}
	start, err := l.TruncateBefore(ctx, 1)
	if err != nil || start < target || target == 0 {
		t.Fatalf("TruncateBefore(1) = %d, %v after one that set out to reach %d", start, err, target)
	}
	if err := late[1].land(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader at the start, listing zone 1 (zone 2 down), reads every
	// record from it.
	faults[2].SetDown(true)
	readsFrom(t, ctx, stores, opts, start, n)
}

// openAppended opens log L over stores, one record a segment (see
// planRollLocked) and no passes of its own, and appends r0 to r<n-1>.
func openAppended(t *testing.T, ctx context.Context, stores []blob.Store, n int) (*Log, *Options) {
	t.Helper()
	opts := &Options{MaxSegmentAppends: 4, LACDelay: -1, RepairInterval: -1, OpTimeout: 10 * time.Second}
	l := mustOpen(t, stores, "L", opts)
	for i := range n {
		if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
			l.Close()
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	return l, opts
}

// readsFrom checks that a reader of L at start reads r<start> to r<n-1>.
func readsFrom(t *testing.T, ctx context.Context, stores []blob.Store, opts *Options, start int64, n int) {
	t.Helper()
	r, err := NewReader(stores, "L", start, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, rec := range readN(t, ctx, r, n-int(start)) {
		if want := fmt.Sprintf("r%d", start+int64(i)); string(rec.Data) != want || rec.Offset != start+int64(i) {
			t.Fatalf("read %d %q, want %d %q", rec.Offset, rec.Data, start+int64(i), want)
		}
	}
}

// wrapEach wraps every store with wrap, and returns the wrapped ones both as
// stores and as what wrap made.
func wrapEach[W blob.Store](stores []blob.Store, wrap func(blob.Store) W) ([]blob.Store, []W) {
	out, ws := make([]blob.Store, len(stores)), make([]W, len(stores))
	for i, s := range stores {
		ws[i] = wrap(s)
		out[i] = ws[i]
	}
	return out, ws
}
