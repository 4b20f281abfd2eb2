package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

// Scenario is one named entry of the registry: a set of write paths measured
// on the same emulators and latency profiles.
type Scenario struct {
	Name    string
	Summary string
	// Paths is the number of write paths (rows per object size), for
	// progress.
	Paths int
	// Fixed says the scenario's rows do not depend on the object sizes:
	// it records Paths rows in all.
	Fixed bool
	// Run starts the scenario's emulators and measures each write path
	// with env.Measure. It returns a *SkipError when the scenario cannot run
	// on this machine (an emulator is not installed).
	Run func(ctx context.Context, env *Env) error
	// Pending, when set, says why the scenario cannot run yet; Run is nil.
	Pending string
	// Costs are the rows of the cost section that the scenario's write
	// paths stand for, so that a run prints only the prices and estimates
	// of what it measured.
	Costs []CostRow
}

// Scenarios returns the registry, in the order a full run measures it.
//
// Adding a scenario is adding one function and one entry here.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "gcsrapid", Paths: 3, Run: runGCSRapid, Costs: []CostRow{{"GCS", cost.OneZonal}},
			Summary: "GCS Rapid: gocloud gcsblob zonal (create+write+finalize) vs zonalblob Put (create+flush) vs pooled Create (flush)"},
		{Name: "gcsregional", Paths: 1, Run: runGCSRegional, Costs: []CostRow{{"GCS", cost.RegionalOnly}},
			Summary: "GCS regional bucket through gocloud gcsblob: the compaction target, for comparison"},
		{Name: "s3", Paths: 2, Run: runS3, Costs: []CostRow{{"S3", cost.RegionalOnly}, {"S3", cost.OneZonal}},
			Summary: "S3 Express One Zone (zonalblob s3express Put) vs S3 Standard (gocloud s3blob)"},
		{Name: "azure", Paths: 2, Run: runAzure, Costs: []CostRow{{"Azure", cost.RegionalOnly}, {"Azure", cost.OneZonal}},
			Summary: "Azure Premium block blob (zonalblob azpremium Put) vs hot tier (gocloud azureblob); needs Azurite"},
		{Name: "quorum", Paths: 2, Run: runQuorum, Costs: []CostRow{{"GCS", cost.ZonalQuorum}},
			Summary: "quorum 2-of-3 pooled Create over three GCS Rapid zones, healthy and with one slow zone"},
		{Name: "tiered", Paths: 1, Run: runTiered, Costs: []CostRow{{"GCS", cost.Tiered}},
			Summary: "tiered store: pooled creates into a GCS Rapid zone while the compactor moves them to a regional bucket"},
		{Name: "log", Paths: 18, Fixed: true, Run: runLog,
			Costs:   []CostRow{{"GCS", cost.RegionalOnly}, {"GCS", cost.OneZonal}, {"GCS", cost.ZonalQuorum}, {"S3", cost.ZonalQuorum}, {"Azure", cost.ZonalQuorum}},
			Summary: "commit log: appends/s, append latency and reader lag; bucket-log slots (regional, Rapid) vs commitlog on 1 Rapid bucket (100 B records); 2-of-3 Rapid at 100 B, 4 KiB and 64 KiB (healthy, one zone slow), each beside one zone's raw append round trip of the same size, at 4 KiB also unpipelined and open loop at 32 MiB/s; a log of 4 stripes at 4 KiB and 64 KiB (healthy, one zone slow, at 4 KiB open loop); 2-of-3 S3 Express and 2-of-3 Azure Premium (needs Azurite) at 100 B; each row --duration or 20000 appends"},
	}
}

// Rows is how many rows the scenario records in a run of sizes object
// sizes (at most: a row that needs a missing emulator is left out).
func (s Scenario) Rows(sizes int) int {
	if s.Fixed {
		return s.Paths
	}
	return s.Paths * sizes
}

// ScenarioNames returns the names of the registry.
func ScenarioNames() []string {
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	return names
}

// SelectScenarios returns the named scenarios in registry order, or all of
// them if names is empty.
func SelectScenarios(names []string) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 0 {
		return all, nil
	}
	var out []Scenario
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q (available: %s)", n, strings.Join(ScenarioNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(s Scenario) bool { return s.Name == n }) {
			out = append(out, all[i])
		}
	}
	slices.SortStableFunc(out, func(a, b Scenario) int {
		return slices.IndexFunc(all, func(s Scenario) bool { return s.Name == a.Name }) -
			slices.IndexFunc(all, func(s Scenario) bool { return s.Name == b.Name })
	})
	return out, nil
}

// SkipError says why a scenario did not run.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return "skipped: " + e.Reason }

// Skipped is a scenario that did not run, in a report.
type Skipped struct {
	Scenario string `json:"scenario"`
	Reason   string `json:"reason"`
}

// Path is one write path of a scenario: one row per object size.
type Path struct {
	Name    string // e.g. "zonalblob-put"
	Profile string // the latency profile it ran on
	// Write writes data as the n-th object of this path; n is unique
	// within the path across sizes, warm-up and measurement.
	Write func(ctx context.Context, n int, data []byte) error
	// Requests, if set, returns the server's request count so far; the
	// row's requests per operation come from its difference.
	Requests func() int64
}

