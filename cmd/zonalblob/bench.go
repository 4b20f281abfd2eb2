package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/cost"
	"github.com/zonalblob/zonalblob/internal/bench"
)

// benchFiles are the files a run writes into --out.
const (
	benchTable = "results.md"
	benchPlot  = "latency.png"
	benchJSON  = "results.json"
)

func benchCommand() *command {
	return &command{
		name:     "bench",
		synopsis: "[SCENARIO...] [--scenario S,...] [--url URL]... [--mode open|closed] [--rate R] [--duration D] [--size S,...] [--concurrency N] [--profile published|zero] [--out DIR]",
		summary:  "measure write latency on in-process emulators with published latency profiles",
		details: `Runs every scenario (or those named) against in-process emulators, no cloud
account needed, and prints p50/p90/p99/p99.9, throughput and requests per
object for each write path, with the latency profile it ran on. A default run
takes about a minute and a half. The figures are emulator figures modelled on published
numbers, not cloud measurements; the profiles are seeded, so a rerun gives the
same figures within the machine's noise. Each write path is compared with
the one a user would otherwise use, at p50 and p99: "1.9x faster than
gocloud-zonal at p50, 2.0x slower at p99" (a ratio below 1 is worded as
slower, by its inverse).

Every run ends with the cost section, for the backends and layouts that the
scenarios which ran stand for (bench gcsrapid: GCS Rapid, one zonal bucket):
list prices per GiB-month and per request, with source and date, and a
monthly estimate for a stated workload (--cost-* flags; it does not depend
on --size). --cost prints only that section, for every backend and layout,
with and without tiering.

It writes into --out: ` + benchTable + ` (the table), ` + benchPlot + ` (latency CDF per row:
latency log-scaled; the percentile axis on a tail scale, -log10(1-p), so
that p50, p90, p99 and p99.9 stand evenly apart and the tails can be read)
and ` + benchJSON + ` (every figure and raw sample: the result as JSON).
A progress bar (a line per row when stderr is not a terminal) is finished
before the report is printed.

Load: open loop by default, at --rate operations a second (large objects at
most 32 MiB/s), each latency measured from the operation's intended start so
that a stall shows instead of slowing the load; --concurrency bounds the
operations in flight, and an operation waiting for a slot counts its wait.
--mode closed runs --concurrency workers back to back instead. Each row runs
--warmup, then --duration measured.

Scenarios:
` + scenarioList() + `
--url runs zonalblob's write paths (Put and Create) against a real bucket
instead, any URL that zonalblob opens (gcsrapid://, s3express://, azpremium://,
gs://, s3://, mem://, ...), so you get the same table from your own zone. Every
call is bounded by --timeout; the objects written, under zonalblob-bench/, are
deleted afterwards.

Examples:
  zonalblob bench
  zonalblob bench gcsrapid --size 10 --rate 500 --duration 5s
  zonalblob bench --mode closed --concurrency 8 --scenario s3
  zonalblob bench log
  zonalblob bench --url 'gcsrapid://my-rapid-bucket' --rate 50
  zonalblob bench --cost --cost-writes 1000 --cost-size 4KiB --cost-retention 7d
`,
		minArgs: 0, maxArgs: -1,
		setup: func(fs *flag.FlagSet) action {
			load := bench.DefaultLoad()
			var scenarios, sizes, mode, profile, out string
			var urls stringList
			var seed uint64
			var showProgress autoBool
			var costOnly bool
			work := cost.DefaultWorkload()
			fs.StringVar(&scenarios, "scenario", "", "comma-separated `scenarios` to run (default: all)")
			fs.Var(&urls, "url", "run Put and Create against the store at `URL` instead of the emulators (repeatable)")
			fs.StringVar(&mode, "mode", string(load.Mode), "load `mode`: open (fixed rate) or closed (workers back to back)")
			fs.Var(rateFlag(&load.Rate, 0, 1e6), "rate", "offered operations per second in open loop (up to 1000000)")
			fs.DurationVar(&load.Duration, "duration", load.Duration, "measured time per row")
			fs.DurationVar(&load.Warmup, "warmup", load.Warmup, "unmeasured time per row before it")
			fs.StringVar(&sizes, "size", "10,1MiB", "comma-separated object `sizes` (bytes, or with KiB/MiB)")
			fs.IntVar(&load.Concurrency, "concurrency", load.Concurrency, "workers in closed loop; most operations in flight in open loop")
			fs.IntVar(&load.MaxOps, "ops", 0, "cap on measured operations per row (0: no cap)")
			fs.StringVar(&profile, "profile", "published", "latency `profile`s: published (each emulator's, from published figures) or zero (no delay)")
			fs.DurationVar(&load.OpTimeout, "timeout", load.OpTimeout, "bound on each operation (and on opening a --url store)")
			fs.Uint64Var(&seed, "seed", 1, "seed of the latency profiles")
			fs.StringVar(&out, "out", "bench-out", "`directory` for "+benchTable+", "+benchPlot+" and "+benchJSON)
			fs.Var(&showProgress, "progress", "draw a progress bar (default: when stderr is a terminal)")
			fs.BoolVar(&costOnly, "cost", false, "print only the prices and the monthly cost estimate, measure nothing")
			fs.Var(rateFlag(&work.WritesPerSecond, 0, maxCostWrites), "cost-writes", "cost estimate: writes per second (more than 0, up to 10000000)")
			fs.Var(sizeFlag(&work.ObjectBytes, 1, maxCostSize), "cost-size", "cost estimate: object `size`, 1 byte to 5TiB (4096, 64KiB, 1.5MiB)")
			fs.Var(daysFlag(&work.Retention, maxCostDays), "cost-retention", "cost estimate: how long objects are kept (`duration`, or days as 30d; up to 36500d)")
			fs.Var(daysFlag(&work.After, maxCostDays), "cost-hot", "cost estimate: how long objects stay zonal before compaction (`duration`, at most the retention)")
			fs.Var(intFlag(&work.Replicas, 1, 16), "cost-replicas", "cost estimate: zonal buckets of the quorum, 1 to 16")
			return func(ctx context.Context, s streams, args []string) error {
				var err error
				if err := work.Validate(); err != nil {
					return usagef("cost workload: %v", err)
				}
				env := &bench.Env{Load: load, Zero: profile == "zero", Seed: seed}
				if env.Sizes, err = parseSizes(sizes); err != nil {
					return usagef("--size: %v", err)
				}
				if costOnly {
					if len(args) > 0 || scenarios != "" || len(urls) > 0 {
						return usagef("--cost measures nothing; it takes no scenario or URL")
					}
					return writeCost(s.stdout, work)
				}
				if load.Mode, err = bench.ParseMode(mode); err != nil {
					return usagef("--mode: %v", err)
				}
				if err := load.Validate(); err != nil {
					return usagef("%v", err)
				}
				if profile != "published" && profile != "zero" {
					return usagef("--profile %q: want published or zero", profile)
				}
				env.Load = load
				names := args
				if scenarios != "" {
					names = append(names, strings.Split(scenarios, ",")...)
				}
				var run []bench.Scenario
				if len(urls) > 0 {
					if len(names) > 0 {
						return usagef("--url runs Put and Create on the URL's store; it takes no scenario")
					}
					for _, u := range urls {
						run = append(run, bench.URLScenario(u))
					}
				} else if run, err = bench.SelectScenarios(names); err != nil {
					return usagef("%v", err)
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return fmt.Errorf("--out: %w", err)
				}

				bar := newBenchProgress(s.stderr, showProgress.resolve(isTerminal(s.stderr)))
				env.Progress = bar.step
				rep, runErr := bench.Run(ctx, env, run)
				// Nothing may redraw the bar once the report starts.
				bar.stop()
				if runErr != nil && len(rep.Results) == 0 {
					return runErr
				}
				var table bytes.Buffer
				if err := writeBenchReport(&table, rep, len(urls) > 0); err != nil {
					return err
				}
				fmt.Fprintln(&table)
				if err := writeCostFor(&table, work, bench.CostRowsOf(run, rep.Results)); err != nil {
					return err
				}
				// A store's error in the report may quote its URL's credentials.
				report := []byte(redactText(table.String(), s.args))
				s.stdout.Write(report)
				if err := writeBenchFiles(out, rep, report, len(urls) > 0, s.args); err != nil {
					return err
				}
				fmt.Fprintf(s.stdout, "\nWrote %s, %s and %s in %.1fs.\n",
					filepath.Join(out, benchTable), filepath.Join(out, benchPlot), filepath.Join(out, benchJSON), rep.Wall.Seconds())
				return runErr
			}
		},
	}
}

