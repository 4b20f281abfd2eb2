package regional_test

import (
	"context"
	"fmt"
	"io"
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
// ratio (target below 1.10).
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
			var direct, ours time.Duration
			for i := 0; b.Loop(); i++ {
				key := "k"
				if op == "Put" {
					key = fmt.Sprintf("k%d", i%1000)
				}
				// Alternate which goes first, so neither always runs on a warmer cache.
				first, second := &direct, &ours
				if i%2 == 1 {
					first, second = second, first
				}
				t0 := time.Now()
				if err := runOp(ctx, i%2 == 1, bucket, store, op, key, data); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := runOp(ctx, i%2 == 0, bucket, store, op, key, data); err != nil {
					b.Fatal(err)
				}
				*first += t1.Sub(t0)
				*second += time.Since(t1)
			}
			b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "gocloud-ns/op")
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "regional-ns/op")
			b.ReportMetric(float64(ours)/float64(direct), "ratio")
		})
	}
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
