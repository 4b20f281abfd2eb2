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

// Damage to one zone's segment names and bytes, on slot zones (mem) and
// append zones (S3 Express, GCS Rapid): a name that parses as a segment but
// holds no header (garbage, empty) above the tip, of a higher epoch or the
// same, and the tip segment cut to a few bytes on one zone. Open recovers
// every acknowledged record, without waiting out its per-zone timeout (a
// minute here, longer than the test's context), readers do not stall, and
// the next writer's records follow.
func TestDamagedSegments(t *testing.T) {
	kinds := map[string]func(testing.TB, int) []blob.Store{
		"mem":       testkit.Mems,
		"s3express": s3Zones("zero"),
		"rapid":     rapidZones(gcsrapidtest.Zero()),
	}
	type damage struct {
		name   string
		do     func(ctx context.Context, z blob.Store, w *Log) error
		notSeg bool // the name is no segment: counted as such
	}
	put := func(k segKey, b []byte) func(ctx context.Context, z blob.Store, w *Log) error {
		return func(ctx context.Context, z blob.Store, w *Log) error {
			key := w.zones[0].segKey(k)
			if w.zones[0].mode == modeSlots {
				key = slotKey(key, 0)
			}
			return blob.Put(ctx, z, key, b, nil)
		}
	}
	for kind, zones := range kinds {
		for _, d := range []damage{
			{"garbage of a higher epoch", nil, true},
			{"empty of a higher epoch", nil, true},
			{"garbage of the same epoch past the tip", nil, true},
			{"tip cut to 4 bytes", nil, false},
		} {
			t.Run(kind+"/"+d.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				stores := zones(t, 3)
				opts := &Options{OpTimeout: time.Minute}
				w1 := mustOpen(t, stores, "L", opts)
				for i := range 5 {
					if _, err := w1.Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
						t.Fatal(err)
					}
				}
				w1.mu.Lock()
				tip := w1.seg.key
				w1.mu.Unlock()
				var damaged segKey
				switch d.name {
				case "garbage of a higher epoch":
					damaged = segKey{w1.Epoch() + 5, 0}
					d.do = put(damaged, []byte("not a segment at all"))
				case "empty of a higher epoch":
					damaged = segKey{w1.Epoch() + 5, 3}
					d.do = put(damaged, nil)
				case "garbage of the same epoch past the tip":
					damaged = segKey{w1.Epoch(), 1 << 40}
					d.do = put(damaged, []byte("zzzz"))
				case "tip cut to 4 bytes":
					d.do = func(ctx context.Context, _ blob.Store, w *Log) error {
						key := w.zones[0].segKey(tip)
						if w.zones[0].mode == modeSlots {
							key = slotKey(key, 1)
						}
						// A zone that holds it (the third may not yet).
						for _, z := range stores {
							b, err := blob.ReadAll(ctx, z, key)
							if errors.Is(err, blob.ErrNotFound) {
								continue
							} else if err != nil {
								return err
							}
							if err := z.Delete(ctx, key, nil); err != nil {
								return err
							}
							return blob.Put(ctx, z, key, b[:4], nil)
						}
						return fmt.Errorf("no zone holds %s", key)
					}
				}
				// w1 is left as if its process had died: a takeover follows.
				if err := d.do(ctx, stores[0], w1); err != nil {
					t.Fatal(err)
				}
				w2, err := Open(ctx, stores, "L", opts)
				if err != nil {
					t.Fatalf("Open after the damage: %v", err)
				}
				defer w2.Close()
				if got := w2.Stats().RecoveredTo; got != 4 {
					t.Errorf("recovered to %d, want 4", got)
				}
				if d.notSeg {
					// Whether Open's listing heard the damaged zone varies;
					// the name itself is always found to be no segment.
					_, err := segmentHeader(ctx, w2.zones, nil, damaged, time.Second)
					if !errors.Is(err, errNoSegment) {
						t.Errorf("segmentHeader of the damaged name: %v, want errNoSegment", err)
					}
				}
				for i := range 5 {
					if off, err := w2.Append(ctx, fmt.Appendf(nil, "b%d", i)); err != nil || off != int64(5+i) {
						t.Fatalf("append %d: offset %d, %v", i, off, err)
					}
				}
				r, err := NewReader(stores, "L", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				for i, rec := range readN(t, ctx, r, 10) {
					want := fmt.Sprintf("a%d", i)
					if i >= 5 {
						want = fmt.Sprintf("b%d", i-5)
					}
					if string(rec.Data) != want || rec.Offset != int64(i) {
						t.Errorf("record %d = %q at %d, want %q", i, rec.Data, rec.Offset, want)
					}
				}
				w2.Close()
				w3, err := Open(ctx, stores, "L", opts)
				if err != nil {
					t.Fatalf("the next Open: %v", err)
				}
				defer w3.Close()
				if got := w3.Stats().RecoveredTo; got != 9 {
					t.Errorf("the next Open recovered to %d, want 9", got)
				}
			})
		}
	}
}