func scenarioList() string {
	var b strings.Builder
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&b, "  %-12s %s", s.Name, s.Summary)
		if s.Pending != "" {
			fmt.Fprintf(&b, " (not yet: %s)", s.Pending)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// parseSizes parses "10,64KiB,1MiB": sizes from 0 to 64MiB.
func parseSizes(list string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := parseSize(f, 0, 64<<20)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, int(n))
	}
	return sizes, nil
}

// writeBenchReport writes the table and what goes with it, in Markdown that
// also reads well on a terminal.
func writeBenchReport(w io.Writer, rep *bench.Report, live bool) error {
	if live {
		fmt.Fprintf(w, "zonalblob bench against real stores: %s load, live figures from this machine (no latency profile)\n\n", rep.Load.Mode)
	} else {
		mode := rep.Load.Mode
		if !bench.HasRows(rep.Results, false) && bench.HasRows(rep.Results, true) {
			mode = bench.ModeClosed // the commit log's appenders
		}
		fmt.Fprintf(w, "zonalblob bench on in-process emulators, %s load, seed %d: %s.\n\n", mode, rep.Seed, bench.EmulatorNote)
	}
	if bench.HasRows(rep.Results, false) || !bench.HasRows(rep.Results, true) {
		fmt.Fprintln(w, "```")
		if err := bench.WriteTable(w, rep.Results); err != nil {
			return err
		}
		fmt.Fprintln(w, "```")
	}
	if bench.HasRows(rep.Results, true) {
		fmt.Fprintf(w, "\nCommit log: %d appenders of each row's record size back to back (an open-loop row starts appends at its offered rate instead, each timed from when it was due), each row for --duration or %d appends, whichever comes first; raw is one zone's append round trip of the same size, one at a time, in the same run; lag is from an append's acknowledgement to a tailing reader holding the record; req/append counts the reader's requests too.\n\n```\n",
			rep.Load.Concurrency, bench.LogMaxAppends)
		if err := bench.WriteLogTable(w, rep.Results); err != nil {
			return err
		}
		fmt.Fprintln(w, "```")
	}
	if sp := bench.Speedups(rep.Results); len(sp) > 0 {
		fmt.Fprintln(w)
		for _, x := range sp {
			fmt.Fprintf(w, "- %s\n", x)
		}
	}
	var errs []string
	for _, r := range rep.Results {
		if r.Errors > 0 {
			errs = append(errs, fmt.Sprintf("- %s: %d errors, first: %s", r.Label(), r.Errors, r.FirstError))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors:\n%s\n", strings.Join(errs, "\n"))
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintln(w, "\nNot run:")
		for _, sk := range rep.Skipped {
			fmt.Fprintf(w, "- %s: %s\n", sk.Scenario, sk.Reason)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	return nil
}

// writeBenchFiles writes the table, the plot and the JSON into dir.
func writeBenchFiles(dir string, rep *bench.Report, table []byte, live bool, args []string) error {
	md := append([]byte(nil), table...)
	md = fmt.Appendf(md, "\n![write latency CDF per scenario](%s)\n", benchPlot)
	if err := os.WriteFile(filepath.Join(dir, benchTable), md, 0o644); err != nil {
		return err
	}
	title := "published profiles, emulators"
	if live {
		title = "live"
	} else if len(rep.Results) > 0 && rep.Results[0].Profile == "zero" {
		title = "zero profile, emulators"
	}
	var png bytes.Buffer
	if err := bench.WritePlot(&png, rep.Results, title); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, benchPlot), png.Bytes(), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, benchJSON), append([]byte(redactText(string(js), args)), '\n'), 0o644)
}

