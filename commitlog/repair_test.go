package commitlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// A zone replaced by an empty bucket gets its sealed segments back: Stats
// show the copies missing, then none, and every record reads from that
// zone alone once the other two stop answering reads.
func TestRepairReplacedZone(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := be.zones(t, 3)
			stores, faults := wrapAll(inner, 5)
			opts := &Options{MaxSegmentAppends: 5, RepairInterval: 5 * time.Millisecond}
			l := mustOpen(t, stores, "L", opts)
			const n = 40
			appendN := func(from, to int) {
				for i := from; i < to; i++ {
					if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
						t.Fatalf("append %d: %d, %v", i, off, err)
					}
				}
			}
			appendN(0, n/2)
			// Zone 2 is replaced by an empty bucket: every segment gone.
			if err := wipe(ctx, inner[2], "L/seg/"); err != nil {
				t.Fatal(err)
			}
			appendN(n/2, n)
			l.mu.Lock()
			cur := l.seg.key
			l.mu.Unlock()
			// A pass that began after the last append first sees the last
			// segments sealed, and the one after it checks them (a pass
			// under way may end first): wait for three passes, the last
			// finding nothing missing and nothing it could not read.
			passes := l.Stats().RepairPasses
			for i := 0; ; i++ {
				st := l.Stats()
				if st.RepairPasses >= passes+3 && st.Missing == 0 && st.Unchecked == 0 {
					if st.Repaired == 0 {
						t.Fatalf("nothing repaired: %+v", st)
					}
					break
				}
				if i > 20000 {
					t.Fatalf("repair did not finish: %+v", st)
				}
				time.Sleep(time.Millisecond)
			}
			// Only zone 2 answers reads now: every committed record of a
			// sealed segment is there.
			for _, f := range faults[:2] {
				f.Add(fault.Rule{Op: fault.OpRead})
				f.Add(fault.Rule{Op: fault.OpReaderAt})
			}
			r, err := NewReader(stores, "L", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, rec := range readN(t, ctx, r, int(cur.first)) {
				if want := fmt.Sprintf("r%d", i); string(rec.Data) != want || rec.Offset != int64(i) {
					t.Fatalf("record %d from the repaired zone: %q at %d", i, rec.Data, rec.Offset)
				}
			}
		})
	}
}

