package bench

import (
	"fmt"
	"math"
)

// Comparison is a write path and the one a user would otherwise use.
type Comparison struct{ Path, Baseline string }

// Comparisons are the pairs a full run reports as speedups.
var Comparisons = []Comparison{
	{"zonalblob-put", "gocloud-zonal"},
	{"zonalblob-create-pooled", "gocloud-zonal"},
	{"zonalblob-create-pooled", "gocloud-regional"},
	{"s3express-put", "s3-standard-put"},
	{"azpremium-put", "azure-hot-put"},
}

// Speedup is how many times faster Path is than Baseline at one size.
type Speedup struct {
	Comparison
	Size     int
	P50, P99 float64
}

// Speedups returns the speedup of every comparison whose two rows were
// measured at the same size with successful operations.
func Speedups(results []Result) []Speedup {
	find := func(name string, size int) (Result, bool) {
		for _, r := range results {
			if r.Scenario == name && r.Size == size && r.P50 > 0 && r.P99 > 0 {
				return r, true
			}
		}
		return Result{}, false
	}
	var out []Speedup
	var sizes []int
	for _, r := range results {
		sizes = appendUnique(sizes, r.Size)
	}
	for _, size := range sizes {
		for _, c := range Comparisons {
			p, ok1 := find(c.Path, size)
			b, ok2 := find(c.Baseline, size)
			if ok1 && ok2 {
				out = append(out, Speedup{c, size, float64(b.P50) / float64(p.P50), float64(b.P99) / float64(p.P99)})
			}
		}
	}
	return out
}

func appendUnique(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Times words a ratio of a baseline's latency to a path's: "1.5x faster"
// above 1, "2.0x slower" below (the inverse ratio, so that a slower path
// never reads as a fraction of "faster"), "as fast" when it rounds to 1.0x.
func Times(ratio float64) string {
	switch {
	case !(ratio > 0) || math.IsInf(ratio, 0):
		return "not comparable"
	case fmt.Sprintf("%.1f", ratio) == "1.0" || fmt.Sprintf("%.1f", 1/ratio) == "1.0":
		return "as fast"
	case ratio > 1:
		return fmt.Sprintf("%.1fx faster", ratio)
	}
	return fmt.Sprintf("%.1fx slower", 1/ratio)
}

// String is the speedup as a report line: "zonalblob-put 10B: 1.9x faster
// than gocloud-zonal at p50, 2.0x slower at p99".
func (s Speedup) String() string {
	p50 := Times(s.P50)
	than := " than "
	if p50 == "as fast" || p50 == "not comparable" {
		than = " as "
		if p50 == "not comparable" {
			than = " with "
		}
	}
	return fmt.Sprintf("%s %s: %s%s%s at p50, %s at p99", s.Path, SizeString(s.Size), p50, than, s.Baseline, Times(s.P99))
}
