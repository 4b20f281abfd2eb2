package regional_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/regional"
)

// BenchmarkOverhead measures what blob/regional adds to gocloud for a 1 KiB
// Put and Get on mem://. Each iteration does the same operation through both,
// interleaved, so machine noise hits both alike; the metric to read is the
// ratio of medians (target below 1.10).
//
//	go test -run '^$' -bench Overhead -benchtime 20000x ./blob/regional/
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	data := make([]byte, 1024)
	for _, op := range []string{"Put", "Get"} {
		b.Run(op, func(b *testing.B) {
			bucket := memblob.OpenBucket(nil)
			defer bucket.Close()
			store := regional.New(memblob.OpenBucket(nil), regional.Options{LocalPreconditions: true})
			defer store.Close()
			if err := bucket.WriteAll(ctx, "k", data, nil); err != nil {
				b.Fatal(err)
			}
			if err := blob.Put(ctx, store, "k", data, nil); err != nil {
				b.Fatal(err)
			}
			var direct, ours []time.Duration
			for i := 0; b.Loop(); i++ {
				key := "k"
				if op == "Put" {
					key = fmt.Sprintf("k%d", i%1000)
				}
				// Alternate which goes first, so neither always runs on a warmer cache.
				oursFirst := i%2 == 1
				t0 := time.Now()
				if err := runOp(ctx, oursFirst, bucket, store, op, key, data); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := runOp(ctx, !oursFirst, bucket, store, op, key, data); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if oursFirst {
					ours, direct = append(ours, t1.Sub(t0)), append(direct, t2.Sub(t1))
				} else {
					direct, ours = append(direct, t1.Sub(t0)), append(ours, t2.Sub(t1))
				}
			}
			// Medians: a GC pause that lands on one side must not decide the ratio.
			d, o := median(direct), median(ours)
			b.ReportMetric(float64(d.Nanoseconds()), "gocloud-p50-ns")
			b.ReportMetric(float64(o.Nanoseconds()), "regional-p50-ns")
			b.ReportMetric(float64(o)/float64(d), "p50-ratio")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func runOp(ctx context.Context, ours bool, b *gcblob.Bucket, s blob.Store, op, key string, data []byte) error {
	if ours {
		return storeOp(ctx, s, op, key, data)
	}
	return gocloudOp(ctx, b, op, key, data)
}

func gocloudOp(ctx context.Context, b *gcblob.Bucket, op, key string, data []byte) error {
	if op == "Put" {
		return b.WriteAll(ctx, key, data, nil)
	}
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}

func storeOp(ctx context.Context, s blob.Store, op, key string, data []byte) error {
	if op == "Put" {
		return blob.Put(ctx, s, key, data, nil)
	}
	r, err := s.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(io.Discard, r)
	return err
}
