package commitlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

func TestFrameRoundTrip(t *testing.T) {
	recs := [][]byte{[]byte("a"), {}, make([]byte, 300)}
	b := encodeFrame(frameData, 7, 42, 41, recs)
	b = append(b, encodeHeader(segKey{3, 9}, segKey{2, 1})...)
	frames, n, err := decodeFrames(append(b, b[:5]...))
	if err != nil || n != len(b) || len(frames) != 2 {
		t.Fatalf("decode: %d frames, %d of %d bytes, %v", len(frames), n, len(b), err)
	}
	f := frames[0]
	if f.kind != frameData || f.epoch != 7 || f.first != 42 || f.lac != 41 || len(f.records) != 3 || len(f.records[2]) != 300 {
		t.Errorf("data frame decoded as %+v", f)
	}
	if h := frames[1]; h.kind != frameHeader || h.epoch != 3 || h.first != 9 || h.prevEpoch != 2 || h.prevFirst != 1 {
		t.Errorf("header decoded as %+v", h)
	}
	b[20] ^= 1
	if _, _, err := decodeFrames(b); !errors.Is(err, errCorrupt) {
		t.Errorf("flipped bit: %v, want errCorrupt", err)
	}
}

func TestAppendAndRead(t *testing.T) {
	for _, be := range backends {
		for _, n := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/%dzones", be.name, n), func(t *testing.T) {
				ctx := context.Background()
				stores := be.zones(t, n)
				l := mustOpen(t, stores, "logs/a", nil)
				if got := l.zones[0].mode; got != be.mode {
					t.Fatalf("mode %v, want %v", got, be.mode)
				}
				const writers, each = 8, 25
				var mu sync.Mutex
				want := map[int64]string{}
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						for i := range each {
							data := fmt.Sprintf("w%d-%d", w, i)
							off, err := l.Append(ctx, []byte(data))
							if err != nil {
								t.Error(err)
								return
							}
							mu.Lock()
							want[off] = data
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				if len(want) != writers*each {
					t.Fatalf("%d distinct offsets for %d appends", len(want), writers*each)
				}
				r, err := NewReader(stores, "logs/a", 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				for i, rec := range readN(t, rctx, r, writers*each) {
					if rec.Offset != int64(i) || string(rec.Data) != want[rec.Offset] {
						t.Fatalf("record %d: offset %d %q, want %q", i, rec.Offset, rec.Data, want[int64(i)])
					}
				}
				st := l.Stats()
				if st.Records != writers*each || st.Frames > st.Records {
					t.Errorf("stats %+v", st)
				}
			})
		}
	}
}

// Concurrent appends that arrive while a flush is in flight share the next.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	stores, faults := wrapAll(testkit.Mems(t, 1), 1)
	l := mustOpen(t, stores, "gc", &Options{LACDelay: -1})
	faults[0].AddLatency(fault.OpCommit, latency.Fixed(20*time.Millisecond))
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	st := l.Stats()
	if st.Records != n || st.Frames >= n {
		t.Errorf("%d appends made %d frames (records %d): no group commit", n, st.Frames, st.Records)
	}
}

func TestReaderWaitsAtTail(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			l := mustOpen(t, stores, "tail", nil)
			r, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err = r.Next(short)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next on an empty log: %v, want a deadline", err)
			}
			got := make(chan Record, 1)
			go func() {
				rec, err := r.Next(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- rec
			}()
			if _, err := l.Append(ctx, []byte("x")); err != nil {
				t.Fatal(err)
			}
			if rec := <-got; rec.Offset != 0 || string(rec.Data) != "x" {
				t.Errorf("got %d %q", rec.Offset, rec.Data)
			}
		})
	}
}

func TestTakeoverFencesOldWriter(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			w1 := mustOpen(t, stores, "fence", nil)
			for i := range 10 {
				if _, err := w1.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			w2 := mustOpen(t, stores, "fence", nil)
			if w2.Epoch() <= w1.Epoch() || w2.Stats().RecoveredTo != 9 {
				t.Fatalf("w2 epoch %d (w1 %d), recovered to %d", w2.Epoch(), w1.Epoch(), w2.Stats().RecoveredTo)
			}
			if _, err := w1.Append(ctx, []byte("late")); !errors.Is(err, ErrFenced) {
				t.Fatalf("old writer's append after takeover: %v, want ErrFenced", err)
			}
			if off, err := w2.Append(ctx, []byte("b0")); err != nil || off != 10 {
				t.Fatalf("new writer's append: %d, %v", off, err)
			}
			r, _ := NewReader(stores, "fence", 0, nil)
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			recs := readN(t, rctx, r, 11)
			for i, rec := range recs[:10] {
				if string(rec.Data) != fmt.Sprintf("a%d", i) {
					t.Errorf("record %d = %q", i, rec.Data)
				}
			}
			if string(recs[10].Data) != "b0" {
				t.Errorf("record 10 = %q", recs[10].Data)
			}
		})
	}
}

