//go:build unix

package tiered_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// BenchmarkShardedCompaction measures the pass throughput of 1, 2 and 4
// shards with as many holders (Stores over the same tiers, standing for
// processes, each with its background compactor on and Concurrency 16),
// over the latency profiles of BenchmarkPackCompaction: 2000 objects of 64
// KiB put into hot (one mem store, or a 2-of-3 quorum of them), then moved
// into packs at the default bounds. The holders' clocks are held back
// while the objects are put, and set right when the timer starts: it stops
// when the last object has moved. Besides objects/s and MiB/s it reports
// cpu-cores, the CPU time the process used (all holders, the tiers and the
// benchmark) per second of the run: at the machine's core count, CPU is
// what bounds it.
//
//	go test ./tiered -run '^$' -bench ShardedCompaction -benchtime 3x
func BenchmarkShardedCompaction(b *testing.B) {
	for _, hotKind := range []string{"mem", "quorum"} {
		for _, shards := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("hot=%s/shards=%d", hotKind, shards), func(b *testing.B) {
				benchShards(b, hotKind, shards)
			})
		}
	}
}

func benchShards(b *testing.B, hotKind string, shards int) {
	const n, size = 2000, 64 << 10
	// hotOf is holder h's client of hot: the mem store itself, or a quorum
	// client of its own over the shared replicas, as a process has.
	var hotOf func(h int) blob.Store
	var rawHot blob.Store
	settle := time.Duration(0)
	skew := 100 * time.Millisecond
	if hotKind == "mem" {
		f, raw := slowMem(b, hotProfile, 8)
		b.Cleanup(func() { f.Close() })
		hotOf, rawHot = func(int) blob.Store { return nopClose{f} }, raw
	} else {
		var reps []blob.Store
		for i := range 3 {
			f, _ := slowMem(b, hotProfile, 20+uint64(i))
			b.Cleanup(func() { f.Close() })
			reps = append(reps, nopClose{f})
		}
		newQ := func() *quorum.Store {
			q, err := quorum.New(reps, quorum.Options{Consistency: quorum.ReadMajority, StragglerTimeout: 50 * time.Millisecond, AntiEntropyInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { q.Close() })
			return q
		}
		hotOf = func(int) blob.Store { return quorumHot{newQ()} }
		q := newQ()
		rawHot = q
		// Versions are retired once older than the quorum's in-flight
		// bound and the clock skew (see BenchmarkPackCompaction).
		settle, skew = q.InFlightBound()+10*time.Millisecond, time.Millisecond
	}
	cold, _ := slowMem(b, coldProfile, 9)
	b.Cleanup(func() { cold.Close() })
	var behind atomic.Int64 // how far the holders' clocks are held back
	behind.Store(int64(time.Hour))
	younger := func() time.Duration { return -time.Duration(behind.Load()) }
	var stores []*tiered.Store
	for h := range shards {
		s, err := tiered.New(testkit.AgedByFunc(hotOf(h), younger), nopClose{cold}, tiered.Options{
			After: time.Nanosecond, Interval: 5 * time.Millisecond, Concurrency: 16,
			Shards: shards, LeaseDuration: 3 * time.Second, MaxClockSkew: skew, Owner: fmt.Sprint("holder-", h),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	// The shards spread, one to a holder (bounded: 30 leases' worth of
	// polls on an idle clock).
	spread := false
	for i := 0; i < 30*3000/10 && !spread; i++ {
		spread = true
		for _, s := range stores {
			held := 0
			for _, l := range s.Stats().Lease.Shards {
				if l.Held {
					held++
				}
			}
			spread = spread && held == 1
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !spread {
		b.Fatal("the shards did not spread one to a holder")
	}
	movedAll := func() (m int64) {
		for _, s := range stores {
			m += s.Stats().MovedObjects
		}
		return m
	}
	ctx := context.Background()
	data := make([]byte, size)
	var took, cpu time.Duration
	moved := 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		behind.Store(int64(time.Hour))
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				for k := w; k < n; k += 16 {
					// Again if it fails: a quorum's write bound is tight
					// on a busy machine, and this is not what is timed.
					var err error
					for range 10 {
						if err = blob.Put(ctx, rawHot, fmt.Sprintf("%d/%05d", i, k), data, nil); err == nil {
							break
						}
					}
					if err != nil {
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
		before := movedAll()
		b.StartTimer()
		start, cpu0 := time.Now(), cpuTime()
		behind.Store(0)
		for movedAll() < before+n {
			time.Sleep(time.Millisecond)
		}
		took += time.Since(start)
		cpu += cpuTime() - cpu0
		moved += n
	}
	b.StopTimer()
	var packs int64
	for _, s := range stores {
		packs += s.Stats().Packs
	}
	b.ReportMetric(float64(moved)/took.Seconds(), "objects/s")
	b.ReportMetric(float64(moved)*float64(size)/(1<<20)/took.Seconds(), "MiB/s")
	b.ReportMetric(cpu.Seconds()/took.Seconds(), "cpu-cores")
	b.ReportMetric(float64(packs)/float64(b.N), "packs/run")
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
