package latency

import (
	"slices"
	"testing"
	"time"
)

func TestSampleMatchesFittedQuantiles(t *testing.T) {
	d := Dist{P50: 20 * time.Millisecond, P99: 33 * time.Millisecond}
	s := NewSampler(1)
	const n = 20000
	xs := make([]time.Duration, n)
	for i := range xs {
		xs[i] = s.Sample(d)
	}
	slices.Sort(xs)
	within := func(got, want time.Duration) bool {
		return float64(got) > 0.95*float64(want) && float64(got) < 1.05*float64(want)
	}
	if p50 := xs[n/2]; !within(p50, d.P50) {
		t.Errorf("p50 = %v, want about %v", p50, d.P50)
	}
	if p99 := xs[n*99/100]; !within(p99, d.P99) {
		t.Errorf("p99 = %v, want about %v", p99, d.P99)
	}
	if q := d.Quantile(0.99); !within(q, d.P99) {
		t.Errorf("Quantile(0.99) = %v, want about %v", q, d.P99)
	}
}

func TestSameSeedSameSequence(t *testing.T) {
	d := Dist{P50: time.Millisecond, P99: 5 * time.Millisecond}
	a, b := NewSampler(42), NewSampler(42)
	for i := range 100 {
		if x, y := a.Sample(d), b.Sample(d); x != y {
			t.Fatalf("draw %d: %v != %v", i, x, y)
		}
	}
}

func TestZeroAndFixed(t *testing.T) {
	s := NewSampler(1)
	if got := s.Sample(Dist{}); got != 0 {
		t.Errorf("zero dist sampled %v", got)
	}
	for _, d := range []time.Duration{time.Nanosecond, 3 * time.Millisecond, 20 * time.Millisecond, 150 * time.Millisecond, time.Hour} {
		if got := s.Sample(Fixed(d)); got != d {
			t.Errorf("Fixed(%v) sampled %v", d, got)
		}
	}
}
