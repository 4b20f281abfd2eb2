package commitlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// Objects under the log's epoch and segment prefixes whose names do not
// parse are skipped and counted: no acknowledged record is
// lost to a writer that claimed an epoch no segment name can hold, no
// epoch arithmetic overflows, and Open and readers go on.
func TestForeignNames(t *testing.T) {
	for name, key := range map[string]string{
		"epoch of 11 digits":   "L/epoch/10000000000",
		"epoch past 10 digits": "L/epoch/00000000010000000000",
		"epoch of max uint64":  "L/epoch/18446744073709551615",
		"garbage epoch":        "L/epoch/garbage",
		"garbage segment":      "L/seg/zzzz",
		"segment of 11 digits": "L/seg/10000000000-00000000000000000000",
		"segment with sign":    "L/seg/+000000001-00000000000000000000",
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stores := testkit.Mems(t, 3)
			w1 := mustOpen(t, stores, "L", nil)
			for i := range 5 {
				if _, err := w1.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			// On every zone, so that whichever zones a listing hears
			// count it.
			for _, s := range stores {
				if err := blob.Put(ctx, s, key, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			w2 := mustOpen(t, stores, "L", nil)
			if w2.Epoch() <= w1.Epoch() || w2.Epoch() > maxSegEpoch {
				t.Fatalf("epoch %d after %d", w2.Epoch(), w1.Epoch())
			}
			for i := range 5 {
				if off, err := w2.Append(ctx, fmt.Appendf(nil, "b%d", i)); err != nil || off != int64(5+i) {
					t.Fatalf("append %d: offset %d, %v", i, off, err)
				}
			}
			w3 := mustOpen(t, stores, "L", nil)
			if got := w3.Stats().RecoveredTo; got != 9 {
				t.Fatalf("the next Open recovered to %d, want 9", got)
			}
			if w3.Stats().Foreign == 0 {
				t.Errorf("the foreign name was not counted")
			}
			r, err := NewReader(stores, "L", 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs := readN(t, ctx, r, 10)
			for i, rec := range recs {
				want := fmt.Sprintf("a%d", i)
				if i >= 5 {
					want = fmt.Sprintf("b%d", i-5)
				}
				if string(rec.Data) != want {
					t.Errorf("record %d = %q, want %q", i, rec.Data, want)
				}
			}
		})
	}
}
