package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional" // mem://
)

// fakeScenario records a row per size without an emulator, its latency the
// object size in microseconds.
func fakeScenario(name string) Scenario {
	return Scenario{Name: name, Paths: 1, Run: func(ctx context.Context, env *Env) error {
		env.Measure(ctx, Path{Name: name + "-path", Profile: "zero", Write: func(ctx context.Context, _ int, data []byte) error {
			time.Sleep(time.Duration(len(data)+1) * time.Microsecond)
			return nil
		}})
		return nil
	}}
}

func TestRunListsSkippedAndPendingScenarios(t *testing.T) {
	var steps []Step
	env := testEnv(10, 100)
	env.Progress = func(s Step) { steps = append(steps, s) }
	skipping := Scenario{Name: "skips", Paths: 1, Run: func(context.Context, *Env) error { return &SkipError{"no emulator"} }}
	pending := Scenario{Name: "later", Paths: 1, Pending: "not built"}
	rep, err := Run(context.Background(), env, []Scenario{fakeScenario("a"), skipping, pending, fakeScenario("b")})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, rep.Results, 4)
	want := []Skipped{{"skips", "no emulator"}, {"later", "not built"}}
	if !reflect.DeepEqual(rep.Skipped, want) {
		t.Errorf("skipped %+v, want %+v", rep.Skipped, want)
	}
	// Rows of a skipped scenario count as done, so the bar reaches the end.
	last := steps[len(steps)-1]
	if last.Done != last.Total || last.Total != 6 {
		t.Errorf("last step %+v, want 6 of 6", last)
	}
	if rep.Results[0].Group != "a" || rep.Results[3].Group != "b" {
		t.Errorf("rows not tagged with their scenario: %q, %q", rep.Results[0].Group, rep.Results[3].Group)
	}
}

func TestRunStopsAtAFailingScenario(t *testing.T) {
	boom := errors.New("boom")
	failing := Scenario{Name: "fails", Paths: 1, Run: func(context.Context, *Env) error { return boom }}
	rep, err := Run(context.Background(), testEnv(10), []Scenario{fakeScenario("a"), failing, fakeScenario("b")})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "fails") {
		t.Errorf("error %v, want boom naming the scenario", err)
	}
	if len(rep.Results) != 1 {
		t.Errorf("%d rows, want the one measured before the failure", len(rep.Results))
	}
}

