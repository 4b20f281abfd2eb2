package bench

import (
	"context"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/quorum"
)

// runQuorum measures pooled creates on a 2-of-3 quorum of GCS Rapid zones,
// healthy and with one zone slowed by SlowZone: the pool (pool.Creator)
// prewarms each name on every zone, so a create is one flush to each, and
// the quorum acknowledges at the second. Compare with zonalblob-create-pooled
// on a single zone.
func runQuorum(ctx context.Context, env *Env) error {
	z, err := gcsRapidZones(ctx, env, 3)
	if err != nil {
		return err
	}
	defer z.Close()
	for _, slow := range []bool{false, true} {
		var zones []blob.Store
		for _, s := range z.Stores(slow) {
			zones = append(zones, keepZone{s})
		}
		q, err := quorum.New(zones, quorum.Options{W: 2})
		if err != nil {
			return err
		}
		c, err := pool.NewCreator(q, pool.CreatorOptions{Capacity: 512, MinIdle: 8, LoadConcurrency: 64})
		if err != nil {
			q.Close()
			return err
		}
		name := "quorum-2of3-create-pooled"
		if slow {
			name += "-one-slow-zone"
		}
		env.Measure(ctx, Path{Name: name, Profile: z.ProfileLabel(slow), Requests: z.Requests,
			Write: func(ctx context.Context, _ int, data []byte) error {
				_, err := blob.CreateBytes(ctx, c, "bench/", data, nil)
				return err
			}})
		c.Close()
	}
	return nil
}

// keepZone leaves a zone open when the quorum over it closes (the next round
// reuses the zones; z.Close closes them) and keeps its native prewarm.
type keepZone struct{ blob.Store }

func (keepZone) Close() error { return nil }

func (k keepZone) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	return blob.Prewarm(ctx, k.Store, key, opts)
}
