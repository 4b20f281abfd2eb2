package commitlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// A marker's overwrite replaces a zone's copy of the segment as soon as its
// message lands. Cut off after that and before the reply (the writer
// closing, the mover's context ending), the GCS driver deletes what it
// wrote, and the zone held neither the copy nor the marker: listings there
// missed the segment, and a reader whose listing reached two such zones (a
// Close cuts off every zone's marker at once) took the segment for one a
// truncation removed. The marker runs to its own bound instead.
func TestMarkerCutOffAfterLanding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Zone 0 answers each flush 300 ms late: the window in which a
	// marker has landed there and its reply has not.
	slow := gcsrapidtest.Zero()
	slow.Flush = latency.Fixed(300 * time.Millisecond)
	stores := make([]blob.Store, 3)
	for i := range stores {
		p := gcsrapidtest.Zero()
		if i == 0 {
			p = slow
		}
		stores[i], _ = rapidZone(t, p, i)
	}
	opts := &Options{Regional: testkit.Mems(t, 1)[0], MoveAfter: time.Hour, MaxSegmentAppends: 4, LACDelay: -1, RepairInterval: -1}
	l := mustOpen(t, stores, "L", opts)
	defer l.Close()
	for i := range 3 {
		if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	first := segKey{l.epoch, 0}
	zones, err := zonesFor(stores, "L", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Zone 0, which lags (and is left to repair once the segment rolls),
	// has a copy of the first segment.
	key := zones[0].segKey(first)
	var before *blob.Attributes
	waitFor(t, "zone 0's copy of the first segment", func() bool {
		before, err = stores[0].Stat(ctx, key)
		return err == nil
	})
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		l.tierMu.Lock()
		defer l.tierMu.Unlock()
		_, err := l.moveSegment(mctx, first, 0)
		done <- err
	}()
	// The marker has replaced the copy on zone 0; its flush is not
	// answered yet. The move is cut off.
	waitFor(t, "the marker's generation on zone 0", func() bool {
		a, err := stores[0].Stat(ctx, key)
		return err == nil && a.Generation != before.Generation
	})
	mcancel()
	<-done
	waitFor(t, "zone 0's marker of the first segment", func() bool {
		head, err := zones[0].readPrefix(ctx, first, 1<<10)
		if errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("zone 0 holds neither the copy of %s nor its marker", first)
		}
		_, ok := movedIn(head)
		return err == nil && ok
	})
}
