package commitlog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestSealedSegmentsMoveToCold(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			cold := memZones(t, 1)[0]
			opts := &Options{MaxSegmentAppends: 6, Cold: cold, MoveAfter: time.Hour}
			l := mustOpen(t, stores, "tier", opts)
			early, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer early.Close()
			const n = 60
			for i := range n {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			readN(t, rctx, early, 10) // a reader part way through a zonal segment
			before, err := listChain(ctx, l.zones, 3, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			st, err := l.MoveSealed(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := listChain(ctx, l.zones, 3, time.Minute, nil)
			coldKeys, _ := coldZone(cold, "tier").listSegments(ctx, nil)
			// Idle LAC frames may roll one more segment meanwhile, and the
			// writer's current segment is only sealed once the roll is done.
			if st.Moved < len(before)-2 || len(after) < 1 || len(coldKeys) != st.Moved {
				t.Fatalf("moved %d of %d segments; %d left on the zones, %d cold", st.Moved, len(before), len(after), len(coldKeys))
			}
			for _, k := range coldKeys {
				if containsKey(after, k) {
					t.Errorf("segment %s is cold and still on the zones", k)
				}
			}
			check := func(r *Reader, from int) {
				t.Helper()
				for i, rec := range readN(t, rctx, r, n-from) {
					if string(rec.Data) != fmt.Sprint(from+i) {
						t.Fatalf("record %d = %q", from+i, rec.Data)
					}
				}
			}
			check(early, 10)
			fresh, err := NewReader(stores, "tier", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			check(fresh, 0)
			// A takeover after the move recovers the zonal tip and goes on.
			l.Close()
			l2 := mustOpen(t, stores, "tier", opts)
			if off, err := l2.Append(ctx, []byte("next")); err != nil || off != n {
				t.Fatalf("append after the move and a takeover: %d, %v", off, err)
			}
			for _, r := range []*Reader{early, fresh} {
				if rec := readN(t, rctx, r, 1)[0]; string(rec.Data) != "next" {
					t.Errorf("after takeover: %q", rec.Data)
				}
			}
		})
	}
}
