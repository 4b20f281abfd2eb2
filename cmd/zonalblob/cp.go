package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func cpCommand() *command {
	return &command{
		name:     "cp",
		synopsis: "SRC DST [-r] [--progress] [--if-not-exist] [--json] [-q]   (SRC, DST: STORE KEY, or a local PATH)",
		summary:  "copy objects between stores, or between a store and local files",
		details: `Copies SRC to DST. Each end is either a store and a key (two arguments,
STORE KEY) or a local path (one argument): an argument that begins with a URL
scheme ("file:", "s3:", ...) is a store, anything else a local path (write
./a:b for a local name with a colon). So:

  cp STORE KEY STORE KEY     between stores, with the object's attributes
  cp ./FILE STORE KEY        upload a local file
  cp STORE KEY ./FILE        download an object to a local file

A local PATH of "-" is standard input (as SRC) or output (as DST), without
-r. A destination ending in "/" (a KEY, or a local PATH; or an existing local
directory) is a folder: the object keeps its name in it (cp STORE logs/a.txt
./out/ writes ./out/a.txt). When both URLs are the same string, the store
copies by itself (server-side where the backend can). A download is written
to a temporary file beside the target and renamed into place, so an
interrupted one leaves no partial file.

With -r (--recursive) SRC is a folder: every object (or local file) under it
is copied, --jobs at a time, and DST must be a folder (end in "/", or be ''
for the top of a store). As with rsync and gsutil, a source ending in "/"
copies the folder's contents (cp -r STORE logs/ DST out/ gives out/1,
out/sub/2), and one without copies the folder itself (cp -r STORE logs DST
out/ gives out/logs/1, out/logs/sub/2). A failed object is reported and the
others are still copied.

A line on stderr sums up what was copied (-q: nothing). --json prints on
stdout one JSON object per object copied, in the order of their sources:
{"src_key" or "src_path", "dst_key" or "dst_path", "size"} (keys exactly as
stored; no store URLs). A progress bar (objects, bytes, percent, rate)
appears on stderr when a copy takes longer than half a second and stderr is
a terminal; --progress shows it anywhere, --progress=false never. It is
finished before the summary line. Ctrl-C stops the copy, says how many
objects were copied, and exits 130; an object cut short is not written.

A URL with the key glued on (cp gs://bucket/key ./x) is refused, with the
two-argument form to use instead (cp gs://bucket key ./x).

Examples:
  zonalblob cp file:///tmp/demo report.csv 's3://bucket?region=eu-west-1' reports/2025.csv
  zonalblob cp ./report.csv file:///tmp/demo reports/
  zonalblob cp file:///tmp/demo reports/report.csv .
  zonalblob cp -r file:///tmp/demo logs/ 'file:///tmp/backup?create_dir=true' logs/
  zonalblob cp -r ./photos file:///tmp/demo ''
  zonalblob cp --if-not-exist file:///tmp/demo a file:///tmp/demo b
`,
		minArgs: 2, maxArgs: 4,
		checkForms: checkEnds,
		setup: func(fs *flag.FlagSet) action {
			var recursive, ifNotExist, quiet, asJSON bool
			var showProgress autoBool
			jobs := 4
			fs.BoolVar(&recursive, "r", false, "copy every object under the folder SRC into the folder DST")
			fs.BoolVar(&recursive, "recursive", false, "same as -r")
			fs.IntVar(&jobs, "jobs", jobs, "with -r, copy `N` objects at a time (1 to 1024)")
			fs.BoolVar(&ifNotExist, "if-not-exist", false, "fail for a destination object that already exists")
			fs.BoolVar(&quiet, "q", false, "quiet: no summary line")
			fs.BoolVar(&asJSON, "json", false, "print each object copied on stdout, one JSON object per line")
			fs.Var(&showProgress, "progress", "show a progress bar even when stderr is not a terminal (=false: never)")
			return func(ctx context.Context, s streams, args []string) error {
				if jobs < 1 || jobs > 1024 {
					return usagef("--jobs must be from 1 to 1024, got %d", jobs)
				}
				src, dst, err := parseEnds(args)
				if err != nil {
					return err
				}
				if recursive && (src.path == "-" || dst.path == "-") {
					return usagef("-r copies folders; \"-\" (standard input or output) is one object")
				}
				if asJSON && dst.path == "-" {
					return usagef("--json prints on stdout, where \"-\" would write the object: give one or the other")
				}
				c := &copier{
					stdin:    s.stdin,
					stdout:   s.stdout,
					opts:     copyOptions(ifNotExist),
					progress: showProgress.resolve(isTerminal(s.stderr)),
					stderr:   s.stderr,
					jobs:     jobs,
					quiet:    quiet,
					json:     asJSON,
				}
				return c.run(ctx, src, dst, recursive)
			}
		},
	}
}

