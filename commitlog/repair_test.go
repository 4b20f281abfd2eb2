package commitlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
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
			var gone []string
			for o, err := range blob.All(ctx, inner[2], &blob.ListOptions{Prefix: "L/seg/"}) {
				if err != nil {
					t.Fatal(err)
				}
				gone = append(gone, o.Key)
			}
			for _, k := range gone {
				if err := inner[2].Delete(ctx, k, nil); err != nil {
					t.Fatal(err)
				}
			}
			appendN(n/2, n)
			l.mu.Lock()
			cur := l.seg.key
			l.mu.Unlock()
			// A pass that began after the last append first sees the last
			// segments sealed, and the one after it checks them (a pass
			// under way may end first): wait for three passes, the last
			// finding nothing missing.
			passes := l.Stats().RepairPasses
			for i := 0; ; i++ {
				st := l.Stats()
				if st.RepairPasses >= passes+3 && st.Missing == 0 {
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