// A repair cut off at each of its commits on the replaced zone in turn (the
// writer crashes there: every later write of it to that zone fails, and it
// is never closed) leaves every record readable; a new writer takes over,
// its repair finishes the copy, and the replaced zone alone then serves
// every record of the sealed segments. The run ends at the first cut that
// the repair did not reach.
func TestRepairCrashAtEveryStep(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			const n = 12
			cutOff := 0
			for skip := 0; ; skip++ {
				if skip > 200 {
					t.Fatal("the repair never finished within its cuts")
				}
				// Each cut has its own bound: one bound for the whole run
				// (up to a few dozen cuts) ran out with other test runs
				// sharing the two cores.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				inner := be.zones(t, 3)
				crashed, cf := wrapAll(inner, 11)
				opts := &Options{MaxSegmentAppends: 4, RepairInterval: 2 * time.Millisecond}
				l := mustOpen(t, crashed, "L", opts)
				for i := range n {
					if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
						t.Fatalf("append %d: %d, %v", i, off, err)
					}
				}
				// The writer's repair meets zone 2 emptied, and crashes
				// after its skip-th commit there.
				cf[2].FailFrom(fault.OpCommit, skip+1, 0, errors.New("the writer crashed"))
				if err := wipe(ctx, inner[2], "L/seg/"); err != nil {
					t.Fatal(err)
				}
				passes := l.Stats().RepairPasses
				for i := 0; l.Stats().RepairPasses < passes+3; i++ {
					if i > 20000 {
						t.Fatalf("no repair passes: %+v", l.Stats())
					}
					time.Sleep(time.Millisecond)
				}
				cut := cf[2].Stats()[fault.OpCommit].Failures > 0

				// At the crash: every record reads back.
				fresh, _ := wrapAll(inner, 12)
				r, err := NewReader(fresh, "L", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				for i, rec := range readN(t, ctx, r, n) {
					if want := fmt.Sprintf("r%d", i); string(rec.Data) != want {
						t.Fatalf("cut at commit %d: record %d = %q", skip, i, rec.Data)
					}
				}
				r.Close()

				// A new writer takes over and finishes the repair.
				next, nf := wrapAll(inner, 13)
				l2 := mustOpen(t, next, "L", opts)
				l2.mu.Lock()
				cur := l2.seg.key
				l2.mu.Unlock()
				passes = l2.Stats().RepairPasses
				for i := 0; ; i++ {
					st := l2.Stats()
					if st.RepairPasses >= passes+3 && st.Missing == 0 && st.Unchecked == 0 {
						break
					}
					if i > 20000 {
						t.Fatalf("cut at commit %d: the new writer's repair did not finish: %+v", skip, st)
					}
					time.Sleep(time.Millisecond)
				}
				for _, f := range nf[:2] {
					f.Add(fault.Rule{Op: fault.OpRead})
					f.Add(fault.Rule{Op: fault.OpReaderAt})
				}
				r, err = NewReader(next, "L", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				for i := range int(cur.first) {
					rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
					rec, err := r.Next(rctx)
					rcancel()
					if err != nil {
						t.Fatalf("cut at commit %d: reading %d from the repaired zone: %v\nwriter %+v\n%s", skip, i, err, l2.Stats(), describe(ctx, r, inner, "L"))
					}
					if want := fmt.Sprintf("r%d", i); string(rec.Data) != want {
						t.Fatalf("cut at commit %d: record %d from the repaired zone = %q", skip, i, rec.Data)
					}
				}
				r.Close()
				l2.Close()
				l.Close()
				if !cut {
					break
				}
				cutOff++
			}
			if cutOff < 2 {
				t.Fatalf("%d repairs cut off, want one per commit", cutOff)
			}
			t.Logf("%s: the repair cut off at each of its %d commits on the replaced zone", be.name, cutOff)
		})
	}
}

// In the slot layout a zone lists a segment if it holds any slot of it: a
// slot write of the old writer (its append, or its repair's) that lands
// after the zone was replaced by an empty bucket leaves a copy listed with
// no header slot, which the repair reads as absent. Such a copy of the
// log's first segment holding one record, record 0, must be repaired, not
// counted whole: the absent copy's have (0) was taken for "holds record 0"
// (TestRepairCrashAtEveryStep's reader then waited forever on the zone
// for the header, while Stats said nothing was missing).
func TestRepairHeaderlessFirstSegment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inner := testkit.Mems(t, 3)
	stores, _ := wrapAll(inner, 17)
	// One record a segment (see planRollLocked), no passes but ours.
	opts := &Options{Slots: true, MaxSegmentAppends: 4, LACDelay: -1, RepairInterval: -1, OpTimeout: time.Minute}
	l := mustOpen(t, stores, "L", opts)
	for i := range 3 {
		if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	l.Close()
	zones, err := zonesFor(inner, "L", Options{Slots: true})
	if err != nil {
		t.Fatal(err)
	}
	first := segKey{l.epoch, 0}
	// Each Append returned once two zones held its record, and a zone
	// that lags when its segment rolls is left to repair: under load one
	// zone or another lacks a segment or a slot here. So the layout and
	// the late slot are taken from the zones that have them.
	var lists [][]segKey
	var p []byte
	for i, z := range zones {
		ks, err := z.listSegments(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, ks)
		if b, err := blob.ReadAll(ctx, inner[i], slotKey(z.segKey(first), 1)); err == nil {
			p = b
		}
	}
	listed := union(lists)
	if len(listed) < 2 || listed[0] != first || listed[1].first != 1 || p == nil {
		t.Fatalf("segments %v, first record's slot found: %v; want %v holding record 0 alone", listed, p != nil, first)
	}
	// Zone 2 is replaced by an empty bucket, and then a slot write of the
	// old writer to the first segment lands there: the segment is listed,
	// its header slot is not there.
	late := slotKey(zones[2].segKey(first), 1)
	if err := wipe(ctx, inner[2], "L/seg/"); err != nil {
		t.Fatal(err)
	}
	if err := blob.Put(ctx, inner[2], late, p, nil); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, stores, "L", opts)
	// The first pass sees the sealed segments, the second reads and
	// repairs them (RepairInterval < 0: ripe at once), the third finds
	// them whole.
	for pass := range 3 {
		if err := l2.repairPass(ctx); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
	}
	if st := l2.Stats(); st.Missing != 0 || st.Unchecked != 0 || st.Repaired == 0 {
		t.Fatalf("repair did not finish: %+v", st)
	}
	frames, _, err := zones[2].read(ctx, first, 0)
	if err != nil || len(frames) == 0 || frames[0].kind != frameHeader || contiguous(frames, 0) < 0 {
		t.Fatalf("zone 2's copy of %s after the repair: %d frames, %v (Stats %+v)", first, len(frames), err, l2.Stats())
	}
}