// end is one end of a copy: a store and a key, or a local path.
type end struct {
	url, key string // url == "": local
	path     string
}

func (e end) local() bool { return e.url == "" }

// checkEnds checks the forms of cp's and mv's arguments.
func checkEnds(pos []string) error {
	_, _, err := parseEnds(pos)
	return err
}

// parseEnds reads SRC and DST from the positional arguments.
func parseEnds(args []string) (src, dst end, err error) {
	i := 0
	take := func(which string) (end, error) {
		if i >= len(args) {
			return end{}, usagef("missing %s (STORE KEY, or a local PATH)", which)
		}
		a := args[i]
		if !isStoreURL(a) {
			i++
			if a == "" {
				return end{}, usagef("%s: an empty local path", which)
			}
			return end{path: a}, nil
		}
		if i+1 >= len(args) {
			return end{}, usagef("missing %s KEY after the store %s", which, blob.Redact(a))
		}
		i += 2
		return end{url: a, key: args[i-1]}, nil
	}
	if src, err = take("SRC"); err != nil {
		return
	}
	if dst, err = take("DST"); err != nil {
		return
	}
	if i < len(args) {
		return src, dst, usagef("too many arguments: %q is neither part of SRC nor of DST (each is STORE KEY or a local PATH)", shortArg(args[i]))
	}
	if src.local() && dst.local() {
		return src, dst, usagef("both ends are local paths; one must be a store URL (use cp(1) or mv(1) for local files)")
	}
	return src, dst, nil
}

type copier struct {
	stdin    io.Reader
	stdout   io.Writer
	opts     *blob.CopyOptions
	progress bool
	stderr   io.Writer
	jobs     int
	quiet    bool
	json     bool // print each object copied on stdout

	src, dst blob.Store // nil for a local end
	same     bool       // both ends are one store
	p        *progress
	stopBar  func() // finishes the progress bar, once
}

// copyJSON is a line of cp --json and mv --json: an object copied (or
// moved), named by its keys or local paths.
type copyJSON struct {
	SrcKey  string `json:"src_key,omitempty"`
	SrcPath string `json:"src_path,omitempty"`
	DstKey  string `json:"dst_key,omitempty"`
	DstPath string `json:"dst_path,omitempty"`
	Size    int64  `json:"size"`
	// SrcGeneration is the generation mv deleted (not for a local source).
	SrcGeneration string `json:"src_generation,omitempty"`
}

// copyLine describes it, copied with n bytes, for --json.
func (c *copier) copyLine(it item, n int64) copyJSON {
	j := copyJSON{Size: n}
	if c.src == nil {
		j.SrcPath = it.from
	} else {
		j.SrcKey = it.from
	}
	if c.dst == nil {
		j.DstPath = it.to
	} else {
		j.DstKey = it.to
	}
	return j
}

// printJSON prints lines on stdout, one JSON object each.
func printJSON[T any](w io.Writer, lines []T) error {
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
			return err
		}
	}
	return nil
}

