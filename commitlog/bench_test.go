package commitlog

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
)

// BenchmarkAppend measures acknowledged appends per second, append latency
// (p50, p99) and reader lag (from an append's acknowledgement to a tailing
// reader holding the record, p50, p99) with 64 concurrent appenders of
// 100-byte records, on the emulators' latency profiles:
//
//	go test -run '^$' -bench . ./commitlog
//
// rapid-slots is the bucket-log protocol (one object per append, created with
// IfNotExist) on a Rapid bucket, the baseline; the others append to open
// segments. slowzone adds 150 ms to every flush of one zone of three;
// rolling rolls segments every 200 frames.
func BenchmarkAppend(b *testing.B) {
	rapid := gcsrapidtest.Rapid()
	cases := []struct {
		name  string
		zones func(testing.TB, int) []blob.Store
		n, w  int
		opts  Options
		slow  bool
		size  int
		// stripes, if set, makes it a striped log of that many stripes.
		stripes int
	}{
		{name: "rapid-slots-1", zones: rapidZones(rapid), n: 1, w: 1, opts: Options{Slots: true}},
		{name: "rapid-1", zones: rapidZones(rapid), n: 1, w: 1},
		{name: "rapid-2of3", zones: rapidZones(rapid), n: 3, w: 2},
		{name: "rapid-2of3-4KiB", zones: rapidZones(rapid), n: 3, w: 2, size: 4 << 10},
		{name: "rapid-2of3-64KiB", zones: rapidZones(rapid), n: 3, w: 2, size: 64 << 10},
		{name: "rapid-2of3-4KiB-stripes2", zones: rapidZones(rapid), n: 3, w: 2, size: 4 << 10, stripes: 2},
		{name: "rapid-2of3-4KiB-stripes4", zones: rapidZones(rapid), n: 3, w: 2, size: 4 << 10, stripes: 4},
		{name: "rapid-2of3-64KiB-stripes2", zones: rapidZones(rapid), n: 3, w: 2, size: 64 << 10, stripes: 2},
		{name: "rapid-2of3-64KiB-stripes4", zones: rapidZones(rapid), n: 3, w: 2, size: 64 << 10, stripes: 4},
		{name: "rapid-2of3-stripes2", zones: rapidZones(rapid), n: 3, w: 2, stripes: 2},
		{name: "rapid-2of3-4KiB-unpipelined", zones: rapidZones(rapid), n: 3, w: 2, size: 4 << 10, opts: Options{MaxInFlight: 1}},
		{name: "rapid-2of3-slowzone", zones: rapidZones(rapid), n: 3, w: 2, slow: true},
		{name: "rapid-2of3-64KiB-slowzone", zones: rapidZones(rapid), n: 3, w: 2, size: 64 << 10, slow: true},
		// Segments of 200 frames: a roll every ~5000 records, the next
		// segment created ahead of each.
		{name: "rapid-2of3-rolling", zones: rapidZones(rapid), n: 3, w: 2, opts: Options{MaxSegmentAppends: 200}},
		{name: "s3express-2of3", zones: s3Zones("express"), n: 3, w: 2},
		{name: "azpremium-2of3", zones: azZones(azuritetest.Premium), n: 3, w: 2},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			stores := c.zones(b, c.n)
			if c.slow {
				f := fault.Wrap(stores[2], fault.Options{Seed: 1})
				f.AddLatency(fault.OpCommit, latency.Fixed(150*time.Millisecond))
				stores[2] = f
			}
			opts := c.opts
			opts.WriteQuorum = c.w
			benchAppend(b, stores, &opts, cmp.Or(c.size, 100), c.stripes)
		})
	}
}

// benchLog is what benchAppend needs of a log, striped or not.
type benchLog interface {
	Append(ctx context.Context, records ...[]byte) (int64, error)
	Close() error
}

type benchReader interface {
	Next(ctx context.Context) (Record, error)
	Stats() ReaderStats
}

