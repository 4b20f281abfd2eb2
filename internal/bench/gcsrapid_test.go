package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// testEnv runs every emulator without delay and few operations.
func testEnv(sizes ...int) *Env {
	l := DefaultLoad()
	l.Rate, l.Duration, l.Warmup = 400, 50*time.Millisecond, 10*time.Millisecond
	return &Env{Load: l, Sizes: sizes, Zero: true, Seed: 1}
}

// checkRows checks that each row of rep ran without errors and that its
// figures are those of its own samples. How large the latencies are is the
// machine's business, not the test's.
func checkRows(t *testing.T, rows []Result, want int) {
	t.Helper()
	if len(rows) != want {
		t.Fatalf("%d rows, want %d: %+v", len(rows), want, rows)
	}
	for _, r := range rows {
		if r.Ops == 0 || r.Errors != 0 || len(r.Latencies) != r.Ops || !slices.IsSorted(r.Latencies) {
			t.Errorf("%s: ops %d errors %d (%s) samples %d, want sorted samples, one per op, and no errors", r.Label(), r.Ops, r.Errors, r.FirstError, len(r.Latencies))
			continue
		}
		lat := r.Latencies
		if r.P50 != Quantile(lat, 0.5) || r.P90 != Quantile(lat, 0.9) || r.P99 != Quantile(lat, 0.99) || r.P999 != Quantile(lat, 0.999) {
			t.Errorf("%s: p50 %v p90 %v p99 %v p999 %v are not the quantiles of its samples", r.Label(), r.P50, r.P90, r.P99, r.P999)
		}
		if r.Elapsed == 0 || r.Throughput != float64(r.Ops)/r.Elapsed.Seconds() {
			t.Errorf("%s: throughput %v is not its %d ops over its %v", r.Label(), r.Throughput, r.Ops, r.Elapsed)
		}
		if !strings.HasPrefix(r.Profile, "zero") {
			t.Errorf("%s: profile %q", r.Label(), r.Profile)
		}
	}
}

func TestEmulatorScenariosRun(t *testing.T) {
	for _, s := range Scenarios() {
		if s.Run == nil || s.Fixed {
			continue // TestLogScenario runs the commit log's
		}
		t.Run(s.Name, func(t *testing.T) {
			env := testEnv(10, 64<<10)
			err := s.Run(context.Background(), env)
			if skip, ok := err.(*SkipError); ok && s.Name == "azure" {
				azureUnavailable(t, skip)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, env.Results(), s.Paths*2)
			for _, r := range env.Results() {
				// A pooled create writes into a stream its pool opened
				// earlier, possibly before the measured window: it may
				// count no request of its own.
				if r.RequestsPerOp <= 0 && !strings.Contains(r.Scenario, "pooled") {
					t.Errorf("%s: no requests counted", r.Label())
				}
				if r.RequestsPerOp < 0 {
					t.Errorf("%s: negative request count", r.Label())
				}
			}
		})
	}
}

// GCSRapid is the entry point of the gcsrapid package's go benchmark.
func TestGCSRapidRunsAFixedNumberOfOps(t *testing.T) {
	var rows []string
	res, err := GCSRapid(context.Background(), GCSRapidConfig{Profile: "zero", Ops: 30, Rate: 500, Sizes: []int{10}, Progress: func(r string) { rows = append(rows, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 || len(rows) != 3 {
		t.Fatalf("%d results, %d progress rows; want 3", len(res), len(rows))
	}
	for _, r := range res {
		if r.Ops != 30 || r.Errors != 0 || r.Profile != "zero" || r.RequestsPerOp < 0 {
			t.Errorf("%s: %+v", r.Label(), r)
		}
		// A pooled create may write into a stream opened before the
		// measured window, so it may count no request of its own.
		if r.RequestsPerOp == 0 && !strings.Contains(r.Scenario, "pooled") {
			t.Errorf("%s: no requests counted", r.Label())
		}
	}
	if _, err := GCSRapid(context.Background(), GCSRapidConfig{Profile: "nosuch"}); err == nil {
		t.Error("unknown profile accepted")
	}
}
