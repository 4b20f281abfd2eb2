package quorum_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/quorum"
)

// benchProfile is a zonal bucket's per-operation delay, in the range of
// DESIGN.md's figures for GCS Rapid flushes and S3 Express ("single-digit
// ms"): p50 2 ms, p99 5 ms on every call of the fault wrapper.
var benchProfile = latency.Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Source: "zonal write/read, DESIGN.md table (S3 Express single-digit ms; GCS Rapid pooled write 2-3 ms)"}

var benchOps = []fault.Op{fault.OpRead, fault.OpWrite, fault.OpCommit, fault.OpStat}

// latencyReplicas returns n mem:// stores delayed by d, the first by d*slow.
func latencyReplicas(b *testing.B, n int, d latency.Dist, slow float64) []blob.Store {
	reps, fs := faulted(b, n, 42)
	for i, f := range fs {
		dd := d
		if i == 0 {
			dd = d.Scale(slow)
		}
		for _, op := range benchOps {
			f.AddLatency(op, dd)
		}
	}
	return reps
}

// measure runs op b.N times and reports its p50 and p99 in ms.
func measure(b *testing.B, op func(i int) error) {
	b.Helper()
	measureTimed(b, func(i int) (time.Duration, error) {
		start := time.Now()
		err := op(i)
		return time.Since(start), err
	})
}

// measureTimed is measure for an op that times itself (to leave set-up out).
func measureTimed(b *testing.B, op func(i int) (time.Duration, error)) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := op(i)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, d)
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPut compares a quorum Put (3 replicas, W=2) with a single store
// Put, on healthy replicas and with one replica 10x slower. Profile: benchProfile.
func BenchmarkPut(b *testing.B) {
	b.Logf("latency profile: p50 %v p99 %v per call (%s)", benchProfile.P50, benchProfile.P99, benchProfile.Source)
	data := make([]byte, 4<<10)
	ctx := context.Background()
	b.Run("single", func(b *testing.B) {
		s := latencyReplicas(b, 1, benchProfile, 1)[0]
		defer s.Close()
		measure(b, func(i int) error { return blob.Put(ctx, s, fmt.Sprintf("k/%d", i), data, nil) })
	})
	for _, slow := range []float64{1, 10} {
		b.Run(fmt.Sprintf("quorum-slowest-%gx", slow), func(b *testing.B) {
			q := newQuorum(b, latencyReplicas(b, 3, benchProfile, slow), quorum.Options{StragglerTimeout: 10 * time.Second})
			defer q.Close()
			measure(b, func(i int) error { return blob.Put(ctx, q, fmt.Sprintf("k/%d", i), data, nil) })
		})
	}
	b.Run("quorum-overwrite", func(b *testing.B) {
		q := newQuorum(b, latencyReplicas(b, 3, benchProfile, 1), quorum.Options{StragglerTimeout: 10 * time.Second})
		defer q.Close()
		measure(b, func(i int) error { return blob.Put(ctx, q, fmt.Sprintf("k/%d", i%16), data, nil) })
	})
	b.Run("quorum-if-generation-match", func(b *testing.B) {
		q := newQuorum(b, latencyReplicas(b, 3, benchProfile, 1), quorum.Options{StragglerTimeout: 10 * time.Second})
		defer q.Close()
		gens := map[string]string{}
		measureTimed(b, func(i int) (time.Duration, error) {
			key := fmt.Sprintf("k/%d", i%16)
			if gens[key] == "" {
				if err := blob.Put(ctx, q, key, data, nil); err != nil {
					return 0, err
				}
			}
			a, err := q.Stat(quorum.WithConsistency(ctx, quorum.ReadMajority), key)
			if err != nil {
				return 0, err
			}
			gens[key] = a.Generation
			start := time.Now()
			err = blob.Put(ctx, q, key, data, &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)})
			return time.Since(start), err
		})
	})
	b.Run("quorum-if-not-exist", func(b *testing.B) {
		q := newQuorum(b, latencyReplicas(b, 3, benchProfile, 1), quorum.Options{StragglerTimeout: 10 * time.Second})
		defer q.Close()
		measure(b, func(i int) error {
			return blob.Put(ctx, q, fmt.Sprintf("k/%d", i), data, &blob.WriterOptions{If: blob.IfNotExist()})
		})
	})
	// Pooled creates (pool.NewCreator, the pool filled before measuring and
	// drained below its refill rate): one commit per replica.
	pooled := func(b *testing.B, s blob.Store) {
		c, err := pool.NewCreator(s, pool.CreatorOptions{Capacity: 32, MinIdle: 8})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		time.Sleep(200 * time.Millisecond)
		measure(b, func(i int) error {
			_, err := blob.CreateBytes(ctx, c, "log/", data, nil)
			if i%16 == 15 {
				time.Sleep(20 * time.Millisecond)
			}
			return err
		})
	}
	b.Run("single-pooled-create", func(b *testing.B) {
		pooled(b, latencyReplicas(b, 1, benchProfile, 1)[0])
	})
	b.Run("quorum-pooled-create", func(b *testing.B) {
		pooled(b, newQuorum(b, latencyReplicas(b, 3, benchProfile, 1), quorum.Options{StragglerTimeout: 10 * time.Second}))
	})
	b.Run("quorum-create", func(b *testing.B) {
		q := newQuorum(b, latencyReplicas(b, 3, benchProfile, 1), quorum.Options{StragglerTimeout: 10 * time.Second})
		defer q.Close()
		measure(b, func(i int) error {
			_, err := blob.CreateBytes(ctx, q, "log/", data, nil)
			return err
		})
	})
}

// BenchmarkGet compares hedged and unhedged reads when one replica turns 10x
// slower after a warm-up in which all looked alike: the case hedging is for.
func BenchmarkGet(b *testing.B) {
	b.Logf("latency profile: p50 %v p99 %v per call (%s)", benchProfile.P50, benchProfile.P99, benchProfile.Source)
	ctx := context.Background()
	data := make([]byte, 4<<10)
	for _, tc := range []struct {
		name  string
		hedge time.Duration
		slow  float64

		majority bool
	}{
		{"healthy-hedged", 0, 1, false},
		{"slow-replica-hedged", 0, 10, false},
		{"slow-replica-unhedged", -1, 10, false},
		{"healthy-majority", 0, 1, true},
		{"slow-replica-majority", 0, 10, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			reps, fs := faulted(b, 3, 42)
			o := quorum.Options{HedgeDelay: tc.hedge, ProbeInterval: time.Hour}
			if tc.majority {
				o.Consistency = quorum.ReadMajority
			}
			q := newQuorum(b, reps, o)
			defer q.Close()
			const keys = 64
			for i := range keys {
				if err := blob.Put(ctx, q, fmt.Sprintf("k/%d", i), data, nil); err != nil {
					b.Fatal(err)
				}
			}
			for _, f := range fs {
				for _, op := range benchOps {
					f.AddLatency(op, benchProfile)
				}
			}
			for i := range 2 * keys {
				if _, err := blob.ReadAll(ctx, q, fmt.Sprintf("k/%d", i%keys)); err != nil {
					b.Fatal(err)
				}
			}
			fs[0].Reset()
			for _, op := range benchOps {
				fs[0].AddLatency(op, benchProfile.Scale(tc.slow))
			}
			measure(b, func(i int) error {
				_, err := blob.ReadAll(ctx, q, fmt.Sprintf("k/%d", i%keys))
				return err
			})
		})
	}
}
