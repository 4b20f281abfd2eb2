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
			regional := memZones(t, 1)[0]
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
	stores := memZones(t, 3)
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
			// Idle: the passes after the truncation have read what they
			// read once (a copy found whole is not read again).
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
			waitPasses(3)
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
			// being written and the one created ahead), one epoch claim and
			// the intact marker.
			var objects, bytes int64
			for z, s := range inner {
				var segs, epochs, intact int
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
					case strings.HasPrefix(o.Key, "L/seg/"):
						segs++
					}
				}
				if epochs != 1 {
					t.Errorf("zone %d keeps %d epoch claims, want 1", z, epochs)
				}
				if segs == 0 || intact != 1 {
					t.Errorf("zone %d keeps %d segments and %d intact markers, want some and 1", z, segs, intact)
				}
			}
			t.Logf("%s: idle after truncating to %d: %d lists in %d repair passes (%.1f a zone a pass, nothing else); keeps %d objects, %d bytes on 3 zones",
				be.name, start, lists, passes, float64(lists)/float64(passes)/3, objects, bytes)
		})
	}
}
