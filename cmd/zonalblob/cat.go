package main

import (
	"context"
	"flag"
	"io"

	"github.com/zonalblob/zonalblob/blob"
)

func catCommand() *command {
	return &command{
		name:     "cat",
		synopsis: "STORE KEY [--offset N] [--length N]",
		summary:  "write an object, or a byte range of it, to stdout",
		details: `Streams the object to standard output. --offset and --length select a byte
range; an offset at or past the end prints nothing.

Examples:
  zonalblob cat file:///tmp/demo greeting
  zonalblob cat file:///tmp/demo big.bin --offset 1048576 --length 4096 | xxd
`,
		minArgs: 2, maxArgs: 2,
		setup: func(fs *flag.FlagSet) action {
			var offset, length int64
			fs.Int64Var(&offset, "offset", 0, "start at byte `N`")
			fs.Int64Var(&length, "length", -1, "read at most `N` bytes (-1: to the end)")
			return func(ctx context.Context, s streams, args []string) error {
				if offset < 0 {
					return usagef("--offset must not be negative, got %d", offset)
				}
				if length < -1 {
					return usagef("--length must be -1 (to the end) or more, got %d", length)
				}
				if err := blob.ValidateKey("read", args[1]); err != nil {
					return err
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				r, err := st.NewRangeReader(ctx, args[1], offset, length)
				if err != nil {
					return folderHint(ctx, st, args[1], err)
				}
				defer r.Close()
				_, err = io.Copy(s.stdout, r)
				return err
			}
		},
	}
}
