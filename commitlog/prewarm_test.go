package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// countedZones are n zonal stores on emulators whose request counters say
// how many objects each zone has created.
type countedZones struct {
	stores  []blob.Store
	created []func() int64
	s3      []*s3expresstest.Server
}

func rapidCounted(t testing.TB, n int) countedZones {
	var cz countedZones
	for i := range n {
		s, srv := rapidZone(t, gcsrapidtest.Zero(), i)
		cz.stores = append(cz.stores, s)
		cz.created = append(cz.created, func() int64 { return srv.Stats().ObjectsCreated })
	}
	return cz
}

func s3Counted(opts s3expresstest.Options) func(t testing.TB, n int) countedZones {
	return func(t testing.TB, n int) countedZones {
		var cz countedZones
		for i := range n {
			o := opts
			o.Profile, o.Seed = s3expresstest.MustProfile("zero"), uint64(i+1)
			srv := s3expresstest.Start(t, o)
			cz.stores = append(cz.stores, testkit.S3Express(t, srv, s3express.Options{}))
			// Creates are the PUTs that are not appends.
			cz.created = append(cz.created, func() int64 { st := srv.Stats(); return st.PutObject - st.Appends })
			cz.s3 = append(cz.s3, srv)
		}
		return cz
	}
}

func (cz countedZones) total() int64 {
	var n int64
	for _, f := range cz.created {
		n += f()
	}
	return n
}

