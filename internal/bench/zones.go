package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// SlowZone is the extra delay of every write and commit in the slow zone of
// a quorum scenario. An assumption, not a published figure: a zone under
// load or partly degraded, its median several times a healthy Rapid
// metadata operation and its tail far beyond, so that a 2-of-3 quorum has
// to hide it.
var SlowZone = latency.Dist{P50: 150 * time.Millisecond, P99: 400 * time.Millisecond,
	Source: "assumption: a degraded zone, p50 150 ms / p99 400 ms added to each write and commit"}

// zones are the zonal buckets a quorum writes to, one GCS Rapid emulator
// per zone with the rapid profile (each its own seed), for the quorum and
// tiered scenarios.
type zones struct {
	Profile string
	servers []*gcsServer
	stores  []*gcsrapid.Store
	seed    uint64
}

// gcsRapidZones starts n zones.
func gcsRapidZones(ctx context.Context, env *Env, n int) (*zones, error) {
	z := &zones{seed: env.Seed}
	for i := range n {
		zoneEnv := *env
		zoneEnv.Seed = env.Seed + uint64(i)*7919 // zones do not stall in step
		g, err := startGCS(ctx, &zoneEnv, "rapid", gcsrapidtest.Bucket{Name: "bench", Zonal: true})
		if err != nil {
			z.Close()
			return nil, err
		}
		z.servers = append(z.servers, g)
		z.Profile = g.profile
		// Append streams are pipelined, as OpenURL opens them.
		s, err := gcsrapid.New(ctx, g.client, "bench", gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 512, MinIdle: 8, LoadConcurrency: 64},
			StreamDial: gcsrapid.EmulatorStreamDial(g.srv.Endpoint())})
		if err != nil {
			z.Close()
			return nil, err
		}
		z.stores = append(z.stores, s)
	}
	return z, nil
}

// Stores returns the zones' stores; with slow, the first is behind a fault
// wrapper that adds SlowZone to its writes and commits.
func (z *zones) Stores(slow bool) []blob.Store {
	out := make([]blob.Store, len(z.stores))
	for i, s := range z.stores {
		out[i] = s
	}
	if slow && len(out) > 0 {
		f := fault.Wrap(out[0], fault.Options{Seed: z.seed, Name: "slow zone"})
		for _, op := range []fault.Op{fault.OpWrite, fault.OpCommit} {
			f.AddLatency(op, SlowZone)
		}
		out[0] = f
	}
	return out
}

// Requests counts the RPCs every zone has answered.
func (z *zones) Requests() int64 {
	var n int64
	for _, g := range z.servers {
		n += g.Requests()
	}
	return n
}

// ProfileLabel names the profile of a row over these zones.
func (z *zones) ProfileLabel(slow bool) string {
	if slow {
		return fmt.Sprintf("%s, one zone +%v", z.Profile, SlowZone.P50)
	}
	return z.Profile
}

func (z *zones) Close() {
	for _, s := range z.stores {
		s.Close()
	}
	for _, g := range z.servers {
		g.Close()
	}
}
