package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/cost"
	"github.com/zonalblob/zonalblob/internal/bench"
)

// quickBench is a bench command line that runs in well under a second per
// scenario: zero profile, few operations.
func quickBench(out string, args ...string) []string {
	return append([]string{"bench", "--profile", "zero", "--duration", "50ms", "--warmup", "10ms", "--rate", "400", "--out", out}, args...)
}

// readReport checks the three files of a run and returns its report.
func readReport(t *testing.T, dir string) bench.Report {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, benchPlot))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s is not a PNG: %v", benchPlot, err)
	}
	md, err := os.ReadFile(filepath.Join(dir, benchTable))
	if err != nil || !bytes.Contains(md, []byte("p99.9")) || !bytes.Contains(md, []byte("]("+benchPlot+")")) {
		t.Errorf("%s: %v\n%s", benchTable, err, md)
	}
	js, err := os.ReadFile(filepath.Join(dir, benchJSON))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("%s: %v", benchJSON, err)
	}
	return rep
}

func TestBenchRunsEveryScenario(t *testing.T) {
	dir := t.TempDir()
	out := mustZB(t, "", quickBench(dir, "--size", "10,4KiB")...)
	for _, want := range []string{bench.EmulatorNote, "gocloud-zonal", "zonalblob-put", "zonalblob-create-pooled", "gocloud-regional",
		"s3express-put", "s3-standard-put", "p99.9", "req/op", " gocloud-zonal at p50", "quorum-2of3-create-pooled",
		"tiered-create-pooled", "commitlog-rapid-2of3", "bucketlog-slots-regional", "lag p99", "Wrote ", "Cost: list prices"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	azure := !strings.Contains(out, "azure: Azurite unavailable")
	if azure && !strings.Contains(out, "azpremium-put") {
		t.Errorf("Azure neither ran nor said why:\n%s", out)
	}
	rep := readReport(t, dir)
	// Two sizes of every path of every scenario that runs here, and the
	// commit log's rows, which do not depend on the size (its Azure row
	// only where its own Azurite started: each scenario starts one, and on
	// a loaded machine one may start where the other did not, each saying
	// so).
	logAzure := !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "commitlog-azpremium-2of3 not run") })
	want := 0
	for _, sc := range bench.Scenarios() {
		if sc.Run != nil && (sc.Name != "azure" || azure) {
			want += sc.Rows(2)
		}
		if sc.Name == "log" && !logAzure {
			want--
		}
	}
	if len(rep.Results) != want {
		t.Errorf("%d rows in JSON, want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		// The slow-zone row names the delay it adds to one zone; the commit
		// log's appenders run back to back.
		mode := bench.ModeOpen
		if r.Log != nil && !strings.HasSuffix(r.Scenario, "-open") {
			mode = bench.ModeClosed
		}
		if r.Ops == 0 || r.Errors != 0 || !strings.HasPrefix(r.Profile, "zero") || len(r.Latencies) != r.Ops || r.Mode != mode {
			t.Errorf("%s: ops %d errors %d (%s) profile %q samples %d mode %q", r.Label(), r.Ops, r.Errors, r.FirstError, r.Profile, len(r.Latencies), r.Mode)
		}
		if (r.Log != nil) != (r.Group == "log") || (r.Log != nil && len(r.Log.Lags) == 0) {
			t.Errorf("%s: group %q, commit-log figures %+v", r.Label(), r.Group, r.Log)
		}
	}
}

