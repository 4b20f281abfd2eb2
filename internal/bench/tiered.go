package bench

import (
	"context"
	"time"

	"gocloud.dev/blob/gcsblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/tiered"
)

// runTiered measures pooled creates into a tiered store whose compactor
// moves objects to a regional bucket while the writes run: hot is a GCS
// Rapid zone (rapid profile), cold a regional bucket through gocloud's
// gcsblob (regional profile). The row shows what tiering adds to the write
// path: compare it with zonalblob-create-pooled.
func runTiered(ctx context.Context, env *Env) error {
	z, err := gcsRapidZones(ctx, env, 1)
	if err != nil {
		return err
	}
	defer z.Close()
	g, err := startGCS(ctx, env, "regional", gcsrapidtest.Bucket{Name: "cold"})
	if err != nil {
		return err
	}
	defer g.Close()
	b, err := gcsblob.OpenBucketGRPC(g.client, "cold", nil)
	if err != nil {
		return err
	}
	t, err := tiered.New(z.stores[0], regional.New(b, regional.Options{}), tiered.Options{
		After: 500 * time.Millisecond, Interval: 100 * time.Millisecond, Concurrency: 16,
	})
	if err != nil {
		return err
	}
	defer t.Close()
	requests := func() int64 { return z.Requests() + g.Requests() }
	profile := z.Profile
	if g.profile != profile {
		profile += " → " + g.profile
	}
	env.Measure(ctx, Path{Name: "tiered-create-pooled", Profile: profile, Requests: requests,
		Write: func(ctx context.Context, _ int, data []byte) error {
			_, err := blob.CreateBytes(ctx, t, "bench/", data, nil)
			return err
		}})
	return nil
}
