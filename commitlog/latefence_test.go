package commitlog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// TestFencedWriterLateFramesOnMovedSegment: a writer fenced by a recovery
// that did not reach one zone sends its frames to a zone that lagged by one
// record only after the recovery fenced that zone, copied the record there,
// repaired its LAC and moved the segment to the regional store. Those frames
// are fewer bytes than the recovery and the repair appended, so a service
// that took them as resends of bytes the stream had written would
// acknowledge them; with the zone the recovery missed the fenced writer
// would then have W zones for a record the recovery dropped, at the offset
// where the new writer acknowledged its own. The fenced writer's Append must
// fail, with ErrFenced.
func TestFencedWriterLateFramesOnMovedSegment(t *testing.T) {
	ctx := context.Background()
	inner := rapidZones(gcsrapidtest.Zero())(t, 3)
	// Each zone's gate holds the old writer's next append to a segment
	// once armed: frames it sends late.
	holds := []*opGate{{}, {}, {}}
	aStores := make([]blob.Store, 3)
	for i, s := range inner {
		aStores[i] = &watchStore{Store: s, before: func(r watchReq) error {
			return holds[i].wait(ctx, func(prefix string) bool {
				return r.op == watchAppend && strings.HasPrefix(r.key, prefix)
			})
		}}
	}
	// The old writer: no mover, no repair of its own.
	a := mustOpen(t, aStores, "log", &Options{RepairInterval: -1})
	if _, err := a.Append(ctx, []byte("r0")); err != nil {
		t.Fatal(err)
	}
	// r1 reaches zones 0 and 2 (acknowledged); zone 1 lags by it.
	holds[1].arm("log/seg/")
	if off, err := a.Append(ctx, []byte("r1")); err != nil || off != 1 {
		t.Fatalf("r1: %d, %v", off, err)
	}
	<-holds[1].held
	// r2 reaches zone 0 only.
	holds[2].arm("log/seg/")
	type result struct {
		off int64
		err error
	}
	r2 := make(chan result, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		off, err := a.Append(actx, []byte("r2"))
		r2 <- result{off, err}
	}()
	<-holds[2].held
	zones, err := zonesFor(inner, "log", Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	seg := a.seg.key
	a.mu.Unlock()
	waitFor(t, "r2 on zone 0", func() bool {
		frames, _, err := zones[0].read(ctx, seg, 0)
		return err == nil && contiguous(frames, seg.first) >= 2
	})

	// The new writer does not reach zone 0: it fences zones 1 and 2, keeps
	// r0 and r1, copies r1 to zone 1, and starts at 2.
	bStores, faults := wrapAll(inner, 1)
	faults[0].SetDown(true)
	regional := testkit.Mems(t, 1)[0]
	b := mustOpen(t, bStores, "log", &Options{Regional: regional, MoveAfter: time.Hour, RepairInterval: time.Millisecond})
	if got := b.Stats().RecoveredTo; got != 1 {
		t.Fatalf("the new writer recovered to %d, want 1", got)
	}
	if off, err := b.Append(ctx, []byte("x")); err != nil || off != 2 {
		t.Fatalf("the new writer's append: %d, %v; want offset 2", off, err)
	}
	// Its repair gives zone 1's copy the LAC frame it lacks...
	waitFor(t, "the repair's LAC frame on zone 1", func() bool {
		frames, _, err := zones[1].read(ctx, seg, 0)
		if err != nil {
			return false
		}
		for _, f := range frames {
			if f.kind == frameData && len(f.records) == 0 && f.lac >= 1 {
				return true
			}
		}
		return false
	})
	// ...and the segment moves: a marker replaces each reachable copy.
	b.tierMu.Lock()
	pending, err := b.moveSegment(ctx, seg, 1)
	b.tierMu.Unlock()
	if err != nil || len(pending) != 1 || pending[0] != 0 {
		t.Fatalf("moving segment %s: pending %v, %v; want zone 0 pending", seg, pending, err)
	}

	// Now the old writer's held frames go out, to zones 1 and 2.
	close(holds[1].release)
	close(holds[2].release)
	res := <-r2
	if res.err == nil {
		t.Fatalf("the fenced writer's r2 was acknowledged at %d, where the writer that fenced it acknowledged x", res.off)
	}
	// And it learns why, from the marker at the head of the copies that
	// refused its frames, instead of retrying them until it times out.
	if !errors.Is(res.err, ErrFenced) {
		t.Errorf("the fenced writer's r2: %v, want ErrFenced", res.err)
	}
	r, err := NewReader(bStores, "log", 0, &Options{Regional: regional})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i, want := range []string{"r0", "r1", "x"} {
		rec, err := r.Next(rctx)
		if err != nil || rec.Offset != int64(i) || string(rec.Data) != want {
			t.Fatalf("record %d: %q at %d, %v; want %q", i, rec.Data, rec.Offset, err, want)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 6000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("waited a minute for %s", what)
}