// item is one object to copy: where it comes from and where it goes (a key,
// or a local path).
type item struct {
	from, to string
	size     int64
	gen      string // the source's generation, where planOne read it
}

func (c *copier) run(ctx context.Context, src, dst end, recursive bool) error {
	closeStores, err := c.open(ctx, src, dst, recursive)
	defer closeStores()
	if err != nil {
		return err
	}

	items, err := c.plan(ctx, src, dst, recursive)
	if err != nil {
		return err
	}
	var total int64
	for _, it := range items {
		total += it.size
	}
	start := time.Now()
	c.startBar(total, len(items), start)
	defer c.stopBar()
	jobs := c.jobs
	if !recursive {
		jobs = 1
	}
	var t tally
	var mu sync.Mutex
	var copied []copyJSON
	done, failed := forEach(ctx, items, jobs, func(it item) error {
		n, err := c.copyOne(ctx, it)
		if err == nil {
			t.bytes.Add(n)
			c.p.AddObject()
			mu.Lock()
			copied = append(copied, c.copyLine(it, n))
			mu.Unlock()
		}
		return err
	})
	// The bar ends before anything else is printed, never after.
	c.stopBar()
	if c.json {
		slices.SortFunc(copied, func(a, b copyJSON) int { return strings.Compare(a.SrcKey+a.SrcPath, b.SrcKey+b.SrcPath) })
		if err := printJSON(c.stdout, copied); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return &partial{done: done, total: len(items), verb: "copied"}
	}
	switch {
	case len(failed) > 0 && len(items) > 1:
		// The summary ends the list of failures, each on its own line.
		return fmt.Errorf("%w\n%s; %d failed", failed, summary(fmt.Sprintf("copied %d of", done), len(items), t.bytes.Load(), time.Since(start)), len(failed))
	case len(failed) > 0:
		return failed[0]
	case !c.quiet:
		fmt.Fprintln(c.stderr, summary("copied", done, t.bytes.Load(), time.Since(start)))
	}
	return nil
}

// startBar sets up the progress of a transfer of objects totalling total
// bytes, and the bar if there is one; stopBar finishes it.
func (c *copier) startBar(total int64, objects int, start time.Time) {
	c.p = newProgress(c.stderr, total, start)
	c.p.SetObjects(objects)
	c.stopBar = func() {}
	if c.progress {
		c.stopBar = sync.OnceFunc(c.p.run())
	}
}

// open checks the keys of src and dst and opens their stores; closeStores
// closes them.
func (c *copier) open(ctx context.Context, src, dst end, recursive bool) (closeStores func(), err error) {
	var closers []func() error
	closeStores = func() {
		for _, f := range slices.Backward(closers) {
			f()
		}
	}
	for _, e := range []end{src, dst} {
		if e.local() {
			continue
		}
		// Prefixes may be empty or end in "/"; keys are checked as keys.
		if e.key == "" && (recursive || e == dst) {
			continue
		}
		if err := blob.ValidateKey("copy", e.key); err != nil {
			return closeStores, err
		}
	}
	if recursive {
		if !dst.local() && dst.key != "" && !strings.HasSuffix(dst.key, "/") {
			return closeStores, usagef("with -r the destination is a folder: end it in \"/\" (%q), or give '' for the top of the store; without the slash every key would run on from %q", dst.key+"/", dst.key)
		}
	}
	if !src.local() {
		if c.src, err = openStore(ctx, src.url); err != nil {
			return closeStores, err
		}
		closers = append(closers, c.src.Close)
	}
	if !dst.local() {
		// Opening one URL twice would give two stores; for mem:// two empty ones.
		if c.same = src.url == dst.url; c.same {
			c.dst = c.src
		} else {
			if c.dst, err = openStore(ctx, dst.url); err != nil {
				return closeStores, err
			}
			closers = append(closers, c.dst.Close)
		}
	}
	return closeStores, nil
}

