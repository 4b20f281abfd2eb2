package gcsrapid_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/bench"
)

// BenchmarkWritePaths is the three-way comparison of `zonalblob bench
// gcsrapid` as a go benchmark: gocloud zonal vs Put vs pooled Create, 10 B
// and 1 MiB, rapid profile, p50/p99/p999 per scenario.
//
//	go test -run '^$' -bench WritePaths -benchtime 1x ./blob/gcsrapid/
func BenchmarkWritePaths(b *testing.B) {
	for b.Loop() {
		res, err := bench.GCSRapid(context.Background(), bench.GCSRapidConfig{Profile: "rapid", Ops: 300, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			name := fmt.Sprintf("%s/%dB", r.Scenario, r.Size)
			b.ReportMetric(float64(r.P50)/1e6, name+"-p50-ms")
			b.ReportMetric(float64(r.P99)/1e6, name+"-p99-ms")
			b.ReportMetric(float64(r.P999)/1e6, name+"-p999-ms")
		}
	}
}

// BenchmarkSustainedCreates offers 500 pooled creates per second for 30
// seconds on the rapid profile, with the emulator's cap of 100 streams per
// connection, and reports pool misses and discarded objects as fractions of
// creates (targets: at most 0.1% and 1%), streams refused (target 0), the
// create p50 next to the emulator's own append+flush round trip on open
// objects at the same rate in the same run, and the heap held by each idle
// pooled writer (target under 256 KiB).
//
//	go test -run '^$' -bench SustainedCreates -benchtime 1x ./blob/gcsrapid/
func BenchmarkSustainedCreates(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{Profile: gcsrapidtest.Rapid(), Seed: 1, MaxBytes: 4 << 30,
			Buckets: []gcsrapidtest.Bucket{{Name: "sustained", Zonal: true}}})
		if err != nil {
			b.Fatal(err)
		}
		// The emulator caps streams per connection at 100, like a front end;
		// the client gets the connections the pool needs, as OpenURL does.
		opts := gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 1024, MinIdle: 8, LoadConcurrency: 128, MaxPools: 2}}
		client, err := srv.Client(ctx, option.WithGRPCConnectionPool(gcsrapid.Connections(opts)))
		if err != nil {
			b.Fatal(err)
		}
		s, err := gcsrapid.New(ctx, client, "sustained", opts)
		if err != nil {
			b.Fatal(err)
		}
		op := func(ctx context.Context, i int) error {
			_, err := blob.CreateBytes(ctx, s, "log/", []byte("0123456789"), nil)
			return err
		}
		bench.OpenLoop(ctx, 500, 500, op) // one second for the pool to learn the rate
		warm := s.Stats().Pools["log/"]
		lat, errs := bench.OpenLoop(ctx, 500, 500*30, op)
		st := s.Stats().Pools["log/"]
		creates := float64(len(lat) + errs)
		misses := float64(st.Misses - warm.Misses)
		discards := 0.0
		for _, n := range st.Discards {
			discards += float64(n)
		}
		b.Logf("pool: %+v", st)
		b.ReportMetric(100*misses/creates, "miss-%")
		b.ReportMetric(100*discards/float64(st.Loads), "discarded-%")
		b.ReportMetric(float64(errs), "errors")
		sst := srv.Stats()
		b.ReportMetric(float64(sst.StreamsRefused), "streams-refused")
		b.ReportMetric(float64(sst.PeakStreamsPerConn), "peak-streams/conn")
		// The emulator's own round trip at the same rate, in the same run:
		// append+flush on objects already open (no pool, no refills).
		open := make(chan *storage.Writer, 64)
		for i := range cap(open) {
			w := client.Bucket("sustained").Object(fmt.Sprintf("open/%02d", i)).NewWriter(ctx)
			w.Append, w.FinalizeOnClose, w.ChunkSize = true, false, 256<<10
			if _, err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			open <- w
		}
		flush := func(ctx context.Context, i int) error {
			w := <-open
			defer func() { open <- w }()
			if _, err := w.Write([]byte("0123456789")); err != nil {
				return err
			}
			_, err := w.Flush()
			return err
		}
		bench.OpenLoop(ctx, 500, 500, flush)
		flat, ferrs := bench.OpenLoop(ctx, 500, 500*30, flush)
		for range cap(open) {
			(<-open).Close()
		}
		pooled, raw := summary("sustained pooled create", lat, errs), summary("sustained append+flush", flat, ferrs)
		b.ReportMetric(float64(pooled.P50)/1e6, "create-p50-ms")
		b.ReportMetric(float64(raw.P50)/1e6, "append+flush-p50-ms")
		bench.WriteTable(b.Output(), []bench.Result{pooled, raw})

		// Heap per idle pooled writer: fill a fresh pool with no drain.
		idle, err := gcsrapid.New(ctx, client, "sustained", gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 256, MinIdle: 256, LoadConcurrency: 64, MaxPools: 1}})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		blob.CreateBytes(ctx, idle, "idle/", []byte("x"), nil)
		deadline := time.Now().Add(time.Minute)
		for idle.Stats().Pools["idle/"].Ready < 256 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/256/1024, "KiB/idle-writer")
		idle.Close()
		s.Close()
		client.Close()
		srv.Close()
	}
}

