package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func lsCommand() *command {
	return &command{
		name:     "ls",
		synopsis: "STORE [--prefix P] [--delimiter /] [--start-after K] [-l]",
		summary:  "list objects, in byte order of their keys",
		details: `Prints one key per line. With -l, each line is the size in bytes, the
modification time (UTC) and the key. With --delimiter, keys that share a prefix
up to the delimiter are shown once, as a "directory" ending in the delimiter
(size shown as DIR with -l).

An empty store prints nothing and exits 0.

Examples:
  zonalblob ls file:///tmp/demo
  zonalblob ls -l file:///tmp/demo --prefix logs/ --delimiter /
  zonalblob ls file:///tmp/demo --prefix logs/ --start-after logs/0042
`,
		minArgs: 1, maxArgs: 1,
		setup: func(fs *flag.FlagSet) action {
			var o blob.ListOptions
			var long bool
			fs.StringVar(&o.Prefix, "prefix", "", "list only keys that begin with `P`")
			fs.StringVar(&o.Delimiter, "delimiter", "", "group keys by their prefix up to `D` (usually /)")
			fs.StringVar(&o.StartAfter, "start-after", "", "list only keys that sort after `K`")
			fs.BoolVar(&long, "l", false, "long format: size, modification time, key")
			fs.BoolVar(&long, "long", false, "same as -l")
			return func(ctx context.Context, s streams, args []string) error {
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				for obj, err := range blob.All(ctx, st, &o) {
					if err != nil {
						return err
					}
					if err := printListEntry(s, obj, long); err != nil {
						return err
					}
				}
				return nil
			}
		},
	}
}

func printListEntry(s streams, obj blob.ListObject, long bool) error {
	var err error
	switch {
	case !long:
		_, err = fmt.Fprintln(s.stdout, obj.Key)
	case obj.IsDir:
		_, err = fmt.Fprintf(s.stdout, "%12s  %-20s  %s\n", "DIR", "", obj.Key)
	default:
		_, err = fmt.Fprintf(s.stdout, "%12d  %-20s  %s\n", obj.Size, formatTime(obj.ModTime), obj.Key)
	}
	return err
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
