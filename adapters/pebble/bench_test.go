package pebble_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	zpebble "github.com/zonalblob/zonalblob/adapters/pebble"
	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

func slow(b *testing.B, d latency.Dist, seed uint64) blob.Store {
	m, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		b.Fatal(err)
	}
	f := fault.Wrap(m, fault.Options{Seed: seed})
	f.AddLatencyToAll(d)
	return f
}

func slowQuorum(b *testing.B, seed uint64) blob.Store {
	var reps []blob.Store
	for i := range 3 {
		reps = append(reps, slow(b, latency.ZonalBucket, 10*seed+uint64(i)))
	}
	q, err := quorum.New(reps, quorum.Options{StragglerTimeout: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	return q
}

// BenchmarkLSM runs one pebble DB with every sstable on a Store: 100k keys
// of 100 bytes written in 10 flushes, then compacted (the load), the
// DB closed (which waits for its obsolete tables' deletes), reopened, 10k
// point reads and a full scan, on a 2-of-3 quorum of latency-profiled
// zonal stores, and on tiered over such a quorum (a regional store behind
// it) with its compactor moving objects at once or after a minute; the
// regional tier's listings, reads and Stats during the close are counted.
//
//	cd adapters/pebble && go test -run '^$' -bench LSM -benchtime 1x
func BenchmarkLSM(b *testing.B) {
	for _, c := range []struct {
		name  string
		after time.Duration // 0: the quorum alone
	}{{"quorum", 0}, {"tiered-after=0", time.Nanosecond}, {"tiered-after=1m", time.Minute}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				var s blob.Store = slowQuorum(b, 1)
				var cold *fault.Store
				if c.after > 0 {
					cold = slow(b, latency.RegionalBucket, 9).(*fault.Store)
					t, err := tiered.New(s, cold, tiered.Options{After: c.after, Interval: time.Second})
					if err != nil {
						b.Fatal(err)
					}
					s = t
				}
				runLSM(b, s, cold)
				s.Close()
			}
		})
	}
}

// runLSM runs the load on s; cold, if not nil, is the regional tier behind
// it, whose calls during DB.Close are reported too.
func runLSM(b *testing.B, s blob.Store, cold *fault.Store) {
	counted := fault.Wrap(s, fault.Options{}) // to count the calls pebble makes
	st := zpebble.New(counted)
	fs := vfs.NewMem()
	t := &testing.T{}
	open := func() *pebble.DB {
		db, err := pebble.Open("db", dbOptions(t, fs, st))
		if err != nil {
			b.Fatal(err)
		}
		if err := db.SetCreatorID(1); err != nil {
			b.Fatal(err)
		}
		return db
	}
	const n, flushes = 100_000, 10
	start := time.Now()
	db := open()
	for i := range n {
		if err := db.Set(key(i), bytes.Repeat([]byte{byte(i)}, 100), pebble.NoSync); err != nil {
			b.Fatal(err)
		}
		if (i+1)%(n/flushes) == 0 {
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := db.Compact(context.Background(), key(0), key(n), false); err != nil {
		b.Fatal(err)
	}
	load := time.Since(start)
	calls := func() (lists, deletes int64) {
		st := counted.Stats()
		return st[fault.OpList].Calls, st[fault.OpDelete].Calls
	}
	coldCalls := func() (n [3]int64) {
		if cold != nil {
			st := cold.Stats()
			n = [3]int64{st[fault.OpList].Calls, st[fault.OpRead].Calls, st[fault.OpStat].Calls}
		}
		return n
	}
	lists0, deletes0 := calls()
	cold0 := coldCalls()
	start = time.Now()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	closing := time.Since(start)
	lists1, deletes1 := calls()
	cold1 := coldCalls()
	db = open()
	defer db.Close()
	start = time.Now()
	for i := range 10_000 {
		_, closer, err := db.Get(key(i * 7 % n))
		if err != nil {
			b.Fatal(err)
		}
		closer.Close()
	}
	gets := time.Since(start)
	start = time.Now()
	it, err := db.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	var scanned int
	for it.First(); it.Valid(); it.Next() {
		scanned++
	}
	if err := it.Close(); err != nil {
		b.Fatal(err)
	}
	if scanned != n {
		b.Fatal(fmt.Sprintf("scanned %d keys, want %d", scanned, n))
	}
	scan := time.Since(start)
	b.ReportMetric(load.Seconds(), "load-s")
	b.ReportMetric(closing.Seconds(), "close-s")
	b.ReportMetric(float64(lists1-lists0), "close-lists")
	b.ReportMetric(float64(deletes1-deletes0), "close-deletes")
	if cold != nil {
		b.ReportMetric(float64(cold1[0]-cold0[0]), "close-cold-lists")
		b.ReportMetric(float64(cold1[1]-cold0[1]), "close-cold-reads")
		b.ReportMetric(float64(cold1[2]-cold0[2]), "close-cold-stats")
	}
	b.ReportMetric(float64(gets.Microseconds())/10_000, "get-us")
	b.ReportMetric(scan.Seconds(), "scan-s")
}