func benchAppend(b *testing.B, stores []blob.Store, opts *Options, size, stripes int) {
	ctx := context.Background()
	var (
		l     benchLog
		r     benchReader
		stats func() Stats
		err   error
	)
	if stripes > 0 {
		var s *Striped
		if s, err = OpenStriped(ctx, stores, "bench", stripes, opts); err != nil {
			b.Fatal(err)
		}
		l, stats = s, func() Stats { return sumStats(s.Stats().Stripes) }
		r, err = s.NewReader(0)
	} else {
		var lg *Log
		if lg, err = Open(ctx, stores, "bench", opts); err != nil {
			b.Fatal(err)
		}
		l, stats = lg, lg.Stats
		r, err = lg.NewReader(0)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	n := b.N
	acks := make([]atomic.Int64, n) // unix nanos of each offset's acknowledgement
	lags := make([]time.Duration, 0, n)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for range n {
			rec, err := r.Next(rctx)
			if err != nil {
				return
			}
			now := time.Now().UnixNano()
			if rec.Offset >= int64(n) {
				continue
			}
			// The reader may get a record before its Append has returned.
			for acks[rec.Offset].Load() == 0 && rctx.Err() == nil {
				time.Sleep(100 * time.Microsecond)
			}
			lags = append(lags, time.Duration(max(now-acks[rec.Offset].Load(), 0)))
		}
	})
	const workers = 64
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	record := make([]byte, size)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				off, err := l.Append(ctx, record)
				if err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				lat[w] = append(lat[w], t1.Sub(t0))
				if off < int64(n) {
					acks[off].Store(t1.UnixNano())
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	rwg.Wait()
	all := slices.Concat(lat...)
	b.ReportMetric(float64(n)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(ms(quantile(all, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(all, 0.99)), "p99-ms")
	b.ReportMetric(ms(quantile(lags, 0.5)), "lag-p50-ms")
	b.ReportMetric(ms(quantile(lags, 0.99)), "lag-p99-ms")
	st := stats()
	b.ReportMetric(float64(st.Records)/float64(max(st.Frames, 1)), "records/frame")
	b.ReportMetric(float64(st.Segments), "segments")
	b.ReportMetric(float64(st.RollWaits), "roll-waits")
	// What the tailing reader read per byte appended: above 1 by the
	// frames' headers and by overlapping reads of the tip.
	b.ReportMetric(float64(r.Stats().BytesRead)/float64(n*size), "read/appended")
	b.ReportMetric(0, "ns/op")
	if testing.Verbose() {
		fmt.Printf("%s: %+v\nreader: %+v\n", b.Name(), st, r.Stats())
	}
}

// sumStats adds up the counters of a striped log's stripes that the
// benchmark reports.
func sumStats(sts []Stats) Stats {
	var t Stats
	for _, st := range sts {
		t.Records += st.Records
		t.Frames += st.Frames
		t.Segments += st.Segments
		t.RollWaits += st.RollWaits
		t.Appends += st.Appends
	}
	return t
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(float64(len(s))*q), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkTakeover measures a new writer's Open on a live log (the old
// writer appending 100-byte records until it is fenced) on three GCS Rapid
// zones, W=2, at the rapid profile, and how long a tailing reader goes
// without a record across it:
//
//	go test -run '^$' -bench Takeover -benchtime 20x ./commitlog
//
// open-metadata-rts is Open's p50 in units of the profile's metadata
// operation (CreateAppendable's p50, 40 ms).
func BenchmarkTakeover(b *testing.B) {
	profile := gcsrapidtest.Rapid()
	stores := rapidZones(profile)(b, 3)
	ctx := context.Background()
	opts := &Options{WriteQuorum: 2}
	w := mustOpen(b, stores, "T", opts)
	r, err := NewReader(stores, "T", 0, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var last atomic.Int64 // unix nanos of the reader's last record
	var gaps []time.Duration
	var gmu sync.Mutex
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			if _, err := r.Next(rctx); err != nil {
				return
			}
			now := time.Now().UnixNano()
			if prev := last.Swap(now); prev != 0 {
				gmu.Lock()
				gaps = append(gaps, time.Duration(now-prev))
				gmu.Unlock()
			}
		}
	}()
	var opens []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cur := w
		done := make(chan struct{})
		go func() { // the old writer appends until it is fenced
			defer close(done)
			for {
				if _, err := cur.Append(ctx, []byte("record")); err != nil {
					return
				}
			}
		}()
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		nw, err := Open(ctx, stores, "T", opts)
		if err != nil {
			b.Fatal(err)
		}
		opens = append(opens, time.Since(start))
		<-done
		cur.Close()
		w = nw
		for range 20 {
			if _, err := w.Append(ctx, []byte("after")); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	w.Close()
	slices.Sort(opens)
	gmu.Lock()
	slices.Sort(gaps)
	g := slices.Clone(gaps)
	gmu.Unlock()
	q := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	b.ReportMetric(float64(q(opens, 0.5).Microseconds())/1000, "open-p50-ms")
	b.ReportMetric(float64(q(opens, 0.99).Microseconds())/1000, "open-p99-ms")
	b.ReportMetric(float64(q(opens, 0.5))/float64(profile.CreateAppendable.P50), "open-metadata-rts")
	if len(g) > 0 {
		b.ReportMetric(float64(g[len(g)-1].Microseconds())/1000, "reader-max-gap-ms")
	}
}
