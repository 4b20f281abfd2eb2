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
		synopsis: "STORE [PREFIX] [-s] [-h]",
		summary:  "show how many objects and bytes a store, or each folder in it, holds",
		details: `Adds up every object under PREFIX (a folder: "logs" means logs/; default:
the whole store). Prints, for each object and folder directly under PREFIX,
its bytes, its object count and its name (a folder's totals include
everything beneath it), then a TOTAL line. -s prints only the TOTAL line; -h
shows bytes in KiB, MiB, ...

Examples:
  zonalblob du file:///tmp/demo
  zonalblob du -sh file:///tmp/demo logs/
`,
		minArgs: 1, maxArgs: 2,
		setup: func(fs *flag.FlagSet) action {
			var only, human bool
			fs.BoolVar(&only, "s", false, "print only the total")
			fs.BoolVar(&human, "h", false, "bytes in KiB, MiB, ... (--help for help)")
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
