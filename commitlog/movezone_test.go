package commitlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// With a zone down, sealed segments still move (W zones take their
// markers; before, every move failed on the dead zone's marker and was
// tried again on every pass); when it comes back its copies become markers
// too, and readers read every record.
func TestMovesWithAZoneDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stores := s3Zones("zero")(t, 3)
	dead := fault.Wrap(stores[0], fault.Options{Seed: 1, Name: "zone-a"})
	stores[0] = dead
	regional := testkit.Mems(t, 1)[0]
	opts := &Options{MaxSegmentAppends: 5, Regional: regional, MoveAfter: time.Millisecond}
	l := mustOpen(t, stores, "down", opts)
	dead.SetDown(true)
	const n = 60
	for i := range n {
		if off, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil || off != int64(i) {
			t.Fatalf("append %d: %d, %v", i, off, err)
		}
	}
	for i := 0; l.MoveStats().Moved < 8; i++ {
		if i > 20000 {
			t.Fatalf("with a zone down: %+v", l.MoveStats())
		}
		time.Sleep(time.Millisecond)
	}
	l.mu.Lock()
	pending := len(l.unmarked[0])
	l.mu.Unlock()
	if pending == 0 {
		t.Fatal("no marker is pending on the dead zone")
	}
	dead.SetDown(false)
	for i := 0; ; i++ {
		l.mu.Lock()
		left := len(l.unmarked)
		l.mu.Unlock()
		if left == 0 {
			break
		}
		if i > 20000 {
			t.Fatalf("markers still pending on the zone that came back: %+v", l.MoveStats())
		}
		time.Sleep(time.Millisecond)
	}
	for k := range l.movedKeys() {
		z := l.zones[0]
		frames, err := z.readPrefix(ctx, k, 1<<20)
		if _, ok := movedIn(frames); err != nil || !ok {
			t.Errorf("zone 0, segment %s: not a marker (%v)", k, err)
		}
	}
	r, err := NewReader(stores, "down", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, rec := range readN(t, ctx, r, n) {
		if rec.Offset != int64(i) || string(rec.Data) != fmt.Sprint(i) {
			t.Fatalf("record %d: %d %q", i, rec.Offset, rec.Data)
		}
	}
}