// Step is a progress report: row Done of Total is starting (Done == Total:
// finished).
type Step struct {
	Done, Total int
	Row         string
	// Expected is how long a row takes, warm-up included, for a bar that
	// moves between steps.
	Expected time.Duration
}

// Env is what a scenario runs with: the load, the sizes, the profile
// choice, and where its rows go.
type Env struct {
	Load  Load
	Sizes []int
	// Zero runs every emulator without delay (functional tests).
	Zero bool
	Seed uint64
	// Progress, if set, is told each row as it starts.
	Progress func(Step)

	// override maps a published profile name to the one to run instead.
	override map[string]string
	scenario string
	results  []Result
	notes    []string
	done     int
	total    int
	seq      map[string]*atomic.Int64
}

// ProfileName is the profile a path runs on: published, or "zero".
func (e *Env) ProfileName(published string) string {
	if e.Zero {
		return "zero"
	}
	if p, ok := e.override[published]; ok {
		return p
	}
	return published
}

// note records a message for the report ("" is ignored).
func (e *Env) note(msg string) {
	if msg != "" {
		e.notes = append(e.notes, msg)
	}
}

// Results returns the rows measured so far.
func (e *Env) Results() []Result { return e.results }

// Measure measures each path at every size of the run, size by size so that
// the rows to compare sit together, and records a row per path and size.
// Rows whose operations all failed are recorded too, with their first error.
func (e *Env) Measure(ctx context.Context, paths ...Path) {
	for _, size := range e.Sizes {
		for _, p := range paths {
			if ctx.Err() != nil {
				return
			}
			e.MeasureSize(ctx, p, size)
		}
	}
}

// MeasureSize measures p at one object size and records the row.
func (e *Env) MeasureSize(ctx context.Context, p Path, size int) Result {
	if e.seq == nil {
		e.seq = map[string]*atomic.Int64{}
	}
	seq := e.seq[p.Name]
	if seq == nil {
		seq = new(atomic.Int64)
		e.seq[p.Name] = seq
	}
	label := p.Name + " " + SizeString(size)
	e.step(label)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	op := func(ctx context.Context, _ int) error { return p.Write(ctx, int(seq.Add(1)), data) }
	rate := e.Load.rateFor(size)
	if e.Load.Warmup > 0 {
		e.Load.run(ctx, rate, e.Load.Warmup, op)
	}
	var before int64
	if p.Requests != nil {
		before = p.Requests()
	}
	lat, errs, first, elapsed := e.Load.run(ctx, rate, e.Load.Duration, op)
	r := Result{
		Scenario: p.Name, Group: e.scenario, Profile: p.Profile, Size: size, Mode: e.Load.Mode,
		Errors: errs, Workers: e.Load.Concurrency, Elapsed: elapsed,
	}
	if e.Load.Mode == ModeOpen {
		r.Rate = rate
	}
	if first != nil {
		r.FirstError = first.Error()
	}
	Summarize(&r, lat)
	if p.Requests != nil && r.Ops+errs > 0 {
		r.RequestsPerOp = float64(p.Requests()-before) / float64(r.Ops+errs)
	}
	e.results = append(e.results, r)
	e.done++
	return r
}

func (e *Env) step(row string) {
	if e.Progress != nil {
		e.Progress(Step{Done: e.done, Total: max(e.total, e.done+1), Row: row, Expected: e.Load.Warmup + e.Load.Duration})
	}
}

// Report is everything a run produced: what the JSON file holds.
type Report struct {
	Started time.Time     `json:"started"`
	Wall    time.Duration `json:"wall_ns"`
	Load    Load          `json:"load"`
	Sizes   []int         `json:"sizes_bytes"`
	Seed    uint64        `json:"seed"`
	Note    string        `json:"note"`
	Results []Result      `json:"results"`
	Skipped []Skipped     `json:"skipped,omitempty"`
	// Notes are what the run has to say besides its rows (objects a URL
	// run could not delete).
	Notes []string `json:"notes,omitempty"`
}

// EmulatorNote says what the figures are.
const EmulatorNote = "emulator figures modelled on published numbers, not cloud measurements; each row names its latency profile"

// Run runs scenarios in order under env and returns the report. A scenario
// that skips is listed in Skipped; one that fails ends the run with its
// error, after the rows measured so far.
func Run(ctx context.Context, env *Env, scenarios []Scenario) (*Report, error) {
	rep := &Report{Started: time.Now(), Load: env.Load, Sizes: env.Sizes, Seed: env.Seed, Note: EmulatorNote}
	for _, s := range scenarios {
		if s.Run != nil {
			env.total += s.Rows(len(env.Sizes))
		}
	}
	var err error
	for _, s := range scenarios {
		if s.Run == nil {
			rep.Skipped = append(rep.Skipped, Skipped{s.Name, s.Pending})
			continue
		}
		env.scenario = s.Name
		want := env.done + s.Rows(len(env.Sizes))
		err = s.Run(ctx, env)
		if se := (*SkipError)(nil); errors.As(err, &se) {
			rep.Skipped = append(rep.Skipped, Skipped{s.Name, se.Reason})
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("scenario %s: %w", s.Name, err)
			break
		}
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		env.done = max(env.done, want)
	}
	if env.Progress != nil {
		env.Progress(Step{Done: env.total, Total: env.total})
	}
	rep.Results = env.results
	rep.Notes = env.notes
	rep.Wall = time.Since(rep.Started)
	return rep, err
}