// plan lists what to copy and where each piece goes.
func (c *copier) plan(ctx context.Context, src, dst end, recursive bool) ([]item, error) {
	if !recursive {
		it, err := c.planOne(ctx, src, dst)
		if err != nil {
			return nil, err
		}
		return []item{it}, nil
	}
	// rel is each object's name under the folder; a source without a final
	// "/" brings its own name along (rsync's and gsutil's rule).
	var rels []item
	if src.local() {
		root := src.path
		fi, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, usagef("%s is not a directory; copy a file without -r", root)
		}
		// "." and ".." copy their contents, as rsync does: their names are
		// no folder's.
		base := ""
		if b := filepath.Base(filepath.Clean(root)); !strings.HasSuffix(root, "/") && b != "." && b != ".." && b != "/" {
			base = b + "/"
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			var size int64
			if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
				size = info.Size()
			}
			rels = append(rels, item{from: p, to: base + filepath.ToSlash(rel), size: size})
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(rels) == 0 {
			return nil, fmt.Errorf("no files under %s", root)
		}
	} else {
		prefix := folderPrefix(src.key)
		base := ""
		if prefix != src.key {
			base = path.Base(src.key) + "/"
		}
		for obj, err := range blob.All(ctx, c.src, &blob.ListOptions{Prefix: prefix}) {
			if err != nil {
				return nil, err
			}
			rels = append(rels, item{from: obj.Key, to: base + obj.Key[len(prefix):], size: obj.Size})
		}
		if len(rels) == 0 {
			return nil, blob.Errorf("copy", prefix, blob.ErrNotFound, "no objects under prefix %q", prefix)
		}
	}
	for i := range rels {
		if dst.local() {
			p, err := localPath(dst.path, rels[i].to)
			if err != nil {
				return nil, err
			}
			rels[i].to = p
		} else {
			rels[i].to = dst.key + rels[i].to
			if err := blob.ValidateKey("copy", rels[i].to); err != nil {
				return nil, err
			}
		}
	}
	return rels, nil
}

// planOne resolves a single copy: the destination folder rule, and a
// source that is a folder.
func (c *copier) planOne(ctx context.Context, src, dst end) (item, error) {
	it := item{}
	var name string
	switch {
	case src.local() && src.path == "-":
		it.from, it.size = "-", -1
		if dst.key == "" || strings.HasSuffix(dst.key, "/") {
			return it, usagef("from standard input, name the destination object (not a folder)")
		}
	case src.local():
		fi, err := os.Stat(src.path)
		if err != nil {
			return it, err
		}
		if fi.IsDir() {
			return it, usagef("%s is a directory: add -r to copy what is in it", src.path)
		}
		it.from, it.size, name = src.path, fi.Size(), filepath.Base(src.path)
	default:
		a, err := c.src.Stat(ctx, src.key)
		if errors.Is(err, blob.ErrNotFound) {
			if n := c.countUnder(ctx, folderPrefix(src.key)); n > 0 {
				return it, usagef("%q is not an object but a folder of %s: add -r to copy them", src.key, plural(n, "object"))
			}
		}
		if err != nil {
			return it, err
		}
		it.from, it.size, it.gen, name = src.key, a.Size, a.Generation, path.Base(src.key)
		if strings.HasSuffix(src.key, "/") {
			name = ""
		}
	}
	if dst.local() {
		to := dst.path
		if fi, err := os.Stat(to); to != "-" && (strings.HasSuffix(to, "/") || err == nil && fi.IsDir()) {
			if name == "" {
				return it, usagef("cannot name a local file after the object %q", src.key)
			}
			p, err := localPath(to, name)
			if err != nil {
				return it, err
			}
			to = p
		}
		it.to = to
		return it, nil
	}
	it.to = dst.key
	if dst.key == "" || strings.HasSuffix(dst.key, "/") {
		if name == "" {
			return it, usagef("the source %q ends in \"/\": name the destination object", src.key)
		}
		it.to = dst.key + name
	}
	return it, blob.ValidateKey("copy", it.to)
}

