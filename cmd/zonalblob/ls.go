package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/zonalblob/zonalblob/blob"
)

func lsCommand() *command {
	return &command{
		name:     "ls",
		synopsis: "STORE [PREFIX] [-r] [-l] [-h] [--json] [--delimiter D] [--start-after K]",
		summary:  "list objects one level deep (-r: all), in byte order of their keys",
		details: `Prints the objects and "directories" directly under PREFIX (default: the
whole store), one per line, in byte order; a directory is every key sharing a
prefix up to the next "/", shown once and ending in "/". -r lists every object
under PREFIX instead. A PREFIX without a final "/" that names a directory
lists that directory, as "ls logs" does on a file system.

-l adds each object's size in bytes (-h: in KiB, MiB, ...) and modification
time (UTC), and ends with a TOTAL line. --json prints one JSON object per line
instead: {"key", "size", "mod_time", "md5"} for an object, {"key", "dir":
true} for a directory, with keys exactly as stored. In the other formats a key
with a control character (or beginning with a double quote) is printed
quoted and escaped, as a Go string, so that it cannot redraw the terminal.

One-letter flags combine: -lh, -rl. An empty store, or a PREFIX that no key
begins with, prints nothing and exits 0. PREFIX is a prefix, not a pattern:
*, ? and [ are ordinary key characters. When a PREFIX holding one of them
matches nothing, a line on stderr says so (exit still 0):

  zonalblob: ls takes a key prefix; wildcards are not expanded: no key starts with "gr*"

Examples:
  zonalblob ls file:///tmp/demo
  zonalblob ls -lh file:///tmp/demo logs/
  zonalblob ls -r file:///tmp/demo logs/
  zonalblob ls --json -r file:///tmp/demo | jq -r .key
  zonalblob ls file:///tmp/demo logs/ --start-after logs/0042
`,
		minArgs: 1, maxArgs: 2,
		setup: func(fs *flag.FlagSet) action {
			var o blob.ListOptions
			var long, human, recursive, asJSON bool
			fs.StringVar(&o.Prefix, "prefix", "", "list only keys that begin with `P` (same as the PREFIX argument)")
			fs.StringVar(&o.Delimiter, "delimiter", "", "group keys by their prefix up to `D` (default / without -r)")
			fs.StringVar(&o.StartAfter, "start-after", "", "list only keys that sort after `K`")
			fs.BoolVar(&long, "l", false, "long format: size, modification time, key; and a TOTAL line")
			fs.BoolVar(&long, "long", false, "same as -l")
			fs.BoolVar(&human, "h", false, "with -l, sizes in KiB, MiB, ... (--help for help)")
			fs.BoolVar(&recursive, "r", false, "list every object under the prefix, not one level")
			fs.BoolVar(&recursive, "recursive", false, "same as -r")
			fs.BoolVar(&asJSON, "json", false, "one JSON object per line")
			return func(ctx context.Context, s streams, args []string) error {
				if len(args) == 2 {
					if o.Prefix != "" {
						return usagef("give the prefix once: as the PREFIX argument or with --prefix")
					}
					o.Prefix = args[1]
				}
				if o.Prefix != "" {
					if err := blob.ValidateKey("list", o.Prefix); err != nil {
						return err
					}
				}
				if recursive && o.Delimiter != "" {
					return usagef("-r lists every object; it takes no --delimiter")
				}
				if !recursive && o.Delimiter == "" {
					o.Delimiter = "/"
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				p := listPrinter{s: s, long: long, human: human, json: asJSON}
				// "ls logs" where logs/ is a directory lists the directory:
				// look at the first two entries before printing any.
				if o.Delimiter == "/" && o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
					page, err := st.List(ctx, &blob.ListOptions{Prefix: o.Prefix, Delimiter: "/", StartAfter: o.StartAfter, PageSize: 2})
					if err != nil {
						return err
					}
					if len(page.Objects) == 1 && page.NextPageToken == "" && page.Objects[0].IsDir && page.Objects[0].Key == o.Prefix+"/" {
						o.Prefix += "/"
					}
				}
				listed := 0
				for obj, err := range blob.All(ctx, st, &o) {
					if err != nil {
						return err
					}
					listed++
					if err := p.print(obj); err != nil {
						return err
					}
				}
				if listed == 0 {
					wildcardNote(s, "ls", o.Prefix)
				}
				return p.total()
			}
		},
	}
}

