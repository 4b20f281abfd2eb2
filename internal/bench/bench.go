// Package bench runs zonalblob's latency scenarios against in-process
// emulators with published latency profiles, so anyone can see, in one
// command, what a backend and a write path cost. Figures are emulator figures
// modelled on published numbers, not cloud measurements; every result names
// the profile it ran.
//
// A scenario is a named entry in the registry (see Scenarios): a function
// that starts its emulators, builds the stores to compare and measures each
// one's write path with Env.Measure under the run's Load.
package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Result is the latency distribution of one row: one write path of one
// scenario at one object size.
type Result struct {
	// Scenario names the row's write path, e.g. "zonalblob-create-pooled";
	// Group is the registry entry that measured it, e.g. "gcsrapid".
	Scenario string        `json:"scenario"`
	Group    string        `json:"group,omitempty"`
	Profile  string        `json:"profile"`
	Size     int           `json:"size_bytes"`
	Mode     Mode          `json:"mode"`
	Ops      int           `json:"ops"`
	Errors   int           `json:"errors"`
	Rate     float64       `json:"offered_per_s"` // offered load (open loop); 0 in closed loop
	Workers  int           `json:"concurrency"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// Throughput is the completed operations per second over Elapsed.
	Throughput float64       `json:"throughput_per_s"`
	P50        time.Duration `json:"p50_ns"`
	P90        time.Duration `json:"p90_ns"`
	P99        time.Duration `json:"p99_ns"`
	P999       time.Duration `json:"p999_ns"`
	// RequestsPerOp is the server's count of requests per operation, pool
	// refills included, where the emulator counts them (0 if unknown).
	RequestsPerOp float64 `json:"requests_per_op"`
	// Latencies are the raw samples of successful operations, sorted.
	Latencies []time.Duration `json:"latencies_ns"`
	// FirstError is the first failure's message, so a row with errors says why.
	FirstError string `json:"first_error,omitempty"`
	// Log is set on commit-log rows, whose operations are appends of
	// Size-byte records.
	Log *LogFigures `json:"log,omitempty"`
}

// Label names the row in tables and plots.
func (r Result) Label() string { return r.Scenario + " " + SizeString(r.Size) }

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
	if r.Elapsed > 0 {
		r.Throughput = float64(r.Ops) / r.Elapsed.Seconds()
	}
}

// WriteTable prints the write rows of results (not the commit-log rows: see
// WriteLogTable) as an aligned table.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsize\tprofile\tops\toffered/s\tdone/s\tMiB/s\tp50\tp90\tp99\tp99.9\treq/op\terrors\t")
	for _, r := range results {
		if r.Log != nil {
			continue
		}
		req := "-"
		if r.RequestsPerOp > 0 {
			req = fmt.Sprintf("%.1f", r.RequestsPerOp)
		}
		offered := "closed"
		if r.Mode == ModeOpen {
			offered = fmt.Sprintf("%.0f", r.Rate)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Scenario, SizeString(r.Size), r.Profile, r.Ops, offered,
			r.Throughput, r.Throughput*float64(r.Size)/(1<<20), ms(r.P50), ms(r.P90), ms(r.P99), ms(r.P999), req, r.Errors)
	}
	return tw.Flush()
}

// WriteLogTable prints the commit-log rows of results as an aligned table:
// acknowledged appends per second, append latency, reader lag, records per
// flush and requests per append (the tailing reader's included).
func WriteLogTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "log\trecord\tprofile\tload\tappends\tappends/s\tMiB/s\tp50\tp99\traw p50\traw p99\tp50/raw\tp99/raw\tfloor p50/raw\tfloor p99/raw\tlag p50\tlag p99\trecords/flush\treq/append\terrors\t")
	for _, r := range results {
		if r.Log == nil {
			continue
		}
		perFlush := "-"
		if r.Log.RecordsPerFlush > 0 {
			perFlush = fmt.Sprintf("%.1f", r.Log.RecordsPerFlush)
		}
		load := fmt.Sprintf("%d appenders", r.Workers)
		if r.Mode == ModeOpen {
			load = fmt.Sprintf("%.0f/s offered", r.Rate)
		}
		rawP50, rawP99, r50, r99, f50, f99 := "-", "-", "-", "-", "-", "-"
		if r.Log.RawP50 > 0 {
			rawP50, rawP99 = ms(r.Log.RawP50), ms(r.Log.RawP99)
			r50 = fmt.Sprintf("%.2fx", float64(r.P50)/float64(r.Log.RawP50))
			r99 = fmt.Sprintf("%.2fx", float64(r.P99)/float64(r.Log.RawP99))
			if r.Log.FloorP50 > 0 {
				f50 = fmt.Sprintf("%.2fx", float64(r.Log.FloorP50)/float64(r.Log.RawP50))
				f99 = fmt.Sprintf("%.2fx", float64(r.Log.FloorP99)/float64(r.Log.RawP99))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t\n", r.Scenario, SizeString(r.Size), r.Profile, load, r.Ops, r.Throughput,
			r.Throughput*float64(r.Size)/(1<<20), ms(r.P50), ms(r.P99), rawP50, rawP99, r50, r99, f50, f99, ms(r.Log.LagP50), ms(r.Log.LagP99), perFlush, r.RequestsPerOp, r.Errors)
	}
	return tw.Flush()
}

// HasRows says whether results hold write rows (log false) or commit-log
// rows (log true).
func HasRows(results []Result, log bool) bool {
	return slices.ContainsFunc(results, func(r Result) bool { return (r.Log != nil) == log })
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// SizeString renders a byte count as 10B, 4KiB or 1MiB.
func SizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
