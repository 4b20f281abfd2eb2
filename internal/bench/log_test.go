package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/internal/emulators"
)

// The log scenario, tiny: zero profile, 40 appends per row. Every row has
// its appends, each acknowledged append read back by the tailing reader
// (one lag sample per append), and figures taken from its own samples.
func TestLogScenario(t *testing.T) {
	env := testEnv(10, 64<<10) // object sizes do not change the log's rows
	env.Load.Concurrency = 4
	env.Load.MaxOps = 40
	env.Load.Duration = time.Minute // the op count ends each row
	rep, err := Run(context.Background(), env, []Scenario{logScenario(t)})
	if err != nil {
		t.Fatal(err)
	}
	azure := !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "Azurite unavailable") })
	want := []string{"bucketlog-slots-regional", "bucketlog-slots-rapid", "commitlog-rapid",
		"commitlog-rapid-2of3", "commitlog-rapid-2of3-one-slow-zone",
		"commitlog-rapid-2of3", "commitlog-rapid-2of3-one-slow-zone", "commitlog-rapid-2of3-unpipelined", "commitlog-rapid-2of3-open",
		"commitlog-rapid-2of3-4stripes", "commitlog-rapid-2of3-4stripes-one-slow-zone", "commitlog-rapid-2of3-4stripes-open",
		"commitlog-rapid-2of3", "commitlog-rapid-2of3-one-slow-zone",
		"commitlog-rapid-2of3-4stripes", "commitlog-rapid-2of3-4stripes-one-slow-zone",
		"commitlog-s3express-2of3"}
	sizes := []int{100, 100, 100, 100, 100, 4 << 10, 4 << 10, 4 << 10, 4 << 10, 4 << 10, 4 << 10, 4 << 10, 64 << 10, 64 << 10, 64 << 10, 64 << 10, 100}
	if azure {
		want = append(want, "commitlog-azpremium-2of3")
		sizes = append(sizes, 100)
	}
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Scenario)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	checkRows(t, rep.Results, len(want))
	for i, r := range rep.Results {
		lf := r.Log
		if lf == nil {
			t.Errorf("%s: no commit-log figures", r.Label())
			continue
		}
		open := strings.HasSuffix(r.Scenario, "-open")
		mode, workers, rate := ModeClosed, 4, 0.0
		if open {
			mode, workers, rate = ModeOpen, 0, LogOpenBytesPerS/LogOpenBytes
		}
		if r.Ops != 40 || r.Size != sizes[i] || lf.RecordBytes != sizes[i] || r.Mode != mode || r.Rate != rate || r.Group != "log" || r.Workers != workers || lf.Appenders != workers {
			t.Errorf("%s: ops %d size %d/%d mode %q rate %v group %q workers %d/%d, want 40 appends of %d B, %s at %v/s, by %d appenders",
				r.Label(), r.Ops, r.Size, lf.RecordBytes, r.Mode, r.Rate, r.Group, r.Workers, lf.Appenders, sizes[i], mode, rate, workers)
		}
		// The quorum rows are compared with one zone's round trip of the
		// same size, measured in the same run.
		if quorum := strings.HasPrefix(r.Scenario, "commitlog-rapid-2of3"); quorum != (lf.RawP50 > 0 && lf.RawP99 >= lf.RawP50) {
			t.Errorf("%s: raw round trip p50 %v p99 %v", r.Label(), lf.RawP50, lf.RawP99)
		}
		// Their closed-loop rows have a floor (the model's figures for
		// the same appenders, size, stripes and quorum).
		if floor := strings.HasPrefix(r.Scenario, "commitlog-rapid-2of3") && !open; floor != (lf.FloorP50 > 0 && lf.FloorP99 >= lf.FloorP50) {
			t.Errorf("%s: floor p50 %v p99 %v", r.Label(), lf.FloorP50, lf.FloorP99)
		}
		if len(lf.Lags) != r.Ops || !slices.IsSorted(lf.Lags) ||
			lf.LagP50 != Quantile(lf.Lags, 0.5) || lf.LagP90 != Quantile(lf.Lags, 0.9) || lf.LagP99 != Quantile(lf.Lags, 0.99) {
			t.Errorf("%s: %d lag samples for %d appends, p50 %v p90 %v p99 %v; want one per append and their quantiles",
				r.Label(), len(lf.Lags), r.Ops, lf.LagP50, lf.LagP90, lf.LagP99)
		}
		slots := strings.HasPrefix(r.Scenario, "bucketlog-slots")
		if slots != (lf.RecordsPerFlush == 0) || (!slots && lf.RecordsPerFlush < 1) {
			t.Errorf("%s: %v records per flush", r.Label(), lf.RecordsPerFlush)
		}
		if r.RequestsPerOp <= 0 && slots {
			t.Errorf("%s: no requests counted for one object per append", r.Label())
		}
	}
	if p := rep.Results[4].Profile; !strings.Contains(p, "one zone +") {
		t.Errorf("slow-zone row's profile %q does not name the delay", p)
	}

	var table bytes.Buffer
	if err := WriteLogTable(&table, rep.Results); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(table.String(), "\n"); n != len(want)+1 {
		t.Errorf("log table has %d lines, want a header and %d rows:\n%s", n, len(want), table.String())
	}
	table.Reset()
	if err := WriteTable(&table, rep.Results); err != nil {
		t.Fatal(err)
	}
	if strings.Count(table.String(), "\n") != 1 {
		t.Errorf("the write table lists commit-log rows:\n%s", table.String())
	}
	if !azure {
		emulators.Unavailable(t, "azurite", &SkipError{Reason: "the azpremium row did not run"})
	}
}

func logScenario(t *testing.T) Scenario {
	t.Helper()
	s, err := SelectScenarios([]string{"log"})
	if err != nil || len(s) != 1 || !s[0].Fixed || s[0].Rows(2) != 18 {
		t.Fatalf("log scenario: %+v, %v", s, err)
	}
	return s[0]
}
