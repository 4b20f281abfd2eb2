package bench

import (
	"bytes"
	"image/png"
	"math"
	"testing"
	"time"
)

// TestTailAxis checks that the fraction axis labels the tail quantiles as
// far as the samples reach, and spaces p90, p99 and p99.9 evenly, so that a
// p99.9 that differs from the p99 shows.
func TestTailAxis(t *testing.T) {
	for _, tc := range []struct {
		samples int
		want    []string
	}{
		{20, []string{"0", "p50", "p90", "max"}},
		{1000, []string{"0", "p50", "p90", "p99", "p99.9", "max"}},
		{20000, []string{"0", "p50", "p90", "p99", "p99.9", "p99.99", "max"}},
	} {
		s := newTailScale(tc.samples)
		var labels []string
		pos := map[string]float64{}
		prev := -1.0
		for _, tk := range s.Ticks(0, 1) {
			n := s.Normalize(0, 1, tk.Value)
			if n <= prev || n < 0 || n > 1 {
				t.Errorf("%d samples: tick %v at %v after %v: not increasing within [0, 1]", tc.samples, tk.Value, n, prev)
			}
			prev = n
			if tk.Label != "" {
				labels = append(labels, tk.Label)
				pos[tk.Label] = n
			}
		}
		if len(labels) != len(tc.want) {
			t.Errorf("%d samples: labels %q, want %q", tc.samples, labels, tc.want)
			continue
		}
		for i := range labels {
			if labels[i] != tc.want[i] {
				t.Errorf("%d samples: labels %q, want %q", tc.samples, labels, tc.want)
				break
			}
		}
		if pos["max"] != 1 || pos["0"] != 0 {
			t.Errorf("%d samples: 0 at %v, max at %v; want the ends of the axis", tc.samples, pos["0"], pos["max"])
		}
		if p999, ok := pos["p99.9"]; ok {
			a, b := pos["p99"]-pos["p90"], p999-pos["p99"]
			if math.Abs(a-b) > 1e-9 || a < 0.15 {
				t.Errorf("%d samples: p90 to p99 spans %v of the axis, p99 to p99.9 %v; want the same, and room to read", tc.samples, a, b)
			}
		}
	}
}

func TestWritePlotTailAxis(t *testing.T) {
	lat := make([]time.Duration, 2000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, []Result{{Scenario: "a", Size: 10, Profile: "zero", Latencies: lat}}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
}