// waitPrewarm waits until the segment created ahead of the open one's roll
// exists on every zone (each zone counts one epoch object, the intact
// marker, and one object per segment started).
func waitPrewarm(t *testing.T, l *Log, cz countedZones) {
	t.Helper()
	for range 5000 {
		l.mu.Lock()
		p := l.seg.next
		segs := l.stats.Segments
		l.mu.Unlock()
		done := p == nil
		if p != nil {
			select {
			case <-p.done:
				done = true
			default:
			}
		}
		if done {
			all := true
			for _, f := range cz.created {
				all = all && f() == 2+segs
			}
			if all {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the next segment was never created on every zone")
}

// TestRollCreatesNothing checks with the emulators' counters that a roll
// creates no object: the next segment was created ahead, once the open one
// was a quarter full, and the roll only switches to it. The zones' requests mark
// the roll and the switch: a roll starts once W zones hold the segment's
// seal, and the writer appends to the next segment only once it switched to
// it.
func TestRollCreatesNothing(t *testing.T) {
	for _, be := range []struct {
		name  string
		zones func(testing.TB, int) countedZones
	}{{"stream-gcsrapid", rapidCounted}, {"append-s3express", s3Counted(s3expresstest.Options{})}} {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			cz := be.zones(t, 3)
			const quorum = 2 // the default for 3 zones
			var mu sync.Mutex
			// Per segment: the zones that acknowledged its seal, the
			// objects created when the W-th did (the roll), and those
			// created when its first append after the header came (the
			// switch to it).
			sealedOn := map[segKey]int{}
			atRoll := map[segKey]int64{}
			atSwitch := map[segKey]int64{}
			stores := make([]blob.Store, len(cz.stores))
			for i, s := range cz.stores {
				stores[i] = &watchStore{Store: s,
					before: func(r watchReq) error {
						if k, ok := watchedSeg("prewarm", r.key); ok && r.op == watchAppend {
							mu.Lock()
							if _, ok := atSwitch[k]; !ok {
								atSwitch[k] = cz.total()
							}
							mu.Unlock()
						}
						return nil
					},
					after: func(r watchReq, err error) error {
						k, ok := watchedSeg("prewarm", r.key)
						if !ok || r.op != watchAppend || err != nil || !slices.ContainsFunc(framesOf(r.data), func(f frame) bool { return f.kind == frameSeal }) {
							return err
						}
						mu.Lock()
						if sealedOn[k]++; sealedOn[k] == quorum {
							atRoll[k] = cz.total()
						}
						mu.Unlock()
						return nil
					},
				}
			}
			l := mustOpen(t, stores, "prewarm", &Options{MaxSegmentAppends: 20})
			if l.opts.WriteQuorum != quorum {
				t.Fatalf("write quorum %d, want %d", l.opts.WriteQuorum, quorum)
			}
			const n = 120
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
				waitPrewarm(t, l, cz)
			}
			// The last roll may have no append after it. Once the writer
			// is quiet (nothing left to cut, so no seal and no roll to
			// come), the segment it is on is the one it switched to last,
			// and nothing was created since: without appends to it, it
			// never got a quarter full, which is when the next one is created.
			quiet := false
			for range 5000 {
				l.mu.Lock()
				cur := l.seg.key
				quiet = len(l.pending) == 0 && !l.seg.full && l.lacCut >= l.lac
				l.mu.Unlock()
				if quiet {
					mu.Lock()
					if _, ok := atSwitch[cur]; !ok {
						atSwitch[cur] = cz.total()
					}
					mu.Unlock()
					break
				}
				time.Sleep(time.Millisecond)
			}
			if !quiet {
				t.Fatal("the writer still had frames to cut after its appends returned")
			}
			st := l.Stats()
			mu.Lock()
			defer mu.Unlock()
			// Each roll, and the switch after it: to the first segment
			// after it that the writer appended to.
			var rolls []segKey
			for k := range atRoll {
				rolls = append(rolls, k)
			}
			slices.SortFunc(rolls, segKey.compare)
			switched := 0
			for _, k := range rolls {
				var next segKey
				for s := range atSwitch {
					if s.compare(k) > 0 && (next == segKey{} || s.compare(next) < 0) {
						next = s
					}
				}
				if next == (segKey{}) {
					t.Errorf("the roll from segment %s never switched to the next one", k)
					continue
				}
				switched++
				if atSwitch[next] != atRoll[k] {
					t.Errorf("roll from %s: the zones created %d objects between the roll and the switch, want 0", k, atSwitch[next]-atRoll[k])
				}
			}
			if len(rolls) < 4 || switched != len(rolls) {
				t.Fatalf("%d rolls, %d switches for %d appends at 20 frames a segment", len(rolls), switched, n)
			}
			if st.RollWaits != 0 || st.Prewarms != int64(len(rolls)) && st.Prewarms != int64(len(rolls))+1 {
				t.Errorf("stats %+v: want no roll waiting and one prewarm per roll", st)
			}
			r, _ := l.NewReader(0)
			defer r.Close()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i, rec := range readN(t, rctx, r, n) {
				if string(rec.Data) != fmt.Sprint(i) {
					t.Fatalf("record %d = %q", i, rec.Data)
				}
			}
		})
	}
}

