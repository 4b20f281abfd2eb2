package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/bench"
)

func benchCommand() *command {
	return &command{
		name:     "bench",
		synopsis: "[SCENARIO] [--profile P] [--ops N] [--rate R] [--size S,...] [--json FILE]",
		summary:  "measure write latency on in-process emulators with published latency profiles",
		details: `Runs latency scenarios against in-process emulators (no cloud account) and
prints p50/p90/p99/p99.9 per scenario, with the latency profile it ran. The
figures are emulator figures modelled on published numbers, not cloud
measurements. Load is open loop at --rate, latency measured from each
operation's intended start.

Scenarios:
  gcsrapid   GCS Rapid: gocloud's gcsblob in zonal mode (create+write+finalize)
             vs zonalblob Put (create+flush) vs zonalblob pooled Create (flush)

Examples:
  zonalblob bench
  zonalblob bench gcsrapid --profile rapid --size 10,1048576 --ops 500
  zonalblob bench --json results.json
`,
		minArgs: 0, maxArgs: 1,
		setup: func(fs *flag.FlagSet) action {
			var cfg bench.GCSRapidConfig
			var sizes, jsonPath string
			fs.StringVar(&cfg.Profile, "profile", "rapid", "latency `profile` of the emulator: rapid, regional or zero")
			fs.IntVar(&cfg.Ops, "ops", 300, "measured operations per scenario")
			fs.Float64Var(&cfg.Rate, "rate", 200, "offered load in operations per second")
			fs.StringVar(&sizes, "size", "10,1048576", "comma-separated object sizes in bytes")
			fs.StringVar(&jsonPath, "json", "", "also write the results as JSON to `FILE`")
			fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the latency profile")
			return func(ctx context.Context, s streams, args []string) error {
				scenario := "gcsrapid"
				if len(args) == 1 {
					scenario = args[0]
				}
				if scenario != "gcsrapid" {
					return usagef("unknown scenario %q (available: gcsrapid)", scenario)
				}
				if cfg.Ops <= 0 || cfg.Rate <= 0 {
					return usagef("--ops and --rate must be positive")
				}
				for _, f := range strings.Split(sizes, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil || n < 0 || n > 64<<20 {
						return usagef("--size: %q is not a size in bytes up to 64 MiB", f)
					}
					cfg.Sizes = append(cfg.Sizes, n)
				}
				start := time.Now()
				cfg.Progress = func(name string) {
					fmt.Fprintf(s.stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), name)
				}
				res, err := bench.GCSRapid(ctx, cfg)
				if err != nil {
					return err
				}
				fmt.Fprintf(s.stdout, "GCS Rapid on the in-process emulator, profile %q (emulator figures modelled on published numbers, not cloud measurements)\n\n", cfg.Profile)
				if err := bench.WriteTable(s.stdout, res); err != nil {
					return err
				}
				writeSpeedups(s, res)
				if jsonPath != "" {
					b, err := json.MarshalIndent(res, "", "  ")
					if err != nil {
						return err
					}
					if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
						return err
					}
				}
				return nil
			}
		},
	}
}

// writeSpeedups prints each zonalblob scenario's p50 and p99 against the
// gocloud peer of the same size.
func writeSpeedups(s streams, res []bench.Result) {
	peer := map[int]bench.Result{}
	for _, r := range res {
		if r.Scenario == "gocloud-zonal" {
			peer[r.Size] = r
		}
	}
	fmt.Fprintln(s.stdout)
	for _, r := range res {
		p, ok := peer[r.Size]
		if !ok || r.Scenario == p.Scenario || r.P50 <= 0 || r.P99 <= 0 {
			continue
		}
		fmt.Fprintf(s.stdout, "%-26s %8d B: %5.1fx faster than gocloud-zonal at p50, %5.1fx at p99\n",
			r.Scenario, r.Size, float64(p.P50)/float64(r.P50), float64(p.P99)/float64(r.P99))
	}
}
