package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func cpCommand() *command {
	return &command{
		name:     "cp",
		synopsis: "SRC_STORE SRC_KEY DST_STORE DST_KEY [-r] [--progress] [--if-not-exist]",
		summary:  "copy an object, or every object under a prefix, between any two stores",
		details: `Streams SRC_KEY of SRC_STORE to DST_KEY of DST_STORE with its attributes
(content type and other headers, user metadata), between any two URLs. When
both URLs are the same string, the store copies by itself (server-side where
the backend can), and no bytes pass through this process.

With -r (--recursive), SRC_KEY and DST_KEY are prefixes (either may be ''):
every object whose key begins with SRC_KEY is copied to DST_KEY followed by the
rest of its key, --jobs at a time. A failed object is reported and the others
are still copied.

A progress bar (bytes, percent, rate) appears on stderr when a copy takes
longer than half a second and stderr is a terminal; --progress shows it
anywhere, --progress=false never.

Examples:
  zonalblob cp file:///tmp/demo report.csv 's3://bucket?region=eu-west-1' reports/2025.csv
  zonalblob cp -r file:///tmp/demo logs/ 'file:///tmp/backup?create_dir=true' logs/
  zonalblob cp --if-not-exist file:///tmp/demo a file:///tmp/demo b
`,
		minArgs: 4, maxArgs: 4,
		setup: func(fs *flag.FlagSet) action {
			var recursive, ifNotExist bool
			var showProgress autoBool
			jobs := 4
			fs.BoolVar(&recursive, "r", false, "copy every object under the prefix SRC_KEY to the prefix DST_KEY")
			fs.BoolVar(&recursive, "recursive", false, "same as -r")
			fs.IntVar(&jobs, "jobs", jobs, "with -r, copy `N` objects at a time")
			fs.BoolVar(&ifNotExist, "if-not-exist", false, "fail for a destination object that already exists")
			fs.Var(&showProgress, "progress", "show a progress bar even when stderr is not a terminal (=false: never)")
			return func(ctx context.Context, s streams, args []string) error {
				if jobs < 1 {
					return usagef("--jobs must be at least 1, got %d", jobs)
				}
				c := &copier{
					opts:     &blob.CopyOptions{IfNotExist: ifNotExist},
					progress: showProgress.resolve(isTerminal(s.stderr)),
					stderr:   s.stderr,
					jobs:     jobs,
				}
				return c.run(ctx, args[0], args[1], args[2], args[3], recursive)
			}
		},
	}
}

type copier struct {
	opts     *blob.CopyOptions
	progress bool
	stderr   io.Writer
	jobs     int
}

func (c *copier) run(ctx context.Context, srcURL, srcKey, dstURL, dstKey string, recursive bool) error {
	for _, k := range []string{srcKey, dstKey} {
		// Prefixes may be empty; keys may not.
		if k == "" && recursive {
			continue
		}
		if err := blob.ValidateKey("copy", k); err != nil {
			return err
		}
	}
	src, err := openStore(ctx, srcURL)
	if err != nil {
		return err
	}
	defer src.Close()
	// Opening one URL twice would give two stores; for mem:// two empty ones.
	dst, sameStore := src, srcURL == dstURL
	if !sameStore {
		if dst, err = openStore(ctx, dstURL); err != nil {
			return err
		}
		defer dst.Close()
	}

	p := newProgress(c.stderr, 0, time.Now())
	if c.progress {
		defer p.run()()
	}
	copyOne := func(dstKey, srcKey string) error {
		if sameStore {
			return blob.Copy(ctx, dst, dstKey, srcKey, c.opts)
		}
		return blob.CopyBetween(ctx, dst, dstKey, meteredStore{Store: src, p: p, setTotal: !recursive}, srcKey, c.opts)
	}
	if !recursive {
		return copyOne(dstKey, srcKey)
	}

	var objs []blob.ListObject
	var total int64
	for obj, err := range blob.All(ctx, src, &blob.ListOptions{Prefix: srcKey}) {
		if err != nil {
			return err
		}
		objs = append(objs, obj)
		total += obj.Size
	}
	if len(objs) == 0 {
		return blob.Errorf("copy", srcKey, blob.ErrNotFound, "no objects under prefix %q", srcKey)
	}
	p.SetTotal(total)
	var (
		mu     sync.Mutex
		failed failures
		wg     sync.WaitGroup
		next   = make(chan string)
	)
	for range min(c.jobs, len(objs)) {
		wg.Go(func() {
			for k := range next {
				if err := copyOne(dstKey+strings.TrimPrefix(k, srcKey), k); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, obj := range objs {
		next <- obj.Key
	}
	close(next)
	wg.Wait()
	return failuresOrNil(failed)
}

// meteredStore reports the bytes read from a copy's source to a progress bar,
// and the object's size as the bar's total when it copies a single object.
type meteredStore struct {
	blob.Store
	p        *progress
	setTotal bool
}

func (m meteredStore) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	a, err := m.Store.Stat(ctx, key)
	if err == nil && m.setTotal {
		m.p.SetTotal(a.Size)
	}
	return a, err
}

func (m meteredStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	r, err := m.Store.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return meteredReader{Reader: r, p: m.p}, nil
}

type meteredReader struct {
	blob.Reader
	p *progress
}

func (r meteredReader) Read(b []byte) (int, error) {
	n, err := r.Reader.Read(b)
	r.p.Add(int64(n))
	return n, err
}
