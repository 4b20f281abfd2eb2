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
		synopsis: "",
		summary:  "print the version and the registered URL schemes",
		minArgs:  0, maxArgs: 0,
		setup: func(fs *flag.FlagSet) action {
			return func(ctx context.Context, s streams, args []string) error {
				v := "(devel)"
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
					v = bi.Main.Version
				}
				_, err := fmt.Fprintf(s.stdout, "zonalblob %s\nschemes: %s\n", v, strings.Join(blob.Schemes(), ", "))
				return err
			}
		},
	}
}
