package commitlog

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// BenchmarkIdleLogs opens b.N logs, 500 at a time, over three
// GCS Rapid zones at the rapid profile, W=2, appends one record to each,
// and then measures what they cost while idle (with StreamIdle at 1s): heap
// and goroutines per log (the process's own: the emulators run in it too,
// and their goroutines, found by their stacks, are left out; their heap is
// not, so heap/log is an upper bound) and requests per log per second over
// an idle second:
//
//	go test -run '^$' -bench IdleLogs -benchtime 1000x ./commitlog
func BenchmarkIdleLogs(b *testing.B) {
	var stores []blob.Store
	var servers []*gcsrapidtest.Server
	for i := range 3 {
		s, srv := rapidZone(b, gcsrapidtest.Rapid(), i)
		stores, servers = append(stores, s), append(servers, srv)
	}
	requests := func() int64 {
		var n int64
		for _, srv := range servers {
			for _, c := range srv.Stats().Calls {
				n += c
			}
		}
		return n
	}
	ctx := context.Background()
	// Streams close after a second idle (the default is 30s), within the
	// settling time below.
	opts := &Options{WriteQuorum: 2, StreamIdle: time.Second}
	heap0, g0 := heapAndGoroutines()
	logs := make([]*Log, b.N)
	errs := make([]error, b.N)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	// At most 500 Opens at once: 10,000 at once on two cores, with the
	// emulators in the process, ran zones' calls past OpTimeout.
	sem := make(chan struct{}, 500)
	for i := range logs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := Open(ctx, stores, fmt.Sprintf("idle/%06d", i), opts)
			if err == nil {
				_, err = l.Append(ctx, []byte("first"))
			}
			logs[i], errs[i] = l, err
		})
	}
	wg.Wait()
	open := time.Since(start)
	b.StopTimer()
	defer func() {
		for _, l := range logs {
			if l != nil {
				l.Close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the LAC frames and prewarms settle, the streams close
	r0 := requests()
	time.Sleep(time.Second)
	idle := requests() - r0
	heap1, g1 := heapAndGoroutines()
	n := float64(b.N)
	b.ReportMetric(float64(open.Milliseconds()), "open-all-ms")
	b.ReportMetric(float64(heap1-heap0)/n/1024, "heap-KiB/log")
	b.ReportMetric(float64(g1-g0)/n, "goroutines/log")
	b.ReportMetric(float64(idle)/n, "idle-requests/log/s")
	b.ReportMetric(0, "ns/op")
}

// heapAndGoroutines returns the live heap after a collection and the
// goroutines that are not an emulator's (or the gRPC server's under it).
func heapAndGoroutines() (uint64, int) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "gcsrapidtest.") || strings.Contains(g, "grpc.(*Server)") || strings.Contains(g, "transport.(*http2Server)") || strings.Contains(g, "transport.NewServerTransport") {
			continue
		}
		n++
	}
	return ms.HeapAlloc, n
}

// An idle log holds no goroutine of its own and, after StreamIdle, no
// stream: its pumps return once their zone has nothing to append and
// nothing in flight, its mover and repairer run on timers, and its streams
// close. The next append starts the pumps again and takes the segments
// over; what it appends reads back.
func TestIdleLogHoldsNothing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opts := &Options{StreamIdle: 20 * time.Millisecond, RepairInterval: 5 * time.Millisecond, MaxSegmentAppends: 6}
			stores := be.zones(t, 3)
			l := mustOpen(t, stores, "L", opts)
			defer l.Close()
			idle := func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				for i, z := range l.zones {
					if l.pumping[i] || z.holdsStreams() {
						return false
					}
				}
				return true
			}
			const n = 20
			for i := range n {
				if off, err := l.Append(ctx, fmt.Appendf(nil, "r%d", i)); err != nil || off != int64(i) {
					t.Fatalf("append %d: %d, %v", i, off, err)
				}
				if i%5 == 4 {
					for j := 0; !idle(); j++ {
						if j > 60000 {
							t.Fatalf("after append %d the log never went idle: pumping %v", i, l.pumping)
						}
						time.Sleep(time.Millisecond)
					}
				}
			}
			r, err := NewReader(stores, "L", 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for i, rec := range readN(t, ctx, r, n) {
				if want := fmt.Sprintf("r%d", i); string(rec.Data) != want {
					t.Fatalf("record %d = %q, want %q", i, rec.Data, want)
				}
			}
			if st := l.Stats(); st.RepairPasses == 0 || st.Segments < 2 || st.ZoneErrors != 0 {
				t.Errorf("stats %+v: want repair passes, a roll, and no zone error (a closed stream is taken over again, not failed)", st)
			}
		})
	}
}