type listPrinter struct {
	s                 streams
	long, human, json bool
	objects           int
	bytes             int64
}

// listJSON is one line of ls --json.
type listJSON struct {
	Key     string     `json:"key"`
	Dir     bool       `json:"dir,omitempty"`
	Size    *int64     `json:"size,omitempty"`
	ModTime *time.Time `json:"mod_time,omitempty"`
	MD5     string     `json:"md5,omitempty"`
}

func (p *listPrinter) print(obj blob.ListObject) error {
	if !obj.IsDir {
		p.objects++
		p.bytes += obj.Size
	}
	var err error
	switch {
	case p.json:
		j := listJSON{Key: obj.Key, Dir: obj.IsDir}
		if !obj.IsDir {
			size := obj.Size
			j.Size, j.ModTime, j.MD5 = &size, timeOrNil(obj.ModTime), hex.EncodeToString(obj.MD5)
		}
		b, merr := json.Marshal(j)
		if merr != nil {
			return merr
		}
		_, err = fmt.Fprintf(p.s.stdout, "%s\n", b)
	case !p.long:
		_, err = fmt.Fprintln(p.s.stdout, displayKey(obj.Key))
	case obj.IsDir:
		_, err = fmt.Fprintf(p.s.stdout, "%12s  %-20s  %s\n", "DIR", "", displayKey(obj.Key))
	default:
		_, err = fmt.Fprintf(p.s.stdout, "%12s  %-20s  %s\n", p.size(obj.Size), formatTime(obj.ModTime), displayKey(obj.Key))
	}
	return err
}

func (p *listPrinter) size(n int64) string {
	if p.human {
		return formatBytes(n)
	}
	return strconv.FormatInt(n, 10)
}

// total ends a long listing, as gsutil ls -l does.
func (p *listPrinter) total() error {
	if !p.long || p.json {
		return nil
	}
	_, err := fmt.Fprintf(p.s.stdout, "TOTAL: %s, %s\n", plural(p.objects, "object"), byteCount(p.bytes))
	return err
}

// displayKey is key as printed for a person: as stored, unless it holds a
// character that a terminal would act on (or it begins with a double quote),
// in which case it is quoted and escaped as a Go string.
func displayKey(key string) string {
	if strings.HasPrefix(key, `"`) || strings.IndexFunc(key, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u202e'
	}) >= 0 {
		return strconv.Quote(key)
	}
	return key
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// byteCount is "1234 bytes (1.2 KiB)", or "12 bytes".
func byteCount(n int64) string {
	if n < 1024 {
		return plural(int(n), "byte")
	}
	return fmt.Sprintf("%d bytes (%s)", n, formatBytes(n))
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// folderHint adds to a missing object's error that key names a folder, when
// it does: "logs" is not an object, but logs/ holds some.
func folderHint(ctx context.Context, st blob.Store, key string, err error) error {
	if !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	page, lerr := st.List(ctx, &blob.ListOptions{Prefix: folderPrefix(key), PageSize: 1})
	if lerr != nil || len(page.Objects) == 0 {
		return err
	}
	return fmt.Errorf("%w (%q is a folder: list it with ls STORE %s)", err, key, folderPrefix(key))
}

// wildcardNote says on stderr, when prefix matched nothing and looks like a
// shell pattern, that it was taken as a prefix: a user who typed 'gr*'
// otherwise sees an empty listing and no reason.
func wildcardNote(s streams, cmd, prefix string) {
	if strings.ContainsAny(prefix, "*?[") {
		fmt.Fprintf(s.stderr, "zonalblob: %s takes a key prefix; wildcards are not expanded: no key starts with %q\n", cmd, prefix)
	}
}