func TestBenchClosedLoop(t *testing.T) {
	dir := t.TempDir()
	out := mustZB(t, "", quickBench(dir, "s3", "--mode", "closed", "--concurrency", "2", "--size", "10")...)
	if !strings.Contains(out, "closed load") || !strings.Contains(out, "closed") {
		t.Errorf("output does not say closed loop:\n%s", out)
	}
	rep := readReport(t, dir)
	if len(rep.Results) != 2 {
		t.Fatalf("%d rows, want 2", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Mode != bench.ModeClosed || r.Workers != 2 || r.Rate != 0 || r.Ops == 0 {
			t.Errorf("%s: mode %q workers %d rate %v ops %d", r.Label(), r.Mode, r.Workers, r.Rate, r.Ops)
		}
	}
}

func TestBenchURLMem(t *testing.T) {
	dir := t.TempDir()
	out := mustZB(t, "", quickBench(dir, "--url", "mem://", "--size", "10,1KiB")...)
	for _, want := range []string{"mem:// Put", "mem:// Create", "live"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if rep := readReport(t, dir); len(rep.Results) != 4 {
		t.Errorf("%d rows, want 4", len(rep.Results))
	}
}

// A URL whose server accepts connections and never answers must fail at
// --timeout, with a message naming the URL and the timeout, not hang: the
// server is reached and stays silent, so only the deadline can end the run.
func TestBenchUnreachableURLFailsWithinTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close()
		}
	}()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	u := "s3://bucket?region=us-east-1&use_path_style=true&endpoint=http://" + l.Addr().String()
	r := zb(t, "", quickBench(t.TempDir(), "--url", u, "--timeout", "300ms")...)
	wantFail(t, r, exitFailed, "cannot write to s3://bucket", "deadline exceeded")
	if accepted.Load() == 0 {
		t.Error("the server was never reached: the failure is not the timeout's")
	}
}

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "nosuch"}, `unknown scenario "nosuch"`},
		{[]string{"bench", "--scenario", "gcsrapid,nosuch"}, `unknown scenario "nosuch"`},
		{[]string{"bench", "--rate", "0"}, `invalid value "0" for flag -rate: "0" is out of range`},
		{[]string{"bench", "--rate", "NaN"}, `-rate: "NaN" is not a decimal number`},
		{[]string{"bench", "--duration", "0s"}, "duration"},
		{[]string{"bench", "--duration", "soon"}, "invalid value"},
		{[]string{"bench", "--concurrency", "0"}, "concurrency 0"},
		{[]string{"bench", "--size", "ten"}, `--size: "ten"`},
		{[]string{"bench", "--size", "65MiB"}, "--size"},
		{[]string{"bench", "--profile", "fast"}, `--profile "fast"`},
		{[]string{"bench", "--mode", "half"}, "--mode"},
		{[]string{"bench", "--url", "mem://", "gcsrapid"}, "takes no scenario"},
		{[]string{"bench", "--nosuchflag"}, "flag provided but not defined"},
		{[]string{"bench", "--cost-size", "big"}, `-cost-size: "big" is not a size: a size is a whole number of bytes`},
		{[]string{"bench", "--cost-retention", "xd"}, `-cost-retention: "xd" is not a duration`},
		{[]string{"bench", "--cost-hot", "60d"}, "hot window"},
		{[]string{"bench", "--cost-replicas", "0"}, `-cost-replicas: "0" is not a whole number from 1 to 16`},
		{[]string{"bench", "--cost", "s3"}, "--cost measures nothing"},
	} {
		r := zb(t, "", append(tc.args, "--out", dir)...)
		wantFail(t, r, exitUsage, tc.want)
	}
	r := zb(t, "", "bench", "--url", "nosuch://b", "--out", dir)
	wantFail(t, r, exitUsage, "cannot open nosuch://b")
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("10, 4KiB,1MiB,7B")
	if err != nil || len(got) != 4 || got[0] != 10 || got[1] != 4096 || got[2] != 1<<20 || got[3] != 7 {
		t.Errorf("%v, %v", got, err)
	}
}

func TestBenchCost(t *testing.T) {
	out := mustZB(t, "", "bench", "--cost", "--cost-writes", "10", "--cost-size", "1MiB", "--cost-retention", "7d", "--cost-hot", "1h")
	for _, want := range []string{"as published, checked 20", "https://cloud.google.com/storage/pricing", "https://aws.amazon.com/s3/pricing/",
		"https://azure.microsoft.com/en-us/pricing/details/storage/blobs/", "Assumptions:", "10 writes/s of 1MiB, kept 7d, compacted after 1h",
		"regional only", "tiered: quorum of 3 zonal for 1h", "$0.00113"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "p50") {
		t.Errorf("--cost measured something:\n%s", out)
	}
}

func TestBenchProgress(t *testing.T) {
	var lines bytes.Buffer
	p := newBenchProgress(&lines, false)
	p.step(bench.Step{Done: 0, Total: 2, Row: "a 10B", Expected: time.Second})
	p.step(bench.Step{Done: 1, Total: 2, Row: "b 10B", Expected: time.Second})
	p.step(bench.Step{Done: 2, Total: 2})
	p.stop()
	if got := lines.String(); !strings.Contains(got, "1/2 a 10B\n") || !strings.Contains(got, "2/2 b 10B\n") || strings.Count(got, "\n") != 2 {
		t.Errorf("line progress:\n%s", got)
	}

	var bar bytes.Buffer
	p = newBenchProgress(&bar, true)
	p.step(bench.Step{Done: 1, Total: 4, Row: "b 10B", Expected: time.Hour})
	p.step(bench.Step{Done: 4, Total: 4})
	p.stop()
	got := bar.String()
	if !strings.Contains(got, "\r[") || !strings.Contains(got, " 25%  2/4") || !strings.Contains(got, "100%  4/4") || !strings.HasSuffix(got, "\n") {
		t.Errorf("bar progress: %q", got)
	}
}

