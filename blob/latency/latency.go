// Package latency models the delay of one storage operation as a seeded,
// reproducible distribution fitted to a published median and 99th percentile.
//
// Emulators and wrappers use it so that a benchmark shows what a user of the
// real service would see, and the same seed replays the same delays.
package latency

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// z99 is the standard normal quantile at 0.99.
const z99 = 2.3263478740408408

// Dist is a log-normal delay fitted to a median (P50) and a 99th percentile (P99).
// The zero Dist means no delay. P99 below P50 is treated as equal to P50 (a fixed delay).
// Source says where the numbers come from, so every profile can be traced to a publication.
type Dist struct {
	P50    time.Duration
	P99    time.Duration
	Source string
}

// The profiles the composites' benchmarks put behind every call of a store
// standing for a zonal bucket and for a regional one.
var (
	ZonalBucket = Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond,
		Source: "zonal bucket: pooled write+flush 2-3 ms (DESIGN.md, seed blog)"}
	RegionalBucket = Dist{P50: 20 * time.Millisecond, P99: 40 * time.Millisecond,
		Source: "regional bucket: get p50 18 ms, p99 37 ms (DESIGN.md, log spike report)"}
)

// Fixed returns a Dist that always yields d.
func Fixed(d time.Duration) Dist { return Dist{P50: d, P99: d} }

// IsZero reports whether the distribution never delays.
func (d Dist) IsZero() bool { return d.P50 <= 0 && d.P99 <= 0 }

// Quantile returns the q-quantile (0 < q < 1) of the distribution.
func (d Dist) Quantile(q float64) time.Duration {
	if d.IsZero() {
		return 0
	}
	mu, sigma := d.params()
	return time.Duration(math.Exp(mu + sigma*math.Sqrt2*math.Erfinv(2*q-1)))
}

func (d Dist) params() (mu, sigma float64) {
	p50 := float64(max(d.P50, 1))
	p99 := float64(max(d.P99, d.P50, 1))
	return math.Log(p50), math.Log(p99/p50) / z99
}

// Scale returns the distribution with both quantiles multiplied by f.
func (d Dist) Scale(f float64) Dist {
	d.P50 = time.Duration(float64(d.P50) * f)
	d.P99 = time.Duration(float64(d.P99) * f)
	return d
}

// Sampler draws delays from distributions with one seeded generator.
// It is safe for concurrent use; draws are serialized so a single-goroutine
// caller replays exactly the same sequence for the same seed.
type Sampler struct {
	mu sync.Mutex
	r  *rand.Rand
}

// NewSampler returns a Sampler seeded with seed.
func NewSampler(seed uint64) *Sampler {
	return &Sampler{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Sample draws one delay from d.
func (s *Sampler) Sample(d Dist) time.Duration {
	if d.IsZero() {
		return 0
	}
	mu, sigma := d.params()
	s.mu.Lock()
	n := s.r.NormFloat64()
	s.mu.Unlock()
	if d.P99 <= d.P50 {
		// A fixed delay, returned exactly (exp(log(x)) can miss by a
		// nanosecond); the draw above still happens, so that a seed replays
		// the same sequence whatever mix of distributions it serves.
		return d.P50
	}
	return time.Duration(math.Exp(mu + sigma*n))
}

// Float64 returns a uniform draw in [0, 1) from the same seeded stream.
func (s *Sampler) Float64() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Float64()
}

// Sleep waits for d or until ctx is done, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