// TestRecoverPrewarmedSegment: a writer stops after it created the next
// segment ahead but before it used it. The next writer must not take the
// unused segment's first offset as the end of the records: it fences the
// empty segment, recovers the one before, and continues right after the
// last record, and readers follow without a gap.
func TestRecoverPrewarmedSegment(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.zones(t, 3)
			opts := &Options{MaxSegmentAppends: 20}
			l := mustOpen(t, stores, "pw", opts)
			n := 0
			for ; ; n++ {
				if _, err := l.Append(ctx, fmt.Appendf(nil, "%d", n)); err != nil {
					t.Fatal(err)
				}
				l.mu.Lock()
				p := l.seg.next
				l.mu.Unlock()
				if p != nil {
					<-p.done
					if p.err != nil {
						t.Fatal(p.err)
					}
					n++
					break
				}
				if n > 100 {
					t.Fatal("no segment created ahead")
				}
			}
			l.mu.Lock()
			end, next := l.seg.end, l.seg.next.key
			l.mu.Unlock()
			if int64(n-1) >= end {
				t.Fatalf("%d records reach the planned end %d already", n, end)
			}
			keys, err := listChain(ctx, l.zones, 3, time.Second, nil, false)
			if err != nil || keys[len(keys)-1] != next {
				t.Fatalf("segments %v (%v), want the unused %v last", keys, err, next)
			}
			// A new writer takes over; the old one is abandoned.
			l2 := mustOpen(t, stores, "pw", opts)
			if got := l2.Stats().RecoveredTo; got != int64(n-1) {
				t.Fatalf("recovered to %d, want %d (the unused segment starts at %d)", got, n-1, next.first)
			}
			if _, err := l.Append(ctx, []byte("late")); !errors.Is(err, ErrFenced) {
				t.Errorf("old writer's append after the takeover: %v, want ErrFenced", err)
			}
			if off, err := l2.Append(ctx, []byte("after")); err != nil || off != int64(n) {
				t.Fatalf("append after the takeover: %d, %v", off, err)
			}
			r, _ := NewReader(stores, "pw", 0, opts)
			defer r.Close()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for i, rec := range readN(t, rctx, r, n+1) {
				want := fmt.Sprint(i)
				if i == n {
					want = "after"
				}
				if rec.Offset != int64(i) || string(rec.Data) != want {
					t.Fatalf("record %d: %d %q, want %q", i, rec.Offset, rec.Data, want)
				}
			}
		})
	}
}

// TestS3PartLimit runs the log over S3 Express zones whose objects take few
// appends. With segments rolling below the limit no append is refused; with
// segments longer than the limit the stores refuse appends (TooManyParts),
// and each refusal ends the segment early: no acknowledged record is lost,
// duplicated or moved, and readers see no gap.
func TestS3PartLimit(t *testing.T) {
	for _, tc := range []struct {
		name         string
		maxParts     int
		segAppends   int
		wantRefusals bool
	}{
		{"rolls-before-the-limit", 24, 24, false},
		{"limit-reached", 9, 5000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cz := s3Counted(s3expresstest.Options{MaxObjectParts: tc.maxParts})(t, 3)
			opts := &Options{MaxSegmentAppends: tc.segAppends}
			l := mustOpen(t, cz.stores, "parts", opts)
			const writers, each = 4, 60
			var mu sync.Mutex
			acked := map[int64]string{}
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						data := fmt.Sprintf("w%d-%d", w, i)
						off, err := l.Append(ctx, []byte(data))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						if prev, dup := acked[off]; dup {
							t.Errorf("offset %d acknowledged twice: %q and %q", off, prev, data)
						}
						acked[off] = data
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			var refused int64
			for _, srv := range cz.s3 {
				refused += srv.Stats().TooManyParts
			}
			st := l.Stats()
			if tc.wantRefusals != (refused > 0) || tc.wantRefusals != (st.CutShort > 0) {
				t.Fatalf("%d appends refused with TooManyParts, %d segments cut short; want refusals: %v", refused, st.CutShort, tc.wantRefusals)
			}
			if st.Segments < 3 {
				t.Errorf("%d segments for %d appends", st.Segments, writers*each)
			}
			check := func(stores []blob.Store) {
				r, err := NewReader(stores, "parts", 0, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				for i, rec := range readN(t, rctx, r, writers*each) {
					if rec.Offset != int64(i) || string(rec.Data) != acked[int64(i)] {
						t.Fatalf("record %d: offset %d %q, acknowledged %q", i, rec.Offset, rec.Data, acked[int64(i)])
					}
				}
			}
			check(cz.stores)
			// A new writer recovers the same records and continues after them.
			l.Close()
			l2 := mustOpen(t, cz.stores, "parts", opts)
			if got := l2.Stats().RecoveredTo; got != writers*each-1 {
				t.Errorf("recovered to %d, want %d", got, writers*each-1)
			}
			check(cz.stores)
			t.Logf("%d segments, %d cut short, %d appends refused", st.Segments, st.CutShort, refused)
		})
	}
}
