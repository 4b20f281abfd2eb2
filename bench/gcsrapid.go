package bench

import (
	"context"
	"fmt"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob/gcsblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// GCSRapidConfig configures the GCS Rapid scenarios.
type GCSRapidConfig struct {
	Profile string  // gcsrapidtest profile name; default "rapid"
	Sizes   []int   // object sizes; default 10 B and 1 MiB
	Ops     int     // measured operations per scenario; default 300
	Rate    float64 // offered load per second (open loop); default 200
	// Bandwidth caps the offered bytes per second, so large objects are
	// offered at a rate the emulator on a small machine can carry (else
	// the table measures queueing, not the backend). Default 32 MiB/s.
	Bandwidth float64
	Seed      uint64
	// Progress, if set, is told each scenario's name as it starts.
	Progress func(scenario string)
}

// GCSRapid compares three ways to write a small object to a GCS Rapid bucket,
// on the same emulator and profile:
//
//   - gocloud-zonal: gocloud.dev's gcsblob in zonal mode, the peer a user would
//     pick today: create, write and finalize per object.
//   - zonalblob-put: our Put: create and flush, never finalize.
//   - zonalblob-create: our pooled Create: one flush into a pre-created object.
func GCSRapid(ctx context.Context, cfg GCSRapidConfig) ([]Result, error) {
	if cfg.Profile == "" {
		cfg.Profile = "rapid"
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{10, 1 << 20}
	}
	if cfg.Ops == 0 {
		cfg.Ops = 300
	}
	if cfg.Rate == 0 {
		cfg.Rate = 200
	}
	if cfg.Bandwidth == 0 {
		cfg.Bandwidth = 32 << 20
	}
	profile, err := gcsrapidtest.ProfileByName(cfg.Profile)
	if err != nil {
		return nil, err
	}
	srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
		Profile: profile, Seed: cfg.Seed, Buckets: []gcsrapidtest.Bucket{{Name: "bench", Zonal: true}},
		MaxBytes: 4 << 30, // every object written stays in memory
	})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	client, err := srv.Client(ctx, storage.WithDisabledClientMetrics())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	peer, err := gcsblob.OpenBucketGRPC(client, "bench", nil)
	if err != nil {
		return nil, err
	}
	defer peer.Close()
	store, err := gcsrapid.New(client, "bench", gcsrapid.Options{
		PoolSize: 512, PoolMinIdle: 8, LoadConcurrency: 64,
	})
	if err != nil {
		return nil, err
	}
	defer store.Close()

	var results []Result
	for _, size := range cfg.Sizes {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i)
		}
		prefix := fmt.Sprintf("size-%d/", size)
		rate := cfg.Rate
		if size > 0 {
			rate = min(rate, cfg.Bandwidth/float64(size))
		}
		ops := cfg.Ops
		if size >= 64<<10 {
			ops = min(ops, 150)
		}
		scenarios := []struct {
			name string
			op   func(ctx context.Context, i int) error
		}{
			{"gocloud-zonal", func(ctx context.Context, i int) error {
				return peer.WriteAll(ctx, fmt.Sprintf("%speer/%06d", prefix, i), data, nil)
			}},
			{"zonalblob-put", func(ctx context.Context, i int) error {
				return blob.Put(ctx, store, fmt.Sprintf("%sput/%06d", prefix, i), data, nil)
			}},
			{"zonalblob-create", func(ctx context.Context, i int) error {
				_, err := blob.CreateBytes(ctx, store, prefix+"create/", data, nil)
				return err
			}},
		}
		for _, sc := range scenarios {
			if cfg.Progress != nil {
				cfg.Progress(fmt.Sprintf("%s %s", sc.name, sizeString(size)))
			}
			// Warm up: connections, and for the pool, its measure of the
			// drain rate and the spares that follow from it.
			warm := max(ops/3, int(rate))
			OpenLoop(ctx, rate, warm, sc.op)
			before := srv.Stats()
			lat, errs := OpenLoop(ctx, rate, ops, sc.op)
			after := srv.Stats()
			r := Result{Scenario: sc.name, Profile: profile.Name, Size: size, Rate: rate, Errors: errs}
			Summarize(&r, lat)
			if r.Ops > 0 {
				r.RequestsPerOp = float64(rpcs(after)-rpcs(before)) / float64(r.Ops+errs)
			}
			if sc.name == "zonalblob-create" {
				// Pool refills are off the critical path but still requests.
				r.Scenario = sc.name + " (pooled)"
			}
			results = append(results, r)
		}
	}
	return results, nil
}

func rpcs(s gcsrapidtest.Stats) int64 {
	var n int64
	for _, c := range s.Calls {
		n += c
	}
	return n
}
