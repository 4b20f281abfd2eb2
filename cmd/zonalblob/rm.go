package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func rmCommand() *command {
	return &command{
		name:     "rm",
		synopsis: "STORE KEY... [-r --yes] [-f] [--if-generation G] [--json] [-q]",
		summary:  "delete objects, or with -r every object under a prefix",
		details: `Deletes each KEY. Every key is checked before anything is deleted, so a
malformed key deletes nothing. A key that cannot be deleted is reported and the
others are still deleted; the exit code is then 3 if every failure was a
missing object, 2 if every one was a key the store refuses, 1 otherwise. A
line on stderr sums up what was deleted (-q: nothing). --json prints on
stdout one JSON object per object deleted: {"key"} in the order given, or
with -r {"key", "size"} in key order; failures go to stderr as usual.

With -r each KEY is a prefix: every object under it is deleted. A prefix
without a final "/" is a folder ("logs" deletes logs/..., not logsx); ''
is the whole store. Without --yes, rm -r deletes nothing: it says how many
objects it would delete, and exits 2.

Examples:
  zonalblob rm file:///tmp/demo greeting now
  zonalblob rm -r file:///tmp/demo logs/           # says what it would delete
  zonalblob rm -r --yes file:///tmp/demo logs/
  zonalblob rm file:///tmp/demo lock --if-generation "$(zonalblob stat --json file:///tmp/demo lock | jq -r .generation)"
`,
		minArgs: 2, maxArgs: -1,
		setup: func(fs *flag.FlagSet) action {
			var ifGeneration string
			var force, recursive, yes, quiet bool
			jobs := 8
			fs.StringVar(&ifGeneration, "if-generation", "", "delete only if the object's current generation is `G` (one KEY only)")
			fs.BoolVar(&force, "f", false, "ignore missing objects")
			fs.BoolVar(&recursive, "r", false, "delete every object under each prefix KEY (needs --yes)")
			fs.BoolVar(&recursive, "recursive", false, "same as -r")
			fs.BoolVar(&yes, "yes", false, "with -r, really delete")
			fs.BoolVar(&yes, "y", false, "same as --yes")
			fs.BoolVar(&quiet, "q", false, "quiet: no summary line")
			var asJSON bool
			fs.BoolVar(&asJSON, "json", false, "print each object deleted on stdout, one JSON object per line")
			fs.IntVar(&jobs, "jobs", jobs, "with -r, delete `N` objects at a time (1 to 1024)")
			return func(ctx context.Context, s streams, args []string) error {
				keys := args[1:]
				// An empty --if-generation is no condition, as it is for put.
				var o blob.DeleteOptions
				if ifGeneration != "" {
					if len(keys) > 1 || recursive {
						return usagef("--if-generation applies to one KEY, without -r")
					}
					o.If = blob.IfGenerationMatch(ifGeneration)
				}
				if jobs < 1 || jobs > 1024 {
					return usagef("--jobs must be from 1 to 1024, got %d", jobs)
				}
				if yes && !recursive {
					return usagef("--yes confirms rm -r; plain rm deletes what it is given")
				}
				for _, k := range keys {
					if k == "" && recursive {
						continue
					}
					if err := blob.ValidateKey("delete", k); err != nil {
						return err
					}
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				start := time.Now()
				if recursive {
					return removeTree(ctx, s, st, keys, rmFlags{yes: yes, quiet: quiet, json: asJSON, jobs: jobs}, start)
				}
				// A store may refuse keys that every store would not (file://
				// refuses "/x"); it does so before any I/O, so asking first
				// keeps the promise that a malformed key deletes nothing.
				if len(keys) > 1 {
					for _, k := range keys {
						if _, err := st.Stat(ctx, k); errors.Is(err, blob.ErrInvalidKey) {
							return err
						}
					}
				}
				var failed failures
				deleted := 0
				var removed []rmJSON
				// What was deleted is printed however the command ends.
				defer func() {
					if asJSON {
						printJSON(s.stdout, removed)
					}
				}()
				for _, k := range keys {
					if ctx.Err() != nil {
						return &partial{done: deleted, total: len(keys), verb: "deleted"}
					}
					err := st.Delete(ctx, k, &o)
					switch {
					case err == nil:
						deleted++
						removed = append(removed, rmJSON{Key: k})
					case force && errors.Is(err, blob.ErrNotFound):
					case ctx.Err() != nil:
						return &partial{done: deleted, total: len(keys), verb: "deleted"}
					default:
						failed = append(failed, err)
					}
				}
				if len(failed) > 0 {
					if deleted == 0 {
						return failed
					}
					return fmt.Errorf("%w\n%s", failed, summary("deleted", deleted, -1, time.Since(start)))
				}
				if !quiet {
					fmt.Fprintln(s.stderr, summary("deleted", deleted, -1, time.Since(start)))
				}
				return nil
			}
		},
	}
}

// folderPrefix is the prefix a recursive command works under: a prefix
// without a final "/" names a folder, so "logs" means "logs/" and never
// "logsx"; "" is the whole store.
func folderPrefix(p string) string {
	if p == "" || strings.HasSuffix(p, "/") {
		return p
	}
	return p + "/"
}

// rmJSON is a line of rm --json: an object deleted (Size with -r, from the
// listing).
type rmJSON struct {
	Key  string `json:"key"`
	Size *int64 `json:"size,omitempty"`
}

// rmFlags are rm -r's flags.
type rmFlags struct {
	yes, quiet, json bool
	jobs             int
}

func removeTree(ctx context.Context, s streams, st blob.Store, prefixes []string, f rmFlags, start time.Time) error {
	seen := map[string]bool{}
	var keys []string
	sizes := map[string]int64{}
	var bytes int64
	for _, p := range prefixes {
		p = folderPrefix(p)
		n := len(keys)
		for obj, err := range blob.All(ctx, st, &blob.ListOptions{Prefix: p}) {
			if err != nil {
				return err
			}
			if !seen[obj.Key] {
				seen[obj.Key] = true
				keys = append(keys, obj.Key)
				sizes[obj.Key] = obj.Size
				bytes += obj.Size
			}
		}
		if len(keys) == n {
			return blob.Errorf("delete", p, blob.ErrNotFound, "no objects under prefix %q", p)
		}
	}
	if !f.yes {
		return usagef("rm -r would delete %s (%s) under %s; add --yes to delete them", plural(len(keys), "object"), byteCount(bytes), quoteAll(prefixes))
	}
	var mu sync.Mutex
	var removed []rmJSON
	done, failed := forEach(ctx, keys, f.jobs, func(k string) error {
		err := st.Delete(ctx, k, nil)
		if err == nil {
			size := sizes[k]
			mu.Lock()
			removed = append(removed, rmJSON{Key: k, Size: &size})
			mu.Unlock()
		}
		return err
	})
	if f.json {
		slices.SortFunc(removed, func(a, b rmJSON) int { return strings.Compare(a.Key, b.Key) })
		if err := printJSON(s.stdout, removed); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return &partial{done: done, total: len(keys), verb: "deleted"}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w\n%s; %d failed", failed, summary(fmt.Sprintf("deleted %d of", done), len(keys), -1, time.Since(start)), len(failed))
	}
	if !f.quiet {
		fmt.Fprintln(s.stderr, summary("deleted", done, bytes, time.Since(start)))
	}
	return nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", folderPrefix(s))
	}
	return strings.Join(q, ", ")
}

// forEach runs fn on items, jobs at a time, and returns how many succeeded
// and the failures. Once ctx ends it starts no more.
func forEach[T any](ctx context.Context, items []T, jobs int, fn func(T) error) (int, failures) {
	var (
		mu     sync.Mutex
		failed failures
		done   int
		wg     sync.WaitGroup
		next   = make(chan T)
	)
	for range min(jobs, len(items)) {
		wg.Go(func() {
			for it := range next {
				err := fn(it)
				mu.Lock()
				if err == nil {
					done++
				} else if ctx.Err() == nil {
					failed = append(failed, err)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case next <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return done, failed
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
	all := func(kind error) bool {
		for _, err := range f {
			if !errors.Is(err, kind) {
				return false
			}
		}
		return true
	}
	switch {
	case all(blob.ErrNotFound):
		return exitNotFound
	case all(blob.ErrInvalidKey):
		return exitUsage
	}
	return exitFailed
}
