package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func mvCommand() *command {
	return &command{
		name:     "mv",
		synopsis: "SRC DST [--if-not-exist] [--progress] [--json] [-q]   (SRC, DST: STORE KEY, or a local PATH)",
		summary:  "move an object: copy it, then delete the source unless it changed meanwhile",
		details: `Copies SRC to DST as cp does (the same argument forms: STORE KEY, or a
local PATH, on each end; a destination ending in "/" is a folder), then
deletes SRC, on condition that it is still what was copied: an object is
deleted only if its generation is still the one read before the copy (as rm
--if-generation does), a local file only if its size and modification time
have not changed. A source overwritten meanwhile is left in place, and mv
says so and exits 1: both then exist, the destination holding what was
read. mv moves one object; for a folder use cp -r, then rm -r. "-"
(standard input or output) is refused: it cannot be deleted.

A line on stderr sums up what was moved (-q: nothing). --json prints on
stdout one JSON object for the object moved: {"src_key" or "src_path",
"dst_key" or "dst_path", "size", "src_generation"} (the generation deleted;
none for a local file).

Examples:
  zonalblob mv file:///tmp/demo inbox/report.csv file:///tmp/demo done/
  zonalblob mv ./report.csv file:///tmp/demo reports/
  zonalblob mv file:///tmp/demo reports/report.csv ./
  zonalblob mv --if-not-exist file:///tmp/demo a 's3://bucket?region=eu-west-1' a
`,
		minArgs: 2, maxArgs: 4,
		checkForms: checkEnds,
		setup: func(fs *flag.FlagSet) action {
			var ifNotExist, quiet, asJSON bool
			var showProgress autoBool
			fs.BoolVar(&ifNotExist, "if-not-exist", false, "fail, deleting nothing, if the destination already exists")
			fs.BoolVar(&quiet, "q", false, "quiet: no summary line")
			fs.BoolVar(&asJSON, "json", false, "print the object moved on stdout as one JSON object")
			fs.Var(&showProgress, "progress", "show a progress bar even when stderr is not a terminal (=false: never)")
			return func(ctx context.Context, s streams, args []string) error {
				src, dst, err := parseEnds(args)
				if err != nil {
					return err
				}
				if src.path == "-" || dst.path == "-" {
					return usagef("mv deletes its source: \"-\" (standard input or output) is none; use cp")
				}
				c := &copier{
					stdin:    s.stdin,
					stdout:   s.stdout,
					opts:     copyOptions(ifNotExist),
					progress: showProgress.resolve(isTerminal(s.stderr)),
					stderr:   s.stderr,
					jobs:     1,
					quiet:    quiet,
					json:     asJSON,
				}
				return c.move(ctx, src, dst)
			}
		},
	}
}

// move copies src to dst, then deletes src if it has not changed since it
// was read.
func (c *copier) move(ctx context.Context, src, dst end) error {
	closeStores, err := c.open(ctx, src, dst, false)
	defer closeStores()
	if err != nil {
		return err
	}
	it, err := c.planOne(ctx, src, dst)
	if err != nil {
		return err
	}
	if c.same && it.from == it.to {
		return usagef("SRC and DST are the same object, %q", it.from)
	}
	var before os.FileInfo
	if src.local() {
		if before, err = os.Stat(it.from); err != nil {
			return err
		}
	} else if it.gen == "" {
		return fmt.Errorf("%s: the store gives no generation, so mv cannot delete the source on condition that it did not change; use cp, then rm", blob.Redact(src.url))
	}

	start := time.Now()
	c.startBar(it.size, 1, start)
	defer c.stopBar()
	n, err := c.copyOne(ctx, it)
	if err == nil {
		c.p.AddObject()
	}
	if ctx.Err() != nil {
		verb := "moved"
		if err == nil {
			verb = "moved (the copy was made; the source is left in place)"
		}
		return &partial{done: 0, total: 1, verb: verb}
	}
	if err != nil {
		return err
	}
	if src.local() {
		err = removeUnchanged(it.from, before)
	} else {
		// it.gen is not empty: a source without one was refused above.
		err = c.src.Delete(ctx, it.from, &blob.DeleteOptions{If: blob.IfGenerationMatch(it.gen)})
	}
	c.stopBar()
	if err != nil {
		what := fmt.Sprintf("copied %s to %s, but did not delete the source", c.name(src, it.from), c.name(dst, it.to))
		switch {
		case errors.Is(err, blob.ErrPrecondition) && src.local():
			return fmt.Errorf("%s: it changed meanwhile (size or modification time), so both exist now: %w", what, err)
		case errors.Is(err, blob.ErrPrecondition):
			return fmt.Errorf("%s: it was overwritten meanwhile (its generation is no longer %s), so both exist now: %w", what, it.gen, err)
		case errors.Is(err, blob.ErrNotFound):
			// Not exit 3: the move's source was there; someone else deleted it.
			return fmt.Errorf("%s: someone else deleted it meanwhile (%v)", what, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if c.json {
		line := c.copyLine(it, n)
		line.SrcGeneration = it.gen
		if err := printJSON(c.stdout, []copyJSON{line}); err != nil {
			return err
		}
	}
	if !c.quiet {
		fmt.Fprintln(c.stderr, summary("moved", 1, n, time.Since(start)))
	}
	return nil
}

// name is how a message names a key or a local path at end e.
func (c *copier) name(e end, keyOrPath string) string {
	if e.local() {
		return keyOrPath
	}
	return fmt.Sprintf("%q", keyOrPath)
}

// removeUnchanged removes the file at path if it is still the one described
// by before: the same file, size and modification time. Otherwise it fails
// with blob.ErrPrecondition.
func removeUnchanged(path string, before os.FileInfo) error {
	now, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", path, blob.ErrNotFound)
		}
		return err
	}
	if !os.SameFile(before, now) || now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
		return fmt.Errorf("%s: %w", path, blob.ErrPrecondition)
	}
	return os.Remove(path)
}