// Once stopped, the progress never draws again, in either form: the report
// and its summary line are the last things a run prints, even if a step
// comes late.
func TestBenchProgressNothingAfterStop(t *testing.T) {
	for _, bar := range []bool{true, false} {
		var buf bytes.Buffer
		p := newBenchProgress(&buf, bar)
		p.step(bench.Step{Done: 0, Total: 2, Row: "a 10B", Expected: time.Hour})
		p.stop()
		stopped := buf.String()
		if !strings.HasSuffix(stopped, "\n") {
			t.Errorf("bar=%v: stop left the line open: %q", bar, stopped)
		}
		p.step(bench.Step{Done: 1, Total: 2, Row: "late 10B", Expected: time.Hour})
		p.stop()
		if got := buf.String(); got != stopped {
			t.Errorf("bar=%v: drawn after stop: %q", bar, strings.TrimPrefix(got, stopped))
		}
	}
}

// A run of one scenario prints the prices and estimates of what it
// measured: bench gcsrapid is GCS Rapid in one zonal bucket, not S3, Azure,
// quorums or tiering.
func TestBenchCostOnlyWhatRan(t *testing.T) {
	out := mustZB(t, "", quickBench(t.TempDir(), "gcsrapid", "--size", "10")...)
	section := out[strings.Index(out, "Cost: "):]
	for _, want := range []string{"GCS      Rapid (zonal)", "one zonal bucket: Rapid (zonal)", "Workload: "} {
		if !strings.Contains(section, want) {
			t.Errorf("cost section lacks %q:\n%s", want, section)
		}
	}
	for _, unwanted := range []string{"S3", "Azure", "Standard (regional)", "regional only", "quorum of", "tiered:", "Requests are counted"} {
		if strings.Contains(section, unwanted) {
			t.Errorf("cost section of bench gcsrapid has %q:\n%s", unwanted, section)
		}
	}
	// A scenario that needs more shows more.
	var b bytes.Buffer
	if err := writeCostFor(&b, cost.DefaultWorkload(), []bench.CostRow{{Cloud: "GCS", Layout: cost.Tiered}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Rapid (zonal)", "Standard (regional)", "tiered: quorum of 3 zonal", "Requests are counted"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tiered cost section lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := writeCostFor(&b, cost.DefaultWorkload(), nil); err != nil || !strings.Contains(b.String(), "no list price applies") {
		t.Errorf("no rows: %v\n%s", err, b.String())
	}
}

// A path slower than its baseline reads "2.0x slower", never "0.5x faster".
func TestBenchReportWordsSlowerAsSlower(t *testing.T) {
	ms := time.Millisecond
	rep := &bench.Report{Load: bench.DefaultLoad(), Results: []bench.Result{
		{Scenario: "gocloud-zonal", Size: 10, Profile: "rapid", P50: 90 * ms, P99: 100 * ms, Latencies: []time.Duration{ms}},
		{Scenario: "zonalblob-put", Size: 10, Profile: "rapid", P50: 30 * ms, P99: 200 * ms, Latencies: []time.Duration{ms}},
		{Scenario: "gocloud-regional", Size: 10, Profile: "rapid", P50: 10 * ms, P99: 10 * ms, Latencies: []time.Duration{ms}},
		{Scenario: "zonalblob-create-pooled", Size: 10, Profile: "rapid", P50: 10 * ms, P99: 40 * ms, Latencies: []time.Duration{ms}},
	}}
	var b bytes.Buffer
	if err := writeBenchReport(&b, rep, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"- zonalblob-put 10B: 3.0x faster than gocloud-zonal at p50, 2.0x slower at p99\n",
		"- zonalblob-create-pooled 10B: as fast as gocloud-regional at p50, 4.0x slower at p99\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "- ") && strings.Contains(line, " 0.") {
			t.Errorf("a ratio below 1 is printed as such: %q", line)
		}
	}
}
