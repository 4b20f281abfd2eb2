package commitlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// A writer that crashed with its segment at the store's part limit on one
// zone, holding a record the other zones lack and can no longer take: Open
// ends the segment where W zones hold every record and carries the rest
// into the new segment, so the log opens, keeps every record that may have
// been acknowledged at its offset, and readers see no gap.
func TestRecoverAtPartLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A segment's object: its header (one part) and three appends.
	cz := s3Counted(s3expresstest.Options{MaxObjectParts: 4})(t, 3)
	opts := &Options{MaxSegmentAppends: 1000}
	l1 := mustOpen(t, cz.stores, "L", opts)
	tip := l1.seg.key
	// The old writer's frames, as its pumps would have left them: records
	// 0 and 1 on every zone, then record 2 on zone 0 only, which that
	// append brought to the limit. Zones 1 and 2 keep one part, which
	// their fence takes.
	appendTo := func(z *zone, first int64, rec string) {
		t.Helper()
		// Open returned once W zones held the segment: the last zone's
		// create may still be on its way.
		_, end, err := z.read(ctx, tip, 0)
		for errors.Is(err, blob.ErrNotFound) && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
			_, end, err = z.read(ctx, tip, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := z.append(ctx, tip, end, encodeFrame(frameData, tip.epoch, first, first-1, [][]byte{[]byte(rec)})); err != nil {
			t.Fatalf("zone %d, record %d: %v", z.idx, first, err)
		}
	}
	for _, z := range l1.zones {
		appendTo(z, 0, "r0")
		appendTo(z, 1, "r1")
	}
	appendTo(l1.zones[0], 2, "r2")

	l2 := mustOpen(t, cz.stores, "L", opts)
	st := l2.Stats()
	if st.RecoveredTo != 2 || st.Carried != 1 {
		t.Fatalf("recovered to %d, %d carried; want 2 and 1", st.RecoveredTo, st.Carried)
	}
	if off, err := l2.Append(ctx, []byte("r3")); err != nil || off != 3 {
		t.Fatalf("append after the recovery: %d, %v", off, err)
	}
	r, err := NewReader(cz.stores, "L", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, rec := range readN(t, ctx, r, 4) {
		if rec.Offset != int64(i) || string(rec.Data) != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d: offset %d %q", i, rec.Offset, rec.Data)
		}
	}
	// And the log opens again after that.
	l3 := mustOpen(t, cz.stores, "L", opts)
	if got := l3.Stats().RecoveredTo; got != 3 {
		t.Fatalf("the next Open recovered to %d, want 3", got)
	}
	var refused int64
	for _, srv := range cz.s3 {
		refused += srv.Stats().TooManyParts
	}
	if refused == 0 {
		t.Error("no append was refused at the part limit: the case was not reached")
	}
}