// A zone replaced by an empty bucket does not count toward the quorums that
// read absence until it is repaired. Records acknowledged on zones 0 and 1
// (zone 2 down then) lose zone 0's copy when it is emptied: with zone 1 down,
// an Open that counted zone 0 with zone 2 would find none of them and
// recover a log without them. It must refuse instead, recover them once zone
// 1 answers, and, after its repair has put back what zone 0 held and rolled
// past the segment it was writing, count zone 0 again.
func TestReplacedZoneNotCounted(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := be.zones(t, 3)
			stores, faults := wrapAll(inner, 17)
			opts := &Options{MaxSegmentAppends: 4, RepairInterval: 2 * time.Millisecond, OpTimeout: 2 * time.Second}
			mustOpen(t, stores, "L", opts).Close() // every zone gets the intact marker
			faults[2].SetDown(true)
			l := mustOpen(t, stores, "L", opts)
			const n = 10
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
			}
			// The writer crashes; zone 2 comes back; zone 0 is replaced.
			l.cancel()
			faults[2].SetDown(false)
			if err := wipe(ctx, inner[0], "L/"); err != nil {
				t.Fatal(err)
			}
			faults[1].SetDown(true)
			if l2, err := Open(ctx, stores, "L", opts); !errors.Is(err, ErrNotEnoughZones) || !strings.Contains(err.Error(), "intact marker") {
				if err == nil {
					r, _ := NewReader(stores, "L", 0, opts)
					recs := readN(t, ctx, r, int(l2.Committed()+1))
					t.Fatalf("an Open with zone 1 down and zone 0 emptied recovered to %d (%d records) and lost the rest of %d acknowledged", l2.Committed(), len(recs), n)
				}
				t.Fatalf("an Open with zone 1 down and zone 0 emptied: %v, want ErrNotEnoughZones naming the intact marker", err)
			}
			faults[1].SetDown(false)
			l2 := mustOpen(t, stores, "L", opts)
			if st := l2.Stats(); st.RecoveredTo != n-1 {
				t.Fatalf("recovered to %d, want %d", st.RecoveredTo, n-1)
			}
			// Zone 0 is amnesic until the writer has rolled past the
			// segment it was writing when its repair found it so, and every
			// sealed segment is whole there.
			for i := n; ; i++ {
				st := l2.Stats()
				if st.RepairPasses > 0 && st.Amnesic == 0 && st.Missing == 0 && st.Unchecked == 0 && !l2.zones[0].amnesic.Load() {
					break
				}
				if i > n+2000 {
					t.Fatalf("zone 0 was never counted again: %+v", st)
				}
				if _, err := l2.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			end := l2.Committed()
			l2.cancel() // crashed again
			faults[1].SetDown(true)
			l3 := mustOpen(t, stores, "L", opts)
			defer l3.Close()
			if st := l3.Stats(); st.RecoveredTo != end {
				t.Fatalf("with zone 0 repaired and zone 1 down: recovered to %d, want %d", st.RecoveredTo, end)
			}
			r, err := NewReader(stores, "L", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, rec := range readN(t, ctx, r, int(end+1)) {
				if want := fmt.Sprintf("r%d", i); string(rec.Data) != want {
					t.Fatalf("record %d = %q, want %q", i, rec.Data, want)
				}
			}
		})
	}
}
