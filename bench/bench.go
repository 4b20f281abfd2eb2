// Package bench runs zonalblob's latency scenarios against in-process
// emulators with published latency profiles, so anyone can see, in one
// command, what a backend and a write path cost. Figures are emulator figures
// modelled on published numbers, not cloud measurements; every result names
// the profile it ran.
package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"
)

// Result is the latency distribution of one scenario.
type Result struct {
	Scenario string        `json:"scenario"`
	Profile  string        `json:"profile"`
	Size     int           `json:"size_bytes"`
	Ops      int           `json:"ops"`
	Errors   int           `json:"errors"`
	Rate     float64       `json:"rate_per_s"` // offered load (open loop)
	P50      time.Duration `json:"p50_ns"`
	P90      time.Duration `json:"p90_ns"`
	P99      time.Duration `json:"p99_ns"`
	P999     time.Duration `json:"p999_ns"`
	// RequestsPerOp is the server's count of RPCs per operation, where the
	// emulator counts them (0 if unknown).
	RequestsPerOp float64 `json:"requests_per_op"`
	// Latencies are the raw samples, for plots.
	Latencies []time.Duration `json:"-"`
}

// Quantile returns the q-quantile of sorted samples (nearest rank).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Summarize fills r's quantiles and Ops from the latencies lat (sorted in place).
func Summarize(r *Result, lat []time.Duration) {
	slices.Sort(lat)
	r.Latencies = lat
	r.Ops = len(lat)
	r.P50, r.P90, r.P99, r.P999 = Quantile(lat, 0.5), Quantile(lat, 0.9), Quantile(lat, 0.99), Quantile(lat, 0.999)
}

// OpenLoop calls op n times at a fixed rate, each call in its own goroutine,
// and measures each latency from its intended start, so that a stall delays
// every call scheduled behind it instead of hiding (coordinated omission).
func OpenLoop(ctx context.Context, rate float64, n int, op func(ctx context.Context, i int) error) (lat []time.Duration, errs int) {
	lat = make([]time.Duration, n)
	failed := make([]bool, n)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				n = i
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			err := op(ctx, i)
			lat[i] = time.Since(due)
			failed[i] = err != nil
		})
	}
	wg.Wait()
	out := lat[:0]
	for i := range n {
		if failed[i] {
			errs++
			continue
		}
		out = append(out, lat[i])
	}
	return out, errs
}

// WriteTable prints results as an aligned table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsize\tprofile\tops\trate/s\tp50\tp90\tp99\tp99.9\treq/op\terrors\t")
	for _, r := range results {
		req := "-"
		if r.RequestsPerOp > 0 {
			req = fmt.Sprintf("%.1f", r.RequestsPerOp)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Scenario, sizeString(r.Size), r.Profile, r.Ops, r.Rate,
			ms(r.P50), ms(r.P90), ms(r.P99), ms(r.P999), req, r.Errors)
	}
	return tw.Flush()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
