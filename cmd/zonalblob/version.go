package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "[--json]",
		summary:  "print the version and the registered URL schemes",
		details: `--json prints one JSON object instead: {"version", "schemes"}.
`,
		minArgs: 0, maxArgs: 0,
		setup: func(fs *flag.FlagSet) action {
			var asJSON bool
			fs.BoolVar(&asJSON, "json", false, "print one JSON object")
			return func(ctx context.Context, s streams, args []string) error {
				v := "(devel)"
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
					v = bi.Main.Version
				}
				if asJSON {
					return printJSON(s.stdout, []versionJSON{{Version: v, Schemes: blob.Schemes()}})
				}
				_, err := fmt.Fprintf(s.stdout, "zonalblob %s\nschemes: %s\n", v, strings.Join(blob.Schemes(), ", "))
				return err
			}
		},
	}
}

// versionJSON is version --json.
type versionJSON struct {
	Version string   `json:"version"`
	Schemes []string `json:"schemes"`
}
