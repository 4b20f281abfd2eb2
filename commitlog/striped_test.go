package commitlog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
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

// TestStripedOpensThatCross: of two Opens that race stripe by stripe, each
// claiming a stripe after the other did, at most one returns. Here the
// first has opened every stripe and is filling a gap in stripe 0 when the
// other claims stripe 1 (as the second of two crossing Opens does once it
// has opened stripe 0): the first must fail with ErrFenced, or it would
// acknowledge Appends on stripe 0 while the other acknowledges them on
// stripe 1, each at offsets the other's were below.
func TestStripedOpensThatCross(t *testing.T) {
	ctx := context.Background()
	stores := testkit.Mems(t, 3)
	const k = 2
	s := mustOpenStriped(t, stores, "log", k, nil)
	// Offset 0 (stripe 0) never reached its stripe; 1 (stripe 1) did:
	// the next Open fills stripe 0.
	if _, err := s.subs[1].Append(ctx, append([]byte{stripeData}, "orphan"...)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	o, err := (*Options)(nil).withDefaults(len(stores))
	if err != nil {
		t.Fatal(err)
	}
	so := stripeOptions(o, k)
	var once sync.Once
	var other error
	watched := make([]blob.Store, len(stores))
	for i, st := range stores {
		watched[i] = &watchStore{Store: st, before: func(r watchReq) error {
			if strings.HasPrefix(r.key, stripeName("log", 0)+"/") && holdsFiller(r.data) {
				once.Do(func() {
					var l *Log
					if l, other = Open(ctx, stores, stripeName("log", 1), &so); other == nil {
						l.Close()
					}
				})
			}
			return nil
		}}
	}
	crossed, err := OpenStriped(ctx, watched, "log", k, nil)
	if other != nil {
		t.Fatalf("the other Open of stripe 1: %v", other)
	}
	if err == nil {
		crossed.Close()
		t.Fatal("an Open returned holding stripe 0 only: another writer had claimed stripe 1 after it")
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the Open that was crossed: %v, want ErrFenced", err)
	}
	// The filler it wrote stays in stripe 0 for the next writer, which
	// holds both stripes.
	s2 := mustOpenStriped(t, stores, "log", k, nil)
	if off, err := s2.Append(ctx, []byte("after")); err != nil || off != 2 {
		t.Fatalf("append after the crossed Open: %d, %v; want 2", off, err)
	}
}

// holdsFiller reports whether p, frames written to a stripe, holds a
// filler record.
func holdsFiller(p []byte) bool {
	frames, _, _ := decodeFrames(p)
	for _, f := range frames {
		for _, r := range f.records {
			if f.kind == frameData && len(r) == 1 && r[0] == stripeFiller {
				return true
			}
		}
	}
	return false
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

// TestStripedMarkers: the number of stripes survives a zone whose marker
// is wrong or gone. A writer opened with the wrong number plants nothing
// (it reads before it writes); one opened with the right number gives the
// zones that lack it or hold another number the right one; and with the
// markers gone from a majority, the stripes the zones hold decide.
func TestStripedMarkers(t *testing.T) {
	ctx := context.Background()
	stores := testkit.Mems(t, 3)
	s := mustOpenStriped(t, stores, "log", 4, nil)
	if _, err := s.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	markers := func() []string {
		vals, errs := stripeMarkers(ctx, stores, "log", time.Second)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return vals
	}
	// Zone 2 holds another number (as if a writer opened with it had
	// written there), zone 1 none.
	if err := blob.Put(ctx, stores[2], stripesKey("log"), []byte("2"), nil); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Delete(ctx, stripesKey("log"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStriped(ctx, stores, "log", 2, nil); !errors.Is(err, ErrStripes) {
		t.Fatalf("opened with 2 stripes beside zones holding 4: %v, want ErrStripes", err)
	}
	if got := markers(); got[0] != "4" || got[1] != "" || got[2] != "2" {
		t.Fatalf("markers %q after a refused Open, want it to have written none", got)
	}
	// Zone 0 alone holds 4: no majority either way, and the stripes held
	// (0..3) decide.
	s2, err := OpenStriped(ctx, stores, "log", 4, nil)
	if err != nil {
		t.Fatalf("opened with the right number beside a wrong and a lost marker: %v", err)
	}
	if got := markers(); got[0] != "4" || got[1] != "4" || got[2] != "4" {
		t.Fatalf("markers %q after the Open, want every zone given 4", got)
	}
	s2.Close()
	// Markers gone from every zone (replaced buckets): the stripes decide.
	for _, st := range stores {
		if err := st.Delete(ctx, stripesKey("log"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []int{2, 3, 5} {
		if _, err := OpenStriped(ctx, stores, "log", k, nil); !errors.Is(err, ErrStripes) {
			t.Fatalf("opened with %d stripes a log holding stripes 0..3 and no markers: %v, want ErrStripes", k, err)
		}
	}
	s3 := mustOpenStriped(t, stores, "log", 4, nil)
	if got := markers(); got[0] != "4" || got[1] != "4" || got[2] != "4" {
		t.Fatalf("markers %q, want every zone given 4 back", got)
	}
	r, err := s3.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rec, err := r.Next(ctx); err != nil || string(rec.Data) != "x" {
		t.Fatalf("read %q, %v; want the record appended before", rec.Data, err)
	}
}

// TestStripedReaderZoneHangs: a reader checks the number of stripes on
// every zone at once, each bounded by OpTimeout, so a zone that hangs does
// not keep it from the records the others hold; after Close, Next fails
// with ErrClosed.
func TestStripedReaderZoneHangs(t *testing.T) {
	ctx := context.Background()
	stores, faults := wrapAll(testkit.Mems(t, 3), 3)
	opts := &Options{OpTimeout: 200 * time.Millisecond}
	s := mustOpenStriped(t, stores, "log", 2, opts)
	for n := range 4 {
		if _, err := s.Append(ctx, fmt.Appendf(nil, "r%d", n)); err != nil {
			t.Fatal(err)
		}
	}
	faults[0].Add(fault.Rule{Op: fault.OpRead, Effect: fault.Hang})
	faults[0].Add(fault.Rule{Op: fault.OpList, Effect: fault.Hang})
	r, err := NewStripedReader(stores, "log", 2, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 4 {
		rec, err := r.Next(ctx)
		if err != nil || string(rec.Data) != fmt.Sprintf("r%d", n) {
			t.Fatalf("read %q, %v; want r%d", rec.Data, err, n)
		}
	}
	if !r.checked {
		t.Error("the number of stripes was not checked with two of three zones answering")
	}
	r.Close()
	if _, err := r.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}

// TestStripedFencedErrors: once a newer writer has fenced a stripe, the
// old writer's Append fails with ErrFenced, and the Appends after it fail
// with ErrFenced alone: they handed nothing over, so their records are not
// in the log (no ErrUncertain).
func TestStripedFencedErrors(t *testing.T) {
	ctx := context.Background()
	stores := testkit.Mems(t, 3)
	old := mustOpenStriped(t, stores, "log", 3, nil)
	if _, err := old.Append(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	mustOpenStriped(t, stores, "log", 3, nil)
	var err error
	for range 10 {
		if _, err = old.Append(ctx, []byte("b"), []byte("c"), []byte("d")); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced writer's Append: %v, want ErrFenced", err)
	}
	_, err = old.Append(ctx, []byte("e"))
	if !errors.Is(err, ErrFenced) || errors.Is(err, ErrUncertain) {
		t.Fatalf("an Append after the writer failed: %v, want ErrFenced without ErrUncertain", err)
	}
}

// TestReaderStatsAddCoversEveryField: a striped reader's Stats add up
// every counter of its stripes' readers, a counter added later included.
func TestReaderStatsAddCoversEveryField(t *testing.T) {
	var one ReaderStats
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(1)
	}
	var sum ReaderStats
	sum.add(one)
	sum.add(one)
	s := reflect.ValueOf(sum)
	for i := range s.NumField() {
		if s.Field(i).Int() != 2 {
			t.Errorf("ReaderStats.add leaves out %s", s.Type().Field(i).Name)
		}
	}
}
