package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

func duCommand() *command {
	return &command{
		name:     "du",
		synopsis: "STORE [PREFIX] [-s] [-h] [--json]",
		summary:  "show how many objects and bytes a store, or each folder in it, holds",
		details: `Adds up every object under PREFIX (a folder: "logs" means logs/; default:
the whole store). Prints, for each object and folder directly under PREFIX,
its bytes, its object count and its name (a folder's totals include
everything beneath it), then a TOTAL line. -s prints only the TOTAL line; -h
shows bytes in KiB, MiB, ...

--json prints one JSON object instead: {"prefix", "size", "objects",
"entries": [{"key", "dir" (for a folder), "size", "objects"}, ...]}, sizes
in bytes, keys exactly as stored; -s leaves out "entries".

PREFIX is a prefix, not a pattern: a PREFIX holding *, ? or [ that matches
nothing gets a line on stderr saying that wildcards are not expanded.

Examples:
  zonalblob du file:///tmp/demo
  zonalblob du -sh file:///tmp/demo logs/
  zonalblob du --json file:///tmp/demo | jq .size
`,
		minArgs: 1, maxArgs: 2,
		setup: func(fs *flag.FlagSet) action {
			var only, human, asJSON bool
			fs.BoolVar(&only, "s", false, "print only the total")
			fs.BoolVar(&human, "h", false, "bytes in KiB, MiB, ... (--help for help)")
			fs.BoolVar(&asJSON, "json", false, "print one JSON object")
			return func(ctx context.Context, s streams, args []string) error {
				prefix := ""
				if len(args) == 2 {
					if err := blob.ValidateKey("list", args[1]); err != nil {
						return err
					}
					prefix = folderPrefix(args[1])
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				type entry struct {
					name    string
					bytes   int64
					objects int
				}
				var entries []*entry
				var total entry
				for obj, err := range blob.All(ctx, st, &blob.ListOptions{Prefix: prefix}) {
					if err != nil {
						return err
					}
					total.bytes += obj.Size
					total.objects++
					name := obj.Key
					if i := strings.IndexByte(obj.Key[len(prefix):], '/'); i >= 0 {
						name = obj.Key[:len(prefix)+i+1]
					}
					// Keys come in byte order, so one folder's keys are adjacent.
					if n := len(entries); n == 0 || entries[n-1].name != name {
						entries = append(entries, &entry{name: name})
					}
					e := entries[len(entries)-1]
					e.bytes += obj.Size
					e.objects++
				}
				if total.objects == 0 {
					wildcardNote(s, "du", prefix)
				}
				if asJSON {
					j := duJSON{Prefix: prefix, Size: total.bytes, Objects: total.objects}
					if !only {
						j.Entries = []duEntryJSON{}
						for _, e := range entries {
							j.Entries = append(j.Entries, duEntryJSON{Key: e.name, Dir: strings.HasSuffix(e.name, "/"), Size: e.bytes, Objects: e.objects})
						}
					}
					return printJSON(s.stdout, []duJSON{j})
				}
				size := func(n int64) string {
					if human {
						return formatBytes(n)
					}
					return strconv.FormatInt(n, 10)
				}
				if !only {
					for _, e := range entries {
						fmt.Fprintf(s.stdout, "%12s  %8d  %s\n", size(e.bytes), e.objects, displayKey(e.name))
					}
				}
				_, err = fmt.Fprintf(s.stdout, "%12s  %8d  TOTAL\n", size(total.bytes), total.objects)
				return err
			}
		},
	}
}

// duJSON is du --json: the totals under Prefix, and each object and folder
// directly under it (not with -s).
type duJSON struct {
	Prefix  string        `json:"prefix"`
	Size    int64         `json:"size"`
	Objects int           `json:"objects"`
	Entries []duEntryJSON `json:"entries,omitzero"`
}

type duEntryJSON struct {
	Key     string `json:"key"`
	Dir     bool   `json:"dir,omitempty"`
	Size    int64  `json:"size"`
	Objects int    `json:"objects"`
}
