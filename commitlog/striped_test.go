package commitlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

func mustOpenStriped(t testing.TB, stores []blob.Store, name string, k int, opts *Options) *Striped {
	t.Helper()
	s, err := OpenStriped(context.Background(), stores, name, k, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStriped appends from several goroutines, in calls of one to five
// records, to a log of three stripes on each backend, and reads it back
// from the start and from the middle: every record once, at the offset its
// Append returned, with no offset skipped (no writer crashed, so there are
// no fillers).
func TestStriped(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			s := mustOpenStriped(t, stores, "log", 3, &Options{MaxSegmentAppends: 20})
			var mu sync.Mutex
			at := map[int64]string{}
			var wg sync.WaitGroup
			for a := range 4 {
				wg.Go(func() {
					for n := range 15 {
						recs := make([][]byte, 1+(a+n)%5)
						for j := range recs {
							recs[j] = fmt.Appendf(nil, "a%d-n%d-r%d", a, n, j)
						}
						off, err := s.Append(ctx, recs...)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for j, r := range recs {
							at[off+int64(j)] = string(r)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			end := int64(len(at)) - 1
			if got := s.Committed(); got != end {
				t.Fatalf("committed %d, want %d", got, end)
			}
			for _, from := range []int64{0, end / 2, end/2 + 1} {
				r, err := s.NewReader(from)
				if err != nil {
					t.Fatal(err)
				}
				for off := from; off <= end; off++ {
					rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					rec, err := r.Next(rctx)
					cancel()
					if err != nil {
						t.Fatalf("from %d: reading %d: %v", from, off, err)
					}
					if rec.Offset != off || string(rec.Data) != at[off] {
						t.Fatalf("from %d: got %q at %d, want %q at %d", from, rec.Data, rec.Offset, at[off], off)
					}
				}
				if r.Fillers() != 0 {
					t.Errorf("%d fillers in a log no writer crashed", r.Fillers())
				}
				r.Close()
			}
			// Each stripe took a third of the records.
			for i, st := range s.Stats().Stripes {
				if want := s.heldBy(i, end); st.Records != want {
					t.Errorf("stripe %d acknowledged %d records, want %d", i, st.Records, want)
				}
			}
		})
	}
}

// TestStripedTakeoverFills leaves the log as a writer that crashed
// mid-append can: a stripe holds a record past a record another stripe
// never got. The next writer fills the gap, keeps the record and appends
// after it; readers skip the fillers and serve the rest in order.
func TestStripedTakeoverFills(t *testing.T) {
	ctx := context.Background()
	stores := testkit.Mems(t, 3)
	const k = 3
	s, err := OpenStriped(ctx, stores, "log", k, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 6 {
		if off, err := s.Append(ctx, fmt.Appendf(nil, "r%d", n)); err != nil || off != int64(n) {
			t.Fatalf("append %d: %d, %v", n, off, err)
		}
	}
	// Offsets 6 and 7 (stripes 0 and 1) never reached their stripes; 8
	// (stripe 2) did, and is committed there.
	if _, err := s.subs[2].Append(ctx, append([]byte{stripeData}, "orphan"...)); err != nil {
		t.Fatal(err)
	}
	if got := s.Committed(); got != 5 {
		t.Fatalf("committed %d with a gap at 6, want 5", got)
	}
	s.Close()

	s2 := mustOpenStriped(t, stores, "log", k, nil)
	st := s2.Stats()
	if st.Fillers != 2 || st.RecoveredTo != 8 {
		t.Fatalf("takeover: %d fillers, recovered to %d; want 2 fillers, 8", st.Fillers, st.RecoveredTo)
	}
	if off, err := s2.Append(ctx, []byte("after")); err != nil || off != 9 {
		t.Fatalf("first append after the takeover: %d, %v; want 9", off, err)
	}
	if got := s2.Committed(); got != 9 {
		t.Fatalf("committed %d, want 9", got)
	}
	r, err := NewStripedReader(stores, "log", k, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := []Record{{4, []byte("r4")}, {5, []byte("r5")}, {8, []byte("orphan")}, {9, []byte("after")}}
	for _, w := range want {
		rec, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Offset != w.Offset || string(rec.Data) != string(w.Data) {
			t.Fatalf("got %q at %d, want %q at %d", rec.Data, rec.Offset, w.Data, w.Offset)
		}
	}
	if r.Fillers() != 2 {
		t.Errorf("reader passed %d fillers, want 2", r.Fillers())
	}
	// A reader that starts on a filler starts at the next record.
	r2, err := NewStripedReader(stores, "log", k, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if rec, err := r2.Next(ctx); err != nil || rec.Offset != 8 {
		t.Fatalf("reader from 7: %v at %d, want the record at 8", err, rec.Offset)
	}
}

// TestStripedAckWaitsForEarlierOffsets: a record committed in its stripe
// is not acknowledged while a record before it, in another stripe, is not
// committed; once that stripe's zones answer again both are.
func TestStripedAckWaitsForEarlierOffsets(t *testing.T) {
	ctx := context.Background()
	stores, faults := wrapAll(testkit.Mems(t, 3), 1)
	s := mustOpenStriped(t, stores, "log", 2, &Options{OpTimeout: 200 * time.Millisecond})
	// Stripe 0's appends hang on two of the three zones: W=2 cannot be met.
	var rules []fault.RuleID
	for _, f := range faults[:2] {
		rules = append(rules, f.Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: stripeName("log", 0) + "/", Effect: fault.Hang}))
	}
	first := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, []byte("first")) // offset 0, stripe 0
		first <- err
	}()
	for s.subs[0].end() < 1 {
		time.Sleep(time.Millisecond)
	}
	sctx, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		off, err := s.Append(sctx, []byte("second")) // offset 1, stripe 1
		if err == nil && off != 1 {
			err = fmt.Errorf("offset %d, want 1", off)
		}
		second <- err
	}()
	for s.subs[1].Committed() < 0 {
		time.Sleep(time.Millisecond)
	}
	if got := s.Committed(); got != -1 {
		t.Fatalf("committed %d while offset 0 is on one zone", got)
	}
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUncertain) {
		t.Fatalf("the second append, committed in its stripe but after an uncommitted record, returned %v; want it cancelled with ErrUncertain", err)
	}
	for i, f := range faults[:2] {
		f.Remove(rules[i])
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := s.Committed(); got != 1 {
		t.Fatalf("committed %d, want 1", got)
	}
}

// TestStripedCount: a log is opened and read with the number of stripes
// it was created with; a bad number is refused before any I/O.
func TestStripedCount(t *testing.T) {
	ctx := context.Background()
	stores, faults := wrapAll(testkit.Mems(t, 3), 2)
	for _, k := range []int{0, -1, MaxStripes + 1} {
		if _, err := OpenStriped(ctx, stores, "log", k, nil); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("OpenStriped with %d stripes: %v, want ErrInvalidArgument", k, err)
		}
		if _, err := NewStripedReader(stores, "log", k, 0, nil); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("NewStripedReader with %d stripes: %v, want ErrInvalidArgument", k, err)
		}
	}
	for _, f := range faults {
		if n := f.Stats()[fault.OpWrite].Calls + f.Stats()[fault.OpList].Calls + f.Stats()[fault.OpRead].Calls; n != 0 {
			t.Fatalf("%d calls before the stripes were refused", n)
		}
	}
	s := mustOpenStriped(t, stores, "log", 3, nil)
	if _, err := s.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStriped(ctx, stores, "log", 2, nil); !errors.Is(err, ErrStripes) {
		t.Fatalf("reopened with 2 stripes: %v, want ErrStripes", err)
	}
	r, err := NewStripedReader(stores, "log", 4, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(ctx); !errors.Is(err, ErrStripes) {
		t.Fatalf("read with 4 stripes: %v, want ErrStripes", err)
	}
	// The writer opened with the right number is still the writer.
	if _, err := s.Append(ctx, []byte("y")); err != nil {
		t.Fatal(err)
	}
}