// countUnder says whether there are objects under prefix (up to a page).
func (c *copier) countUnder(ctx context.Context, prefix string) int {
	page, err := c.src.List(ctx, &blob.ListOptions{Prefix: prefix, PageSize: 1000})
	if err != nil {
		return 0
	}
	return len(page.Objects)
}

// localPath joins a key's relative name to dir, refusing what would land
// outside dir or alias another file ("..", ".", an empty segment, a leading
// "/").
func localPath(dir, rel string) (string, error) {
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsRune(seg, 0) {
			return "", fmt.Errorf("the object name %q cannot be a local file name under %s (empty, \".\" or \"..\" path segment)", shortArg(rel), dir)
		}
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}

// copyOne copies one item and returns the bytes it moved.
func (c *copier) copyOne(ctx context.Context, it item) (int64, error) {
	switch {
	case c.src == nil: // upload
		var in io.Reader = c.stdin
		if it.from != "-" {
			f, err := openLocalFile(it.from)
			if err != nil {
				return 0, err
			}
			defer f.Close()
			in = f
		}
		cr := &countingReader{r: meter(interruptible(ctx, in), c.p)}
		err := blob.WriteFrom(ctx, c.dst, it.to, cr, &blob.WriterOptions{If: c.opts.If})
		return cr.n, err
	case c.dst == nil: // download
		return c.download(ctx, it)
	case c.same:
		err := blob.Copy(ctx, c.dst, it.to, it.from, c.opts)
		if err == nil {
			c.p.Add(it.size)
		}
		return it.size, err
	}
	err := blob.CopyBetween(ctx, c.dst, it.to, meteredStore{Store: c.src, p: c.p}, it.from, c.opts)
	return it.size, err
}

// copyOptions are the options of cp and mv: --if-not-exist, or none.
func copyOptions(ifNotExist bool) *blob.CopyOptions {
	if ifNotExist {
		return &blob.CopyOptions{If: blob.IfNotExist()}
	}
	return &blob.CopyOptions{}
}

// download writes an object to a temporary file beside the target, then
// renames it into place.
func (c *copier) download(ctx context.Context, it item) (int64, error) {
	if it.to == "-" {
		r, err := c.src.NewRangeReader(ctx, it.from, 0, -1)
		if err != nil {
			return 0, err
		}
		defer r.Close()
		return io.Copy(c.stdout, meter(r, c.p))
	}
	if c.opts.If.NotExist() {
		if _, err := os.Lstat(it.to); err == nil {
			return 0, fmt.Errorf("%s: %w", it.to, blob.ErrExists)
		}
	}
	if err := os.MkdirAll(filepath.Dir(it.to), 0o777); err != nil {
		return 0, err
	}
	r, err := c.src.NewRangeReader(ctx, it.from, 0, -1)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(it.to), "."+filepath.Base(it.to)+".*.zonalblob-tmp")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(tmp, meter(r, c.p))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), it.to)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return n, err
	}
	return n, nil
}

// meter reports the bytes read through r to p.
func meter(r io.Reader, p *progress) io.Reader { return meteredReader{Reader: r, p: p} }

// meteredStore reports the bytes read from a copy's source to a progress bar.
type meteredStore struct {
	blob.Store
	p *progress
}

func (m meteredStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	r, err := m.Store.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return meteredBlobReader{Reader: r, p: m.p}, nil
}

type meteredBlobReader struct {
	blob.Reader
	p *progress
}

func (r meteredBlobReader) Read(b []byte) (int, error) {
	n, err := r.Reader.Read(b)
	r.p.Add(int64(n))
	return n, err
}

type meteredReader struct {
	io.Reader
	p *progress
}

func (r meteredReader) Read(b []byte) (int, error) {
	n, err := r.Reader.Read(b)
	r.p.Add(int64(n))
	return n, err
}