// The cost estimate's ranges: beyond them the figures mean nothing (and
// would overflow the printed table).
const (
	maxCostWrites = 1e7
	maxCostSize   = 5 << 40 // the largest object S3, GCS and Azure store
	maxCostDays   = 36500 * 24 * time.Hour
)

// writeCost writes the price table and the monthly estimate for w, every
// backend and layout.
func writeCost(out io.Writer, w cost.Workload) error {
	return writeCostFor(out, w, bench.AllCostRows())
}

// writeCostFor writes the prices and estimates of rows.
func writeCostFor(out io.Writer, w cost.Workload, rows []bench.CostRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, "Cost: no list price applies to the stores measured; zonalblob bench --cost prints them all.")
		return err
	}
	var regions []string
	for _, c := range []struct{ cloud, region string }{{"GCS", "GCS us-central1"}, {"S3", "AWS us-east-1"}, {"Azure", "Azure East US"}} {
		if slices.ContainsFunc(rows, func(r bench.CostRow) bool { return r.Cloud == c.cloud }) {
			regions = append(regions, c.region)
		}
	}
	fmt.Fprintf(out, "Cost: list prices (%s; %s)\n\n```\n", cost.PricesChecked, strings.Join(regions, ", "))
	if err := bench.WritePricesFor(out, rows); err != nil {
		return err
	}
	fmt.Fprintln(out, "```\n\n```")
	if err := bench.WriteEstimatesFor(out, w, rows); err != nil {
		return err
	}
	fmt.Fprintln(out, "```")
	if !slices.ContainsFunc(rows, func(r bench.CostRow) bool { return r.Layout == cost.ZonalQuorum || r.Layout == cost.Tiered }) {
		_, err := fmt.Fprintln(out, "\nChange the workload with --cost-writes, --cost-size and --cost-retention; zonalblob bench --cost prices every backend and layout.")
		return err
	}
	fmt.Fprintln(out, "\nRequests are counted as package tiered's tests count them on the stores: a quorum write or delete is a consensus round (2 writes and 3 reads on each replica); tiering moves objects into regional packs (per object a Stat, a read and the hot delete, which over a quorum is a retirement: a survey of the replicas, a read from one and a conditional delete of each copy, free, confirmed by a survey at a later pass; per pack a marker, written again over a quorum, the pack, a listing, a Stat and an index read), a Delete of a packed object is a grave written to hot on condition that hot has nothing (a consensus round over a quorum) and a share of a listing of the pack log (which the deletes of a bury window, 5 s, share), the compactor later retiring each grave (a Stat of hot and of cold, and its removal) with one tombstone a pass; each pass lists hot (a quorum's listing Stats every tombstone it keeps) and the pack log, and the holder of the compactor lease renews it every minute. Change the workload with --cost-writes, --cost-size, --cost-retention, --cost-hot and --cost-replicas.")
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// benchProgress shows which row runs: a bar redrawn in place on a terminal,
// else a line per row.
type benchProgress struct {
	w     io.Writer
	bar   bool
	start time.Time

	mu       sync.Mutex
	cur      bench.Step
	rowStart time.Time
	lastLen  int
	ended    bool // stop was called: nothing more is drawn
	done     chan struct{}
	stopped  chan struct{}
}

