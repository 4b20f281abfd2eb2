package main

import (
	"context"
	"errors"
	"flag"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

func rmCommand() *command {
	return &command{
		name:     "rm",
		synopsis: "STORE KEY... [--if-generation G] [-f]",
		summary:  "delete objects",
		details: `Deletes each KEY. Every key is checked before anything is deleted, so a
malformed key deletes nothing. A key that cannot be deleted is reported and the
others are still deleted; the exit code is then 3 if every failure was a
missing object, 1 otherwise.

Examples:
  zonalblob rm file:///tmp/demo greeting now
  zonalblob rm file:///tmp/demo lock --if-generation "$(zonalblob stat --json file:///tmp/demo lock | jq -r .generation)"
`,
		minArgs: 2, maxArgs: -1,
		setup: func(fs *flag.FlagSet) action {
			var o blob.DeleteOptions
			var force bool
			fs.StringVar(&o.IfGenerationMatch, "if-generation", "", "delete only if the object's current generation is `G` (one KEY only)")
			fs.BoolVar(&force, "f", false, "ignore missing objects")
			return func(ctx context.Context, s streams, args []string) error {
				keys := args[1:]
				if o.IfGenerationMatch != "" && len(keys) > 1 {
					return usagef("--if-generation applies to one KEY, got %d", len(keys))
				}
				for _, k := range keys {
					if err := blob.ValidateKey("delete", k); err != nil {
						return err
					}
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				var failed failures
				for _, k := range keys {
					err := st.Delete(ctx, k, &o)
					if err == nil || force && errors.Is(err, blob.ErrNotFound) {
						continue
					}
					failed = append(failed, err)
				}
				return failuresOrNil(failed)
			}
		},
	}
}

// failures are the errors of a command that carries on past a failed object.
// Each is printed on its own line; the exit code is "not found" only if every
// failure was.
type failures []error

func (f failures) Error() string {
	msgs := make([]string, len(f))
	for i, err := range f {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "\n")
}

func (f failures) exitCode() int {
	for _, err := range f {
		if !errors.Is(err, blob.ErrNotFound) {
			return exitFailed
		}
	}
	return exitNotFound
}

func failuresOrNil(f failures) error {
	if len(f) == 0 {
		return nil
	}
	return f
}
