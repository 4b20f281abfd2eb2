package pool

import (
	"fmt"
	"strings"
	"time"
)

// histogramBounds are the upper bounds of the histogram buckets, chosen for
// storage latencies from a fraction of a millisecond to seconds.
var histogramBounds = []time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
	5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
}

// Histogram counts durations in fixed buckets. The zero value is empty.
type Histogram struct {
	Counts [18]int64 // Counts[i] <= histogramBounds[i]; the last is the overflow
	N      int64
	Sum    time.Duration
	Max    time.Duration
}

// Add records one duration.
func (h *Histogram) Add(d time.Duration) {
	i := 0
	for i < len(histogramBounds) && d > histogramBounds[i] {
		i++
	}
	h.Counts[i]++
	h.N++
	h.Sum += d
	h.Max = max(h.Max, d)
}

// Mean returns the average duration.
func (h Histogram) Mean() time.Duration {
	if h.N == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.N)
}

// Quantile returns the upper bound of the bucket holding the q-quantile.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := int64(q*float64(h.N-1)) + 1
	var seen int64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank {
			if i < len(histogramBounds) {
				return min(histogramBounds[i], h.Max)
			}
			return h.Max
		}
	}
	return h.Max
}

func (h Histogram) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "n=%d mean=%v p50<=%v p99<=%v max=%v", h.N, h.Mean(), h.Quantile(0.5), h.Quantile(0.99), h.Max)
	return b.String()
}
