package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// Latency profiles of the benchmarks: every call of the tier is delayed by a
// sample (reads, commits, stats, deletes, lists).
var (
	hotProfile  = latency.ZonalBucket
	coldProfile = latency.RegionalBucket
)

// slowMem returns a mem:// store behind a fault wrapper that delays every
// call by d, and the mem store itself (to fill without delay).
func slowMem(b *testing.B, d latency.Dist, seed uint64) (*fault.Store, blob.Store) {
	m, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		b.Fatal(err)
	}
	f := fault.Wrap(m, fault.Options{Seed: seed})
	f.AddLatencyToAll(d)
	return f, m
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkWriteLatency interleaves writes to a hot store alone and to a
// tiered store over an identical hot store (and a cold one), whose compactor
// moves objects 50 ms after they are written, so it works throughout. It
// reports both medians and their ratio (the target is at most 1.05).
//
//	go test ./tiered -run '^$' -bench WriteLatency -benchtime 400x
func BenchmarkWriteLatency(b *testing.B) {
	for _, mode := range []string{"Put", "Create"} {
		b.Run(mode, func(b *testing.B) {
			alone, _ := slowMem(b, hotProfile, 1)
			hot, _ := slowMem(b, hotProfile, 2)
			cold, _ := slowMem(b, coldProfile, 3)
			ts, err := tiered.New(hot, cold, tiered.Options{After: 50 * time.Millisecond, Interval: 10 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer ts.Close()
			defer alone.Close()
			ctx := context.Background()
			data := make([]byte, 4<<10)
			write := func(s blob.Store, i int) time.Duration {
				start := time.Now()
				var err error
				if mode == "Put" {
					err = blob.Put(ctx, s, fmt.Sprintf("w/%08d", i), data, nil)
				} else {
					_, err = blob.CreateBytes(ctx, s, "c/", data, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var la, lt []time.Duration
			b.ResetTimer()
			for i := range b.N {
				// Alternate which goes first, so drift in the machine's load
				// falls on both alike.
				if i%2 == 0 {
					la = append(la, write(alone, i))
					lt = append(lt, write(ts, i))
				} else {
					lt = append(lt, write(ts, i))
					la = append(la, write(alone, i))
				}
			}
			b.StopTimer()
			b.ReportMetric(ms(quantile(la, 0.5)), "hot-p50-ms")
			b.ReportMetric(ms(quantile(lt, 0.5)), "tiered-p50-ms")
			b.ReportMetric(ms(quantile(la, 0.99)), "hot-p99-ms")
			b.ReportMetric(ms(quantile(lt, 0.99)), "tiered-p99-ms")
			b.ReportMetric(float64(quantile(lt, 0.5))/float64(quantile(la, 0.5)), "p50-ratio")
			b.ReportMetric(float64(ts.Stats().MovedObjects), "moved-during")
		})
	}
}

// BenchmarkCompaction measures a pass that moves 200 objects of 256 KiB,
// each in a pack of its own (streamed), at several concurrency bounds, over the same
// latency profiles.
//
//	go test ./tiered -run '^$' -bench '^BenchmarkCompaction$' -benchtime 3x
func BenchmarkCompaction(b *testing.B) {
	for _, conc := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			benchPasses(b, bound(tiered.Options{Concurrency: conc, PackMaxObjects: alone}), 200, 256<<10, 4)
		})
	}
}

// benchPasses runs b.N passes of a tiered store made with opts (moving at
// once, manually) over slowed mem tiers, each moving n objects of size bytes
// put into hot beforehand, and reports the objects and MiB moved per second
// of pass. seed seeds the hot tier's latencies, seed+1 the cold tier's.
func benchPasses(b *testing.B, opts tiered.Options, n, size int, seed uint64) *tiered.Store {
	hot, rawHot := slowMem(b, hotProfile, seed)
	return benchPassesOver(b, hot, rawHot, 0, opts, n, size, seed)
}

// benchPassesOver is benchPasses over a given hot store (rawHot is how the
// objects are written, outside the timer): before each pass it waits
// settle, so that a quorum's versions are old enough to retire.
func benchPassesOver(b *testing.B, hot, rawHot blob.Store, settle time.Duration, opts tiered.Options, n, size int, seed uint64) *tiered.Store {
	cold, _ := slowMem(b, coldProfile, seed+1)
	opts.After, opts.Manual = time.Nanosecond, true
	ts, err := tiered.New(hot, cold, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ts.Close() })
	ctx := context.Background()
	data := make([]byte, size)
	var took time.Duration
	var moved int
	for i := range b.N {
		b.StopTimer()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				for k := w; k < n; k += 16 {
					if err := blob.Put(ctx, rawHot, fmt.Sprintf("%d/%05d", i, k), data, nil); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		time.Sleep(settle)
		b.StartTimer()
		start := time.Now()
		res := ts.CompactOnce(ctx)
		took += time.Since(start)
		if res.Moved != n || res.Failed != 0 {
			b.Fatalf("pass %+v", res)
		}
		moved += res.Moved
	}
	b.ReportMetric(float64(moved)/took.Seconds(), "objects/s")
	b.ReportMetric(float64(moved)*float64(size)/(1<<20)/took.Seconds(), "MiB/s")
	return ts
}

// BenchmarkPackedGet compares, in one run, reading a packed object through a
// tiered store (a hot miss, then one ranged read of its pack while the pack
// log is listed) with reading an object of the same size stored on its own in
// the regional store, over the latency profiles above (every call delayed:
// hot p50 2 ms, cold p50 20 ms; the pack log's listing is a cold call too).
// It reports both medians and their ratio (the goal is at most 1.2).
//
//	go test ./tiered -run '^$' -bench PackedGet -benchtime 200x
func BenchmarkPackedGet(b *testing.B) {
	const objects, size = 200, 64 << 10
	hot, rawHot := slowMem(b, hotProfile, 6)
	cold, rawCold := slowMem(b, coldProfile, 7)
	ts, err := tiered.New(hot, cold, tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	ctx := context.Background()
	data := make([]byte, size)
	for i := range objects {
		if err := blob.Put(ctx, rawHot, fmt.Sprintf("p/%04d", i), data, nil); err != nil {
			b.Fatal(err)
		}
		if err := blob.Put(ctx, rawCold, fmt.Sprintf("direct/%04d", i), data, nil); err != nil {
			b.Fatal(err)
		}
	}
	if res := ts.CompactOnce(ctx); res.Moved != objects || ts.Stats().Packs == 0 {
		b.Fatalf("pass %+v, stats %+v", res, ts.Stats())
	}
	read := func(s blob.Store, key string) time.Duration {
		start := time.Now()
		got, err := blob.ReadAll(ctx, s, key)
		if err != nil || len(got) != size {
			b.Fatalf("read %s: %d bytes, %v", key, len(got), err)
		}
		return time.Since(start)
	}
	var lp, ld []time.Duration
	b.ResetTimer()
	for i := range b.N {
		k := i % objects
		if i%2 == 0 {
			lp = append(lp, read(ts, fmt.Sprintf("p/%04d", k)))
			ld = append(ld, read(cold, fmt.Sprintf("direct/%04d", k)))
		} else {
			ld = append(ld, read(cold, fmt.Sprintf("direct/%04d", k)))
			lp = append(lp, read(ts, fmt.Sprintf("p/%04d", k)))
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(quantile(lp, 0.5)), "packed-p50-ms")
	b.ReportMetric(ms(quantile(ld, 0.5)), "direct-p50-ms")
	b.ReportMetric(ms(quantile(lp, 0.99)), "packed-p99-ms")
	b.ReportMetric(ms(quantile(ld, 0.99)), "direct-p99-ms")
	b.ReportMetric(float64(quantile(lp, 0.5))/float64(quantile(ld, 0.5)), "p50-ratio")
}

// BenchmarkPackCompaction measures a pass that moves 2000 objects of 64 KiB
// into packs at the default bounds, over the same latency profiles: from
// one hot store (mem), and from a 2-of-3 quorum of such stores (quorum),
// whose pass reads each object from one replica and retires it from all
// three (its versions older than the quorum's InFlightBound, as they are
// with After at its default).
//
//	go test ./tiered -run '^$' -bench PackCompaction -benchtime 3x
func BenchmarkPackCompaction(b *testing.B) {
	b.Run("mem", func(b *testing.B) {
		ts := benchPasses(b, tiered.Options{Concurrency: 16}, 2000, 64<<10, 8)
		b.ReportMetric(float64(ts.Stats().Packs)/float64(b.N), "packs/pass")
	})
	b.Run("quorum", func(b *testing.B) {
		var reps []blob.Store
		for i := range 3 {
			f, _ := slowMem(b, hotProfile, 20+uint64(i))
			reps = append(reps, f)
		}
		q, err := quorum.New(reps, quorum.Options{Consistency: quorum.ReadMajority, StragglerTimeout: 50 * time.Millisecond, AntiEntropyInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer q.Close()
		ts := benchPassesOver(b, q, q, q.InFlightBound()+10*time.Millisecond, tiered.Options{Concurrency: 16, MaxClockSkew: time.Millisecond}, 2000, 64<<10, 8)
		st := ts.Stats()
		if st.Retired < int64(2000*b.N) {
			b.Fatalf("retired %d replica copies in %d passes of 2000 objects", st.Retired, b.N)
		}
		b.ReportMetric(float64(st.Packs)/float64(b.N), "packs/pass")
		b.ReportMetric(float64(st.Retired)/float64(st.MovedObjects), "copies-retired/object")
	})
}

// BenchmarkDeleteLatency interleaves Deletes of objects in a hot store
// alone and in a tiered store over an identical hot store (and a cold one),
// as an LSM engine deletes the tables it no longer needs, one after
// another: young objects (still in hot; After one minute, so that with the
// default MoveTimeout and MaxClockSkew a move may be taking any of them) and
// packed ones (moved by one pass first), over one zonal store, over a
// 2-of-3 quorum of them, and over a 2-of-3 quorum of GCS Rapid emulators
// on the rapid profile (the real wire protocol). It reports both medians, tiered's p99, the ratios, and the
// time b.N sequential deletes through tiered took.
//
//	go test ./tiered -run '^$' -bench DeleteLatency -benchtime 240x
func BenchmarkDeleteLatency(b *testing.B) {
	zonal := func(b *testing.B, seed uint64) (blob.Store, func()) {
		f, _ := slowMem(b, hotProfile, seed)
		return f, func() { f.Close() }
	}
	quorum3 := func(b *testing.B, seed uint64) (blob.Store, func()) {
		var reps []blob.Store
		for i := range 3 {
			f, _ := slowMem(b, hotProfile, 10*seed+uint64(i))
			reps = append(reps, f)
		}
		q, err := quorum.New(reps, quorum.Options{StragglerTimeout: 50 * time.Millisecond, AntiEntropyInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		return q, func() { q.Close() }
	}
	// Three GCS Rapid emulators on the rapid profile for each quorum.
	rapidQuorum := func(b *testing.B, seed uint64) (blob.Store, func()) {
		v := url.Values{"straggler_timeout": {"250ms"}, "anti_entropy_interval": {"-1s"}}
		for i := range 3 {
			srv := gcsrapidtest.Start(b, gcsrapidtest.Options{
				Profile: gcsrapidtest.Rapid(), Seed: 10*seed + uint64(i),
				Buckets: []gcsrapidtest.Bucket{{Name: "bench", Zonal: true}},
			})
			v.Add("replica", "gcsrapid://bench?endpoint="+srv.Endpoint())
		}
		q, err := blob.Open(context.Background(), "quorum://?"+v.Encode())
		if err != nil {
			b.Fatal(err)
		}
		return q, func() { q.Close() }
	}
	for _, hk := range []struct {
		name string
		open func(*testing.B, uint64) (blob.Store, func())
	}{{"zonal", zonal}, {"quorum", quorum3}, {"rapid-quorum", rapidQuorum}} {
		for _, packed := range []bool{false, true} {
			b.Run(fmt.Sprintf("hot=%s/packed=%v", hk.name, packed), func(b *testing.B) {
				alone, closeAlone := hk.open(b, 1)
				defer closeAlone()
				hot, closeHot := hk.open(b, 2)
				defer closeHot()
				cold, _ := slowMem(b, coldProfile, 3)
				after := time.Minute
				if packed {
					after = time.Nanosecond
				}
				ts, err := tiered.New(hot, cold, tiered.Options{After: after, Manual: true, MaxClockSkew: time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				defer ts.Close()
				benchDeletes(b, alone, ts, packed)
			})
		}
	}
}

func benchDeletes(b *testing.B, alone blob.Store, ts *tiered.Store, packed bool) {
	ctx := context.Background()
	data := make([]byte, 4<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 2*b.N)
	sem := make(chan struct{}, 32)
	for i := range b.N {
		for _, s := range []blob.Store{alone, ts} {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				// A write that missed its time bound on a busy machine is
				// written again: the fill is not what is measured.
				var err error
				for range 20 {
					if err = blob.Put(ctx, s, fmt.Sprintf("d/%08d", i), data, nil); err == nil {
						break
					}
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if packed {
		waitInFlight(ts.Hot())
		if res := ts.CompactOnce(ctx); res.Moved != b.N || res.Err != nil {
			b.Fatalf("pass: %+v", res)
		}
	}
	del := func(s blob.Store, i int) time.Duration {
		start := time.Now()
		if err := s.Delete(ctx, fmt.Sprintf("d/%08d", i), nil); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var la, lt []time.Duration
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			la = append(la, del(alone, i))
			lt = append(lt, del(ts, i))
		} else {
			lt = append(lt, del(ts, i))
			la = append(la, del(alone, i))
		}
		total += lt[len(lt)-1]
	}
	b.StopTimer()
	if _, err := ts.Stat(ctx, "d/00000000"); !errors.Is(err, blob.ErrNotFound) {
		b.Fatalf("a deleted object: %v", err)
	}
	b.ReportMetric(ms(quantile(la, 0.5)), "hot-p50-ms")
	b.ReportMetric(ms(quantile(lt, 0.5)), "tiered-p50-ms")
	b.ReportMetric(ms(quantile(lt, 0.99)), "tiered-p99-ms")
	b.ReportMetric(float64(quantile(lt, 0.5))/float64(quantile(la, 0.5)), "p50-ratio")
	b.ReportMetric(float64(quantile(lt, 0.99))/float64(quantile(la, 0.99)), "p99-ratio")
	b.ReportMetric(total.Seconds(), "all-deletes-s")
}
