package gcsrapidtest

import (
	"slices"
	"testing"
	"time"
)

// Benchmarks report what a client sees under a latency profile, as p50 and
// p99 milliseconds per operation (ReportMetric), alongside ns/op. They
// measure, they do not assert: the machines are shared and noisy.
//
//	go test ./blob/gcsrapid/gcsrapidtest -run '^$' -bench . -benchtime 100x

type latencies []time.Duration

func (l latencies) report(b *testing.B, profile string) {
	b.Helper()
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	q := func(p float64) float64 {
		return float64(s[min(int(p*float64(len(s))), len(s)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.Logf("profile %s (%s): n=%d p50=%.2fms p99=%.2fms", profile, benchSource(profile), len(s), q(0.5), q(0.99))
}

func benchSource(name string) string {
	p, err := ProfileByName(name)
	if err != nil {
		return err.Error()
	}
	return p.CreateAppendable.Source
}

// BenchmarkRapidCreateWriteFinalize is the naive way to write a small object
// to a zonal bucket: create an appendable object, write, finalize on Close.
// The zero profile shows the client's and loopback's own cost.
func BenchmarkRapidCreateWriteFinalize(b *testing.B) {
	for _, name := range []string{"rapid", "zero"} {
		b.Run(name, func(b *testing.B) { benchCreateWriteFinalize(b, name) })
	}
}

func benchCreateWriteFinalize(b *testing.B, profile string) {
	p, _ := ProfileByName(profile)
	_, c := newTestServer(b, Options{Profile: p, Seed: 1})
	ctx := testCtx(b)
	data := make([]byte, 1024)
	var lat latencies
	for b.Loop() {
		start := time.Now()
		w := c.Bucket("zonal").Object("naive").NewWriter(ctx)
		w.Append, w.FinalizeOnClose = true, true
		w.Write(data)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b, profile)
}

// BenchmarkRapidAppendFlush writes 1 KiB to an already open appendable
// object and flushes it: the pooled-writer path.
func BenchmarkRapidAppendFlush(b *testing.B) {
	for _, name := range []string{"rapid", "zero"} {
		b.Run(name, func(b *testing.B) { benchAppendFlush(b, name, 1024) })
	}
}

// BenchmarkRapidAppendFlush1MiB flushes 1 MiB per operation.
func BenchmarkRapidAppendFlush1MiB(b *testing.B) {
	for _, name := range []string{"rapid", "zero"} {
		b.Run(name, func(b *testing.B) { benchAppendFlush(b, name, 1<<20) })
	}
}

func benchAppendFlush(b *testing.B, profile string, size int) {
	p, _ := ProfileByName(profile)
	_, c := newTestServer(b, Options{Profile: p, Seed: 1})
	ctx := testCtx(b)
	w := c.Bucket("zonal").Object("open").NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.ChunkSize = 2 * size
	// Open the object before timing: creation is the cost the pool hides.
	w.Write([]byte("x"))
	if _, err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	var lat latencies
	for b.Loop() {
		start := time.Now()
		w.Write(data)
		if _, err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	lat.report(b, profile)
}

// BenchmarkRegionalCreate writes a 2 KiB object in one shot to a regional bucket.
func BenchmarkRegionalCreate(b *testing.B) {
	p, _ := ProfileByName("regional")
	_, c := newTestServer(b, Options{Profile: p, Seed: 1})
	ctx := testCtx(b)
	data := make([]byte, 2048)
	var lat latencies
	for b.Loop() {
		start := time.Now()
		w := c.Bucket("regional").Object("obj").NewWriter(ctx)
		w.Append = false
		w.ChunkSize = 0
		w.Write(data)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b, "regional")
}

// BenchmarkRegionalGet reads a 2 KiB object from a regional bucket.
func BenchmarkRegionalGet(b *testing.B) {
	p, _ := ProfileByName("regional")
	_, c := newTestServer(b, Options{Profile: p, Seed: 1})
	ctx := testCtx(b)
	w := c.Bucket("regional").Object("obj").NewWriter(ctx)
	w.Append = false
	w.Write(make([]byte, 2048))
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	var lat latencies
	for b.Loop() {
		start := time.Now()
		r, err := c.Bucket("regional").Object("obj").NewReader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 4096)
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
		r.Close()
		lat = append(lat, time.Since(start))
	}
	lat.report(b, "regional")
}
