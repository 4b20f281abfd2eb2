package azpremium_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
)

// BenchmarkPut compares a Put through this driver with gocloud's azureblob
// WriteAll, the peer a user would otherwise pick, on one Azurite and one
// latency profile. Each iteration does both, interleaved and alternating
// which goes first, so machine noise hits both alike; read the ratio
// (ours/gocloud, target at most 1.05). The profile is
// ZONALBLOB_AZ_PROFILE: none (default), azpremium or hot; it is part of
// the benchmark's name.
//
//	go test -run '^$' -bench Put -benchtime 400x ./blob/azpremium/
//	ZONALBLOB_AZ_PROFILE=azpremium go test -run '^$' -bench Put -benchtime 200x ./blob/azpremium/
func BenchmarkPut(b *testing.B) {
	srv := azurite(b)
	name := os.Getenv("ZONALBLOB_AZ_PROFILE")
	if name == "" {
		name = "none"
	}
	profile, ok := azuritetest.ByName(name)
	if !ok {
		b.Fatalf("unknown ZONALBLOB_AZ_PROFILE %q", name)
	}
	endpoint := srv.Endpoint()
	if profile.Name != "none" {
		proxy := srv.WithLatency(profile, 1)
		defer proxy.Close()
		endpoint = proxy.Endpoint
	}
	ctx := context.Background()
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%s/%dKiB", profile.Name, size>>10), func(b *testing.B) {
			cname := newContainer(b, srv)
			o := storeOptions(srv)
			o.Endpoint = endpoint
			store, err := azpremium.New(ctx, cname, o)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
			if err != nil {
				b.Fatal(err)
			}
			client, err := container.NewClientWithSharedKeyCredential(endpoint+"/"+cname, cred, nil)
			if err != nil {
				b.Fatal(err)
			}
			bucket, err := azureblob.OpenBucket(ctx, client, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer bucket.Close()
			data := make([]byte, size)
			// Warm both: connections, and Azurite's code paths.
			for i := range 5 {
				if err := put(ctx, true, bucket, store, fmt.Sprintf("w%d", i), data); err != nil {
					b.Fatal(err)
				}
				if err := put(ctx, false, bucket, store, fmt.Sprintf("w%d", i), data); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(size))
			var direct, ours time.Duration
			for i := 0; b.Loop(); i++ {
				first, second := &direct, &ours
				if i%2 == 1 {
					first, second = second, first
				}
				// Distinct keys per client, reused across iterations, so that
				// Azurite's memory stays bounded.
				t0 := time.Now()
				if err := put(ctx, i%2 == 1, bucket, store, fmt.Sprintf("k%d-%d", i%2, i%50), data); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := put(ctx, i%2 == 0, bucket, store, fmt.Sprintf("k%d-%d", (i+1)%2, i%50), data); err != nil {
					b.Fatal(err)
				}
				*first += t1.Sub(t0)
				*second += time.Since(t1)
			}
			b.ReportMetric(float64(direct.Nanoseconds())/float64(b.N), "azureblob-ns/op")
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "azpremium-ns/op")
			b.ReportMetric(float64(ours)/float64(direct), "ratio")
		})
	}
}

func put(ctx context.Context, ours bool, b *gcblob.Bucket, s blob.Store, key string, data []byte) error {
	if ours {
		return blob.Put(ctx, s, "ours/"+key, data, nil)
	}
	return b.WriteAll(ctx, "gocloud/"+key, data, nil)
}