func summary(name string, lat []time.Duration, errs int) bench.Result {
	r := bench.Result{Scenario: name, Profile: "rapid", Size: 10, Rate: 500, Mode: bench.ModeOpen, Errors: errs, Ops: len(lat)}
	bench.Summarize(&r, lat)
	return r
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkPooledCreateRoundTrip compares, in one run on the rapid profile,
// a pooled Create of 10 bytes with what the emulator itself charges for it:
// one append+flush on an open appendable object through the storage client.
// Between the two it times a prewarmed writer's Write+Close without the pool
// (blob.Prewarm), and repeats the three on the zero profile, where only the
// client, the driver and loopback cost anything. Calls are sequential (closed
// loop, one at a time), so the figures are latencies, not queueing.
//
//	go test -run '^$' -bench PooledCreateRoundTrip -benchtime 1x ./blob/gcsrapid/
func BenchmarkPooledCreateRoundTrip(b *testing.B) {
	const n = 300
	ctx := context.Background()
	for b.Loop() {
		for _, profile := range []gcsrapidtest.Profile{gcsrapidtest.Rapid(), gcsrapidtest.Zero()} {
			srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{Profile: profile, Seed: 1,
				Buckets: []gcsrapidtest.Bucket{{Name: "rtt", Zonal: true}}})
			if err != nil {
				b.Fatal(err)
			}
			opts := gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 64, MinIdle: 16, MaxPools: 1}}
			client, err := srv.Client(ctx, option.WithGRPCConnectionPool(gcsrapid.Connections(opts)))
			if err != nil {
				b.Fatal(err)
			}
			s, err := gcsrapid.New(ctx, client, "rtt", opts)
			if err != nil {
				b.Fatal(err)
			}
			data := []byte("0123456789")

			// The emulator's own round trip: append+flush on an open object.
			// (Buffered: with ChunkSize 0 the client flushes at every Write,
			// and Write+Flush would cost two flushes.)
			w := client.Bucket("rtt").Object("open").NewWriter(ctx)
			w.Append, w.FinalizeOnClose, w.ChunkSize = true, false, 256<<10
			if _, err := w.Flush(); err != nil {
				b.Fatal(err)
			}
			flush := timeN(n, func(int) error {
				if _, err := w.Write(data); err != nil {
					return err
				}
				_, err := w.Flush()
				return err
			})
			w.Close()

			// A prewarmed writer's Write+Close, without the pool.
			warm := make([]blob.Writer, n)
			for i := range warm {
				if warm[i], err = s.Prewarm(ctx, fmt.Sprintf("warm/%04d", i), nil); err != nil {
					b.Fatal(err)
				}
			}
			prewarmed := timeN(n, func(i int) error {
				if _, err := warm[i].Write(data); err != nil {
					return err
				}
				return warm[i].Close()
			})

			// Pooled Create: wait for spares before each call, so every one
			// is a hit and none waits for a refill.
			blob.CreateBytes(ctx, s, "log/", data, nil)
			pooled := timeN(n, func(int) error {
				for s.Stats().Pools["log/"].Ready < 4 {
					time.Sleep(time.Millisecond)
				}
				return nil
			}, func(int) error {
				_, err := blob.CreateBytes(ctx, s, "log/", data, nil)
				return err
			})
			if st := s.Stats().Pools["log/"]; st.Misses > 1 {
				b.Logf("%s: %d misses", profile.Name, st.Misses)
			}
			for _, row := range []struct {
				name string
				lat  []time.Duration
			}{{"append+flush", flush}, {"prewarmed-write", prewarmed}, {"pooled-create", pooled}} {
				b.ReportMetric(float64(quantile(row.lat, 0.5))/1e6, profile.Name+"/"+row.name+"-p50-ms")
				b.ReportMetric(float64(quantile(row.lat, 0.99))/1e6, profile.Name+"/"+row.name+"-p99-ms")
			}
			s.Close()
			client.Close()
			srv.Close()
		}
	}
}

// timeN times n calls of the last f, each after the calls of the others
// (untimed preparation).
func timeN(n int, fs ...func(i int) error) []time.Duration {
	lat := make([]time.Duration, 0, n)
	for i := range n {
		for _, f := range fs[:len(fs)-1] {
			if f(i) != nil {
				return lat
			}
		}
		start := time.Now()
		if fs[len(fs)-1](i) != nil {
			return lat
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