func newBenchProgress(w io.Writer, bar bool) *benchProgress {
	p := &benchProgress{w: w, bar: bar, start: time.Now(), done: make(chan struct{}), stopped: make(chan struct{})}
	if !bar {
		close(p.stopped)
		return p
	}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				p.mu.Lock()
				p.draw(now)
				p.mu.Unlock()
			case <-p.done:
				return
			}
		}
	}()
	return p
}

func (p *benchProgress) step(st bench.Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		// A step reported after the run (a scenario's goroutine that
		// outlived it) would draw over the report.
		return
	}
	p.cur, p.rowStart = st, time.Now()
	if p.bar {
		p.draw(p.rowStart)
		return
	}
	if st.Row != "" {
		fmt.Fprintf(p.w, "[%5.1fs] %d/%d %s\n", time.Since(p.start).Seconds(), st.Done+1, st.Total, st.Row)
	}
}

func (p *benchProgress) draw(now time.Time) {
	st := p.cur
	if st.Total == 0 {
		return
	}
	frac := float64(st.Done)
	if st.Expected > 0 && st.Done < st.Total {
		frac += min(float64(now.Sub(p.rowStart))/float64(st.Expected), 0.99)
	}
	frac /= float64(st.Total)
	filled := int(frac * progressBarWidth)
	line := fmt.Sprintf("[%s%s] %3d%%  %d/%d  %4.0fs  %s", strings.Repeat("=", filled), strings.Repeat(" ", progressBarWidth-filled),
		int(frac*100), min(st.Done+1, st.Total), st.Total, now.Sub(p.start).Seconds(), st.Row)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.lastLen-len(line), 0)))
	p.lastLen = len(line)
}

// stop draws the bar's final state and ends its line, once; after it
// nothing is drawn, so that the report and its summary come last.
func (p *benchProgress) stop() {
	p.mu.Lock()
	ended := p.ended
	p.ended = true
	p.mu.Unlock()
	if !p.bar || ended {
		return
	}
	close(p.done)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.Total > 0 {
		p.draw(time.Now())
		fmt.Fprintln(p.w)
	}
}
