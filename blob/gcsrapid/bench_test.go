package gcsrapid_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
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
// seconds on the rapid profile and reports pool misses and discarded objects
// as fractions of creates (targets: at most 0.1% and 1%), and the heap held
// by each idle pooled writer (target under 256 KiB).
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
		client, err := srv.Client(ctx)
		if err != nil {
			b.Fatal(err)
		}
		s, err := gcsrapid.New(client, "sustained", gcsrapid.Options{PoolSize: 1024, PoolMinIdle: 8, LoadConcurrency: 128})
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
		bench.WriteTable(b.Output(), []bench.Result{summary("sustained pooled create", lat, errs)})

		// Heap per idle pooled writer: fill a fresh pool with no drain.
		idle, err := gcsrapid.New(client, "sustained", gcsrapid.Options{PoolSize: 256, PoolMinIdle: 256, LoadConcurrency: 64})
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
