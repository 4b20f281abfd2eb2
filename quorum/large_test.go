package quorum_test

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/quorum"
)

// largeSize keeps its package prefix rather than -sim.*: it sizes one object
// of one test, and drives no seeded simulation or checker.
var largeSize = flag.Int64("quorum.largesize", 24<<20, "bytes of TestLargeWriteThroughRapidZones' object (try 1<<30)")

// rapidZones starts n GCS Rapid emulators with no latency profile, one
// zonal bucket each, and returns a gcsrapid store over each.
func rapidZones(t testing.TB, n int) []blob.Store {
	t.Helper()
	var out []blob.Store
	for i := range n {
		srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Seed: uint64(i + 1)})
		if err := srv.CreateBucket("zone", true); err != nil {
			t.Fatal(err)
		}
		client, err := srv.Client(context.Background(), storage.WithDisabledClientMetrics())
		if err != nil {
			t.Fatal(err)
		}
		s, err := gcsrapid.New(context.Background(), client, "zone", gcsrapid.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		out = append(out, s)
	}
	return out
}

// pattern is a reader of n deterministic bytes, so that a large object
// need not be held in memory to be written or checked.
type pattern struct{ off, n int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off)]
	for i := range b {
		x := uint64(p.off + int64(i))
		b[i] = byte(x ^ x>>8 ^ x>>17)
	}
	p.off += int64(len(b))
	return len(b), nil
}

// heapPeak samples the heap in use until stopped and returns its peak.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// A large object written through a 2-of-3 quorum of GCS Rapid emulators,
// then overwritten (each promise reads and rewrites it), reads back whole
// with majority reads. The emulators keep objects in memory, so the heap
// figure logged includes their three copies; what the quorum itself holds
// is what exceeds that.
//
//	go test ./quorum -run TestLargeWriteThroughRapidZones -quorum.largesize $((1<<30)) -v
func TestLargeWriteThroughRapidZones(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := quorum.WithConsistency(context.Background(), quorum.ReadMajority)
	q := newQuorum(t, rapidZones(t, 3), testOptions())
	n := *largeSize
	want := sha256.New()
	io.Copy(want, &pattern{n: n})
	for _, step := range []string{"write", "overwrite"} {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := heapPeak()
		start := time.Now()
		w, err := q.NewWriter(ctx, "large", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, &pattern{n: n}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("%s of %d bytes: %v", step, n, err)
		}
		took := time.Since(start)
		peak := stop()
		t.Logf("%s of %d MiB: %v, heap in use %d MiB before, peak %d MiB", step, n>>20, took.Round(time.Millisecond), before.HeapInuse>>20, peak>>20)
		rd, err := q.NewRangeReader(ctx, "large", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		m, err := io.Copy(got, rd)
		rd.Close()
		if err != nil || m != n || fmt.Sprintf("%x", got.Sum(nil)) != fmt.Sprintf("%x", want.Sum(nil)) {
			t.Fatalf("after the %s: read %d of %d bytes, %v, digest match %v", step, m, n, err, fmt.Sprintf("%x", got.Sum(nil)) == fmt.Sprintf("%x", want.Sum(nil)))
		}
	}
}

// A fastest read of a value larger than one message of the replica's stream
// (2 MiB on GCS Rapid) reads all of it: the hedge that chose the winner does
// not end the context its reader goes on reading under.
func TestFastestReadOfALargeValueOverRapidZones(t *testing.T) {
	ctx := context.Background()
	zones := rapidZones(t, 3)
	q := newQuorum(t, zones, testOptions())
	const n = 9 << 20
	want := sha256.New()
	io.Copy(want, &pattern{n: n})
	w, err := q.NewWriter(ctx, "large", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, &pattern{n: n}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Another process: no floor for the key, so its fastest reads hedge.
	other := newQuorum(t, zones, testOptions())
	for _, c := range []quorum.Consistency{quorum.ReadFastest, quorum.ReadMajority} {
		rd, err := other.NewRangeReader(quorum.WithConsistency(ctx, c), "large", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		m, err := io.Copy(got, rd)
		rd.Close()
		if err != nil || m != n || fmt.Sprintf("%x", got.Sum(nil)) != fmt.Sprintf("%x", want.Sum(nil)) {
			t.Fatalf("%v read: %d of %d bytes, %v", c, m, n, err)
		}
	}
}
