package s3express_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob/s3blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// freshTransport gives a store the HTTP state of a new process: no session,
// no open connection.
func freshTransport(t testing.TB) func(*s3.Options) {
	tr := &http.Transport{MaxIdleConnsPerHost: s3express.MaxIdleConnsPerHost}
	t.Cleanup(tr.CloseIdleConnections)
	return func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: tr} }
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkFirstWrite compares the first write after opening a store (a new
// process: no session, no connection) with a steady-state write on the same
// store, on the express latency profile. "first" waits for the warm-up
// (Ready) as a process does that opens its store at start and writes later;
// "first-nowait" writes at once and pays the session itself. The metric to
// read is first-ratio (target at most 1.2).
//
//	go test -run '^$' -bench 'FirstWrite|VsS3blob' -benchtime 200x ./blob/s3express/
func BenchmarkFirstWrite(b *testing.B) {
	profile := s3expresstest.MustProfile("express")
	b.Run("profile="+profile.Name, func(b *testing.B) {
		srv := newServer(b, s3expresstest.Options{Profile: profile})
		ctx := context.Background()
		data := make([]byte, 1024)
		var first, nowait, steady []time.Duration
		for i := 0; b.Loop(); i++ {
			warm := newStore(b, srv, s3express.Options{}, freshTransport(b))
			if err := warm.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if err := blob.Put(ctx, warm, fmt.Sprintf("first/%d", i), data, nil); err != nil {
				b.Fatal(err)
			}
			coldClient := srv.Client(freshTransport(b))
			coldBucket := newBucket(b, srv)
			t1 := time.Now()
			// Opened here, so its warm-up has no head start.
			cold, err := s3express.New(ctx, coldClient, coldBucket, s3express.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := blob.Put(ctx, cold, fmt.Sprintf("nowait/%d", i), data, nil); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := blob.Put(ctx, warm, fmt.Sprintf("steady/%d", i), data, nil); err != nil {
				b.Fatal(err)
			}
			first, nowait, steady = append(first, t1.Sub(t0)), append(nowait, t2.Sub(t1)), append(steady, time.Since(t2))
			warm.Close()
			cold.Close()
		}
		b.ReportMetric(float64(p50(first).Nanoseconds()), "first-p50-ns")
		b.ReportMetric(float64(p50(nowait).Nanoseconds()), "first-nowait-p50-ns")
		b.ReportMetric(float64(p50(steady).Nanoseconds()), "steady-p50-ns")
		b.ReportMetric(float64(p50(first))/float64(p50(steady)), "first-ratio")
		b.ReportMetric(float64(p50(nowait))/float64(p50(steady)), "first-nowait-ratio")
	})
}

// BenchmarkPutVsS3blob writes the same 1 KiB object through our Store and
// through gocloud's s3blob on the same directory bucket, the same client
// configuration and the express profile, interleaved (alternating which goes
// first) so machine noise hits both alike. The metric to read is p50-ratio,
// ours over s3blob (target at most 1.05).
func BenchmarkPutVsS3blob(b *testing.B) {
	profile := s3expresstest.MustProfile("express")
	for _, size := range []int{1 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("profile=%s/size=%dKiB", profile.Name, size>>10), func(b *testing.B) {
			srv := newServer(b, s3expresstest.Options{Profile: profile})
			ctx := context.Background()
			bucket := newBucket(b, srv)
			ours, err := s3express.New(ctx, srv.Client(), bucket, s3express.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer ours.Close()
			theirs, err := s3blob.OpenBucket(ctx, srv.Client(), bucket, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer theirs.Close()
			data := make([]byte, size)
			put := func(which int, key string) error {
				if which == 0 {
					return blob.Put(ctx, ours, key, data, nil)
				}
				return theirs.WriteAll(ctx, key, data, nil)
			}
			// Both start with a session and a connection.
			for w := range 2 {
				if err := put(w, fmt.Sprintf("warm/%d", w)); err != nil {
					b.Fatal(err)
				}
			}
			var times [2][]time.Duration
			for i := 0; b.Loop(); i++ {
				for j := range 2 {
					w := (i + j) % 2
					t0 := time.Now()
					if err := put(w, fmt.Sprintf("k%d/%d", w, i%1000)); err != nil {
						b.Fatal(err)
					}
					times[w] = append(times[w], time.Since(t0))
				}
			}
			b.ReportMetric(float64(p50(times[0]).Nanoseconds()), "ours-p50-ns")
			b.ReportMetric(float64(p50(times[1]).Nanoseconds()), "s3blob-p50-ns")
			b.ReportMetric(float64(p50(times[0]))/float64(p50(times[1])), "p50-ratio")
		})
	}
}
