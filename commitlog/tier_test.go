package commitlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// TestMoveToRegional: sealed segments move to the regional store, readers
// read across both tiers, the zonal copies become markers that refuse a
// fenced writer's create and appends, and a takeover after the move loses
// nothing.
func TestMoveToRegional(t *testing.T) {
	// Slot directories do not move; Azure Premium block blobs run where
	// Azurite is installed.
	for _, be := range append(backends[1:], backend{"append-azpremium", modeAppend, azZones(azuritetest.None)}) {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			regional := testkit.Mems(t, 1)[0]
			// No move until a reader is in the middle of the first segment:
			// a move's first step is writing the regional copy, and until
			// then each one fails there, before the store sees it.
			gated := fault.Wrap(regional, fault.Options{Name: "regional"})
			notYet := gated.Add(fault.Rule{Op: fault.OpWrite, KeyPrefix: "tier/seg/", Err: errors.New("not yet")})
			opts := &Options{MaxSegmentAppends: 10, Regional: gated, MoveAfter: time.Millisecond}
			l := mustOpen(t, stores, "tier", opts)
			const n = 100
			early, _ := NewReader(stores, "tier", 0, opts)
			defer early.Close()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
				if i == 2 {
					// The reader has read part of the first segment.
					readN(t, rctx, early, 3)
				}
			}
			gated.Remove(notYet)
			// The first segment among them: a move that fails (a zone
			// slow under load) is retried on a later pass, after the
			// segments behind it moved.
			firstMoved := func() bool {
				for k := range l.movedKeys() {
					if k.first == 0 {
						return true
					}
				}
				return false
			}
			for i := 0; l.MoveStats().Moved < 3 || !firstMoved(); i++ {
				if i > 10000 {
					t.Fatalf("moved %+v", l.MoveStats())
				}
				time.Sleep(time.Millisecond)
			}
			// Every zonal copy of a moved segment is a marker shorter than
			// any segment header, and the regional copy is the one it names.
			var moved []segKey
			for k := range l.movedKeys() {
				moved = append(moved, k)
			}
			header := encodeHeader(segKey{1, 0}, segKey{})
			for _, k := range moved {
				for _, z := range l.zones {
					// A move counts once W zones hold its marker; a zone
					// whose marker failed (an append of the seal landing
					// between the mover's Stat and its Put) gets it on a
					// later pass.
					var frames []frame
					var err error
					waitFor(t, fmt.Sprintf("zone %d's marker of %s", z.idx, k), func() bool {
						frames, err = z.readPrefix(ctx, k, 1<<20)
						_, ok := movedIn(frames)
						return err == nil && ok
					})
					m, ok := movedIn(frames)
					if err != nil || !ok || len(m.raw) >= len(header) {
						t.Fatalf("zone %d, segment %s: frames %v, %v; want one short moved marker", z.idx, k, frames, err)
					}
					if _, err := readRegional(ctx, l.regional, k, m); err != nil {
						t.Fatalf("segment %s: %v", k, err)
					}
					// A fenced writer can neither create the segment again
					// nor append where its copy used to end.
					if err := z.create(ctx, k, header); !errors.Is(err, blob.ErrExists) {
						t.Errorf("zone %d: create over a marker: %v, want ErrExists", z.idx, err)
					}
					for _, pos := range []int64{int64(len(header)), int64(len(header)) + 100} {
						if _, err := z.append(ctx, k, pos, []byte("late")); err == nil {
							t.Errorf("zone %d: append at %d over a marker succeeded", z.idx, pos)
						}
					}
				}
			}
			// The reader that was in the first segment when it moved reads
			// on from the regional copy.
			for i, rec := range readN(t, rctx, early, n-3) {
				if rec.Offset != int64(i+3) || string(rec.Data) != fmt.Sprint(i+3) {
					t.Fatalf("early reader, record %d: %d %q", i+3, rec.Offset, rec.Data)
				}
			}
			r, _ := NewReader(stores, "tier", 0, opts)
			defer r.Close()
			for i, rec := range readN(t, rctx, r, n) {
				if rec.Offset != int64(i) || string(rec.Data) != fmt.Sprint(i) {
					t.Fatalf("record %d: %d %q", i, rec.Offset, rec.Data)
				}
			}
			if st := r.Stats(); st.RegionalReads < 3 {
				t.Errorf("reader stats %+v: want reads of the moved segments from the regional store", st)
			}
			// A takeover after the move: the old writer is fenced, the new
			// one continues after the last record, readers follow.
			l2 := mustOpen(t, stores, "tier", opts)
			if got := l2.Stats().RecoveredTo; got != n-1 {
				t.Fatalf("recovered to %d, want %d", got, n-1)
			}
			if _, err := l.Append(ctx, []byte("late")); !errors.Is(err, ErrFenced) {
				t.Errorf("old writer after the takeover: %v, want ErrFenced", err)
			}
			if off, err := l2.Append(ctx, []byte("after")); err != nil || off != n {
				t.Fatalf("append after the takeover: %d, %v", off, err)
			}
			if rec := readN(t, rctx, r, 1)[0]; string(rec.Data) != "after" {
				t.Errorf("after the takeover: %q", rec.Data)
			}
			// A reader without the regional store cannot read moved
			// segments and says so, as soon as it reaches the first one
			// (the bound only stops a reader that would wait instead: a
			// loaded machine takes more than a moment to get there).
			r2, _ := NewReader(stores, "tier", 0, &Options{MaxSegmentAppends: 10})
			defer r2.Close()
			c2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
			defer cancel2()
			if _, err := r2.Next(c2); !errors.Is(err, ErrNoRegional) {
				t.Errorf("a reader without the regional store at a moved segment: %v, want ErrNoRegional", err)
			}
			// A damaged regional copy, the only copy left, is an error
			// naming it, not a reader waiting forever.
			first := l.regional.segKey(segKey{epoch: l.Epoch(), first: 0})
			b, err := blob.ReadAll(ctx, regional, first)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := blob.Put(ctx, regional, first, b, nil); err != nil {
				t.Fatal(err)
			}
			r3, _ := NewReader(stores, "tier", 0, opts)
			defer r3.Close()
			if _, err := r3.Next(rctx); !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), first) || rctx.Err() != nil {
				t.Errorf("a reader at a damaged regional copy: %v, want ErrCorrupt naming %s", err, first)
			}
			// So is one deleted behind the log's back.
			if err := regional.Delete(ctx, first, nil); err != nil {
				t.Fatal(err)
			}
			r4, _ := NewReader(stores, "tier", 0, opts)
			defer r4.Close()
			if _, err := r4.Next(rctx); !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), first) || rctx.Err() != nil {
				t.Errorf("a reader at a deleted regional copy: %v, want ErrCorrupt naming %s", err, first)
			}
		})
	}
}

// movedKeys returns the segments this writer's mover moved.
func (l *Log) movedKeys() map[segKey]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[segKey]bool{}
	for k, v := range l.moved {
		if v {
			out[k] = true
		}
	}
	return out
}
