package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func putCommand() *command {
	return &command{
		name:     "put",
		synopsis: "STORE KEY [FILE|-] [--content-type T] [--metadata k=v]... [--if-not-exist] [--json] [-q]",
		summary:  "write an object from a file or stdin",
		details: `Streams FILE (or standard input, when FILE is "-" or absent) to KEY. The
object appears only when the whole input has been written: an interrupted put
leaves the old object, if any, in place (and exits 130 on Ctrl-C). Without
--content-type the backend guesses one from the content. A line on stderr
sums up what was written (-q: nothing). A KEY ending in "/" names a folder:
the object is KEY followed by FILE's name (from stdin, name the object).

--json prints on stdout one JSON object for what was written: {"key",
"size", "generation"}. The generation is read by a Stat right after the
write, and left out if that Stat finds another writer's object (a size or
MD5 other than what was written).

Examples:
  zonalblob put 'file:///tmp/demo?create_dir=true' report.csv ./report.csv --content-type text/csv
  date | zonalblob put file:///tmp/demo now --metadata source=date --metadata host=$(hostname)
  zonalblob put file:///tmp/demo lock --if-not-exist < /dev/null   # exit 1 if it exists
  zonalblob put --json file:///tmp/demo report.csv ./report.csv | jq -r .generation
`,
		minArgs: 2, maxArgs: 3,
		setup: func(fs *flag.FlagSet) action {
			var o blob.WriterOptions
			md := metadataFlag{}
			fs.StringVar(&o.ContentType, "content-type", "", "the object's content type, such as `text/plain`")
			fs.Var(md, "metadata", "user metadata `key=value` (repeatable)")
			var ifNotExist bool
			var ifGeneration string
			fs.BoolVar(&ifNotExist, "if-not-exist", false, "fail (exit 1) if the object already exists")
			fs.StringVar(&ifGeneration, "if-generation", "", "fail unless the object's current generation is `G` (see stat)")
			var quiet, asJSON bool
			fs.BoolVar(&quiet, "q", false, "quiet: no summary line")
			fs.BoolVar(&asJSON, "json", false, "print the key, size and generation written as one JSON object")
			return func(ctx context.Context, s streams, args []string) error {
				switch {
				case ifNotExist && ifGeneration != "":
					return usagef("--if-not-exist and --if-generation exclude each other")
				case ifNotExist:
					o.If = blob.IfNotExist()
				case ifGeneration != "":
					o.If = blob.IfGenerationMatch(ifGeneration)
				}
				if len(md) > 0 {
					o.Metadata = md
				}
				if err := blob.ValidateKey("write", args[1]); err != nil {
					return err
				}
				key := args[1]
				if strings.HasSuffix(key, "/") {
					if len(args) < 3 || args[2] == "-" {
						return usagef("KEY %q ends in \"/\", a folder: name the object to write from stdin (%sNAME)", shortArg(key), shortArg(key))
					}
					key += filepath.Base(args[2])
					if err := blob.ValidateKey("write", key); err != nil {
						return err
					}
				}
				in := s.stdin
				if len(args) == 3 && args[2] != "-" {
					f, err := openLocalFile(args[2])
					if err != nil {
						return err
					}
					defer f.Close()
					in = f
				}
				st, err := openStore(ctx, args[0])
				if err != nil {
					return err
				}
				defer st.Close()
				start := time.Now()
				sum := md5.New()
				cr := &countingReader{r: io.TeeReader(interruptible(ctx, in), sum)}
				if err := blob.WriteFrom(ctx, st, key, cr, &o); err != nil {
					if ctx.Err() != nil {
						return &partial{done: 0, total: 1, verb: "written"}
					}
					return err
				}
				if asJSON {
					j := putJSON{Key: key, Size: cr.n}
					a, err := st.Stat(ctx, key)
					switch {
					case err != nil:
						fmt.Fprintf(s.stderr, "zonalblob: wrote %q, but cannot read its generation: %v\n", key, err)
					case a.Size != cr.n || len(a.MD5) > 0 && !bytes.Equal(a.MD5, sum.Sum(nil)):
						fmt.Fprintf(s.stderr, "zonalblob: wrote %q, but another write replaced it before its generation was read\n", key)
					default:
						j.Generation = a.Generation
					}
					if err := printJSON(s.stdout, []putJSON{j}); err != nil {
						return err
					}
				}
				if !quiet {
					fmt.Fprintln(s.stderr, summary("wrote", 1, cr.n, time.Since(start)))
				}
				return nil
			}
		},
	}
}

// metadataFlag collects repeated --metadata key=value flags.
type metadataFlag map[string]string

func (m metadataFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func (m metadataFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if _, dup := m[k]; dup {
		return fmt.Errorf("key %q given twice", k)
	}
	m[k] = val
	return nil
}

// putJSON is put --json.
type putJSON struct {
	Key        string `json:"key"`
	Size       int64  `json:"size"`
	Generation string `json:"generation,omitempty"`
}