func TestSegmentsRoll(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			opts := &Options{MaxSegmentAppends: 6}
			l := mustOpen(t, stores, "roll", opts)
			r, _ := l.NewReader(0)
			const n = 60
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
			}
			if st := l.Stats(); st.Segments < 5 {
				t.Errorf("%d segments for %d single appends at 6 appends a segment", st.Segments, n)
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i, rec := range readN(t, rctx, r, n) {
				if string(rec.Data) != fmt.Sprint(i) {
					t.Fatalf("record %d = %q", i, rec.Data)
				}
			}
			l.Close()
			// A new writer recovers the last segment and continues.
			l2 := mustOpen(t, stores, "roll", opts)
			if off, err := l2.Append(ctx, []byte("next")); err != nil || off != n {
				t.Fatalf("append after reopen: %d, %v", off, err)
			}
			if rec := readN(t, rctx, r, 1)[0]; string(rec.Data) != "next" {
				t.Errorf("after reopen: %q", rec.Data)
			}
		})
	}
}

func TestZoneDown(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores, faults := wrapAll(be.zones(t, 3), 2)
			l := mustOpen(t, stores, "down", &Options{MaxSegmentAppends: 8})
			faults[2].SetDown(true)
			for i := range 30 {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			faults[0].SetDown(true) // now only one zone: no quorum
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := l.Append(short, []byte("stuck"))
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("append on one zone of three: %v, want a deadline", err)
			}
			faults[0].SetDown(false)
			faults[2].SetDown(false)
			if off, err := l.Append(ctx, []byte("back")); err != nil || off != 31 {
				t.Fatalf("append after zones return: %d, %v", off, err)
			}
			// Reading from zone 2 alone needs the others for what it missed.
			faults[1].SetDown(true)
			r, _ := NewReader(stores, "down", 0, nil)
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			recs := readN(t, rctx, r, 32)
			for i, rec := range recs[:30] {
				if string(rec.Data) != fmt.Sprint(i) {
					t.Fatalf("record %d = %q", i, rec.Data)
				}
			}
			if string(recs[31].Data) != "back" {
				t.Errorf("record 31 = %q", recs[31].Data)
			}
		})
	}
}

// Azure Premium block blobs append by staging a block and committing the
// block list on condition of the blob's ETag: the same log runs on them.
func TestAzurePremium(t *testing.T) {
	ctx := context.Background()
	stores := azZones(azuritetest.None)(t, 3)
	w1 := mustOpen(t, stores, "az", &Options{MaxSegmentAppends: 8})
	if m := w1.zones[0].mode; m != modeAppend {
		t.Fatalf("mode %v, want append", m)
	}
	for i := range 20 {
		if _, err := w1.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	w2 := mustOpen(t, stores, "az", nil)
	if _, err := w1.Append(ctx, []byte("late")); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer after takeover: %v, want ErrFenced", err)
	}
	if off, err := w2.Append(ctx, []byte("20")); err != nil || off != 20 {
		t.Fatalf("new writer: %d, %v", off, err)
	}
	r, _ := NewReader(stores, "az", 0, nil)
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i, rec := range readN(t, rctx, r, 21) {
		if string(rec.Data) != fmt.Sprint(i) {
			t.Fatalf("record %d = %q", i, rec.Data)
		}
	}
}

// The first Open of a log writes the intact marker on every zone; when that
// write fails on a majority (a timeout under load), the Open fails, and a
// zone without the marker is amnesic to every later Open. Such a log never
// held a record (a successful Open creates its first segment on W zones
// before it returns), so the next Open, finding no segment on any zone
// after it claimed its epoch, gives every zone the marker and opens it. A
// log that has a segment does not: its zones without the marker stay
// amnesic.
func TestFirstOpenFailsAtTheMarker(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inner := testkit.Mems(t, 3)
	stores, faults := wrapAll(inner, 5)
	opts := &Options{Slots: true, OpTimeout: 5 * time.Second}
	var ids []fault.RuleID
	for i := range 2 {
		ids = append(ids, faults[i].Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: "L/epoch/00000000000000000000"}))
	}
	if _, err := Open(ctx, stores, "L", opts); err == nil {
		t.Fatal("an Open whose marker writes failed on zones 0 and 1 succeeded")
	}
	for i, id := range ids {
		faults[i].Remove(id)
	}
	for i, s := range inner {
		ok, err := blob.Exists(ctx, s, "L/epoch/00000000000000000000")
		if err != nil || ok != (i == 2) {
			t.Fatalf("zone %d holds the marker: %v, %v; want it on zone 2 alone", i, ok, err)
		}
	}
	l, err := Open(ctx, stores, "L", opts)
	if err != nil {
		t.Fatalf("an Open after a first Open that failed at the marker: %v", err)
	}
	if off, err := l.Append(ctx, []byte("r0")); err != nil || off != 0 {
		t.Fatalf("append: %d, %v", off, err)
	}
	l.Close()
	for i, s := range inner {
		if ok, err := blob.Exists(ctx, s, "L/epoch/00000000000000000000"); err != nil || !ok {
			t.Fatalf("zone %d holds the marker: %v, %v", i, ok, err)
		}
	}
	// With a segment, zones without the marker stay amnesic.
	for i := range 2 {
		if err := inner[i].Delete(ctx, "L/epoch/00000000000000000000", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(ctx, stores, "L", opts); !errors.Is(err, ErrNotEnoughZones) {
		t.Fatalf("an Open of a log with a segment and the marker on one zone of three: %v, want ErrNotEnoughZones", err)
	}
}
