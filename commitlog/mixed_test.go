package commitlog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// Zones of different kinds each append their own way (GCS over streams,
// S3 Express by conditional appends) in one log: records are acknowledged,
// read, recovered by a takeover and moved to the regional store. A log
// whose zones cannot all append is refused, saying which cannot, instead of
// falling back to slots for all.
func TestMixedZones(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g0, _ := rapidZone(t, gcsrapidtest.Zero(), 0)
	g2, _ := rapidZone(t, gcsrapidtest.Zero(), 2)
	stores := []blob.Store{g0, s3Zones("zero")(t, 1)[0], g2}
	regional := testkit.Mems(t, 1)[0]
	opts := &Options{MaxSegmentAppends: 10, Regional: regional, MoveAfter: time.Millisecond}
	l := mustOpen(t, stores, "mixed", opts)
	if got := []mode{l.zones[0].mode, l.zones[1].mode, l.zones[2].mode}; got[0] != modeStream || got[1] != modeAppend || got[2] != modeStream {
		t.Fatalf("modes %v, want stream, append, stream", got)
	}
	const n = 40
	for i := range n {
		if off, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil || off != int64(i) {
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	for i := 0; l.MoveStats().Moved < 2; i++ {
		if i > 20000 {
			t.Fatalf("moves: %+v", l.MoveStats())
		}
		time.Sleep(time.Millisecond)
	}
	l2 := mustOpen(t, stores, "mixed", opts)
	if got := l2.Stats().RecoveredTo; got != n-1 {
		t.Fatalf("takeover recovered to %d, want %d", got, n-1)
	}
	r, err := NewReader(stores, "mixed", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, rec := range readN(t, ctx, r, n) {
		if rec.Offset != int64(i) || string(rec.Data) != fmt.Sprint(i) {
			t.Fatalf("record %d: %d %q", i, rec.Offset, rec.Data)
		}
	}

	_, err = Open(ctx, []blob.Store{testkit.Mems(t, 1)[0], s3Zones("zero")(t, 1)[0], g0}, "refused", nil)
	if !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("zones that cannot all append: %v, want a refusal", err)
	}
}
