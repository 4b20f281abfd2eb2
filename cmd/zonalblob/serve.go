package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// serveCommand runs GCS Rapid emulators (the google.storage.v2 gRPC
// protocol with appendable objects, which no other public emulator speaks)
// until interrupted, and prints URLs that reach them from any zonalblob
// program: a single zone, a 2-of-3 quorum over the zones, and a tiered
// store over that quorum with a local directory as its cold tier.
func serveCommand() *command {
	return &command{
		name:     "serve",
		synopsis: "[--zones N] [--profile NAME] [--dir DIR]",
		summary:  "run GCS Rapid emulators on 127.0.0.1 and print URLs for them, until interrupted",
		details: `Starts one in-process GCS Rapid emulator per zone, each on its own loopback
port with a zonal bucket named "zone", and prints the URLs that reach them:
each zone (gcsrapid://zone?endpoint=...), a quorum over all zones
(quorum://...), and a tiered store over that quorum whose cold tier is a
directory (tiered://...). Use them from another shell, for example:

  zonalblob put 'URL' greeting - <<< hello
  zonalblob cat 'URL' greeting

Objects live in memory and are gone when serve stops (Ctrl-C). Latency
follows --profile (rapid: published GCS Rapid figures; zero: none).`,
		minArgs: 0, maxArgs: 0,
		setup: func(fs *flag.FlagSet) action {
			zones := fs.Int("zones", 3, "zones to emulate, each its own server (at least 1)")
			profile := fs.String("profile", "rapid", "latency profile: "+strings.Join(gcsrapidtest.ProfileNames(), ", "))
			dir := fs.String("dir", "", "directory for the tiered store's cold tier (default: a new temporary one)")
			return func(ctx context.Context, s streams, args []string) error {
				if *zones < 1 {
					return usageError{fmt.Sprintf("--zones %d: want at least 1", *zones)}
				}
				p, err := gcsrapidtest.ProfileByName(*profile)
				if err != nil {
					return usageError{err.Error()}
				}
				cold := *dir
				if cold == "" {
					if cold, err = os.MkdirTemp("", "zonalblob-serve-cold-"); err != nil {
						return err
					}
					defer os.RemoveAll(cold)
				} else if err := os.MkdirAll(cold, 0o755); err != nil {
					return err
				}
				if cold, err = filepath.Abs(cold); err != nil {
					return err
				}
				q := url.Values{}
				for i := range *zones {
					srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
						Profile: p, Seed: uint64(i + 1),
						Buckets: []gcsrapidtest.Bucket{{Name: "zone", Zonal: true}},
					})
					if err != nil {
						return fmt.Errorf("starting zone %d: %w", i, err)
					}
					defer srv.Close()
					u := "gcsrapid://zone?endpoint=" + srv.Endpoint()
					fmt.Fprintf(s.stdout, "zone %d:  %s\n", i, u)
					q.Add("replica", u)
				}
				q.Set("w", fmt.Sprint(*zones/2+1))
				qu := "quorum://?" + q.Encode()
				tu := "tiered://?" + url.Values{"hot": {qu}, "cold": {(&url.URL{Scheme: "file", Path: cold}).String()}, "after": {"1m"}}.Encode()
				fmt.Fprintf(s.stdout, "quorum:  %s\ntiered:  %s\n", qu, tu)
				fmt.Fprintf(s.stdout, "profile %s; objects live in memory until serve stops (Ctrl-C)\n", p.Name)
				<-ctx.Done()
				return nil
			}
		},
	}
}