func TestReportJSONRoundTrips(t *testing.T) {
	rep, err := Run(context.Background(), testEnv(10, 1<<10), []Scenario{fakeScenario("a")})
	if err != nil {
		t.Fatal(err)
	}
	rep.Skipped = []Skipped{{"x", "y"}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// Monotonic clock readings and the location pointer do not survive
	// JSON; the instant does.
	if !back.Started.Equal(rep.Started) {
		t.Errorf("started %v, back %v", rep.Started, back.Started)
	}
	back.Started = rep.Started
	if !reflect.DeepEqual(*rep, back) {
		t.Errorf("JSON round trip changed the report:\n%+v\n%+v", *rep, back)
	}
	if !bytes.Contains(b, []byte(`"latencies_ns":[`)) {
		t.Errorf("raw samples missing from JSON")
	}
}

func TestPlotIsAPNG(t *testing.T) {
	rep, err := Run(context.Background(), testEnv(10, 1<<10), []Scenario{fakeScenario("a"), fakeScenario("b")})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePlot(&buf, rep.Results, "test"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// One panel per size, stacked.
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 2*b.Dx()/2 {
		t.Errorf("image %v: want two panels", b)
	}
	if err := WritePlot(&buf, nil, "empty"); err == nil {
		t.Error("plot of no rows succeeded")
	}
}

func TestCDFThinsButKeepsTheTail(t *testing.T) {
	lat := make([]time.Duration, 1001)
	for i := range lat {
		lat[i] = time.Duration(i) * time.Millisecond
	}
	xy := cdf(lat)
	if len(xy) > maxPlotPoints+2 {
		t.Errorf("%d points", len(xy))
	}
	if last := xy[len(xy)-1]; last.Y != 1 || last.X != 1000 {
		t.Errorf("last point %+v, want the slowest sample at 1", last)
	}
	if xy[0].X <= 0 {
		t.Errorf("first point %+v cannot be drawn on a log axis", xy[0])
	}
}

func TestURLScenarioOnMem(t *testing.T) {
	env := testEnv(10, 1<<10)
	rep, err := Run(context.Background(), env, []Scenario{URLScenario("mem://")})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 4 {
		t.Fatalf("%d rows, want Put and Create at two sizes", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Profile != LiveProfile || r.Ops == 0 || r.Errors != 0 {
			t.Errorf("%s: %+v", r.Label(), r)
		}
	}
	if len(rep.Notes) != 0 {
		t.Errorf("notes %q: cleanup failed", rep.Notes)
	}
}

func TestURLScenarioFailsClearly(t *testing.T) {
	env := testEnv(10)
	_, err := Run(context.Background(), env, []Scenario{URLScenario("nosuch://bucket")})
	if err == nil || !strings.Contains(err.Error(), "cannot open nosuch://bucket") {
		t.Errorf("error %v", err)
	}
}

// A call that ignores its context still returns at the deadline. The call
// here cannot return before the test ends, so bounded's answer can only come
// from its deadline, and must say so.
func TestBoundedReturnsAtTheDeadline(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	err := bounded(context.Background(), 50*time.Millisecond, func(context.Context) error { <-block; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Errorf("err %v, want the deadline named", err)
	}
}

func TestSelectScenarios(t *testing.T) {
	got, err := SelectScenarios([]string{"s3", "gcsrapid", "s3"})
	if err != nil || len(got) != 2 || got[0].Name != "gcsrapid" || got[1].Name != "s3" {
		t.Errorf("got %v, %v; want gcsrapid, s3 in registry order", got, err)
	}
	if _, err := SelectScenarios([]string{"nosuch"}); err == nil || !strings.Contains(err.Error(), "gcsrapid") {
		t.Errorf("unknown scenario: %v; want the list of names", err)
	}
	// Every entry either runs or says why it cannot yet.
	all, _ := SelectScenarios(nil)
	for _, s := range all {
		if (s.Run == nil) == (s.Pending == "") {
			t.Errorf("%s: want exactly one of Run and Pending", s.Name)
		}
	}
}

func TestSpeedups(t *testing.T) {
	rows := []Result{
		{Scenario: "gocloud-zonal", Size: 10, P50: 90 * time.Millisecond, P99: 120 * time.Millisecond},
		{Scenario: "zonalblob-create-pooled", Size: 10, P50: 3 * time.Millisecond, P99: 6 * time.Millisecond},
		{Scenario: "zonalblob-put", Size: 1 << 20, P50: time.Millisecond, P99: time.Millisecond},
	}
	got := Speedups(rows)
	if len(got) != 1 || got[0].P50 != 30 || got[0].P99 != 20 || got[0].Size != 10 {
		t.Errorf("%+v", got)
	}
}

var _ = blob.Open // mem:// is registered by the blank import above

func TestTimes(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		want  string
	}{
		{30, "30.0x faster"}, {1.5, "1.5x faster"}, {1.04, "as fast"}, {1, "as fast"}, {0.96, "as fast"},
		{0.5, "2.0x slower"}, {0.25, "4.0x slower"}, {0, "not comparable"},
	} {
		if got := Times(tc.ratio); got != tc.want {
			t.Errorf("Times(%v) = %q, want %q", tc.ratio, got, tc.want)
		}
	}
	s := Speedup{Comparison{"zonalblob-put", "gocloud-zonal"}, 10, 0.5, 2}
	if got, want := s.String(), "zonalblob-put 10B: 2.0x slower than gocloud-zonal at p50, 2.0x faster at p99"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
