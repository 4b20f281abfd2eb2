package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/s3express"
)

// serveCommand runs the emulators as a long-running server: GCS Rapid
// (zonal) and regional GCS buckets over the google.storage.v2 gRPC protocol,
// S3 Express directory buckets, and Azurite where it is installed. It prints
// a URL per store for any zonalblob program, a quorum and a tiered store over
// them, and the environment other clients need, until interrupted.
func serveCommand() *command {
	return &command{
		name:     "serve",
		synopsis: "[--gcsrapid NAME]... [--regional NAME]... [--s3express NAME]... [--azure NAME]... [--zones N] [--profile NAME] [--port-base N] [--dir DIR]",
		summary:  "run storage emulators on 127.0.0.1 and print URLs for them, until interrupted",
		details: `Runs emulators on 127.0.0.1 until interrupted (Ctrl-C or SIGTERM; exit 0),
objects in memory, gone when serve stops:

  --gcsrapid NAME   a GCS Rapid (zonal) bucket, each on its own emulator (a
                    zone): appendable objects over google.storage.v2 gRPC
  --regional NAME   a regional GCS bucket; all on one emulator (a region)
  --s3express NAME  an S3 Express One Zone directory bucket (BASE--AZID--x-s3,
                    e.g. logs--use1-az4--x-s3); all on one S3 emulator, whose
                    region is us-east-1 whatever the AZ ID says
  --azure NAME      a container on Azurite (Azure Blob), if installed: 'make
                    tools' puts it under tools/, which serve finds from any
                    directory of the repository; otherwise a note on stderr
  --zones N         N zonal buckets all named "zone", one emulator each: the
                    default layout (3) when no bucket flag is given

Output (stdout), in two blocks:

  LABEL:  URL       one line per store, in this order: "zone I" or
                    "gcsrapid NAME", "regional NAME", "s3express NAME",
                    "azure NAME"; then "quorum" (a majority quorum over the
                    zonal buckets, when there are at least 3) and "tiered" (hot:
                    that quorum, else the first zonal bucket; cold: --dir if
                    given, else the first regional bucket, else a temporary
                    directory)
  (a blank line)
  export NAME='V'   the environment other clients use, then comment lines;
                    the last line, "# profile ...", says that all is ready

Everything after the blank line is shell: eval it (or source it) in another
shell, and every printed URL works there. The credentials printed are the
emulators' fixed test values (and Azurite's published development key),
never any from serve's own environment. For example:

  zonalblob serve --gcsrapid zone-a --gcsrapid zone-b --gcsrapid zone-c \
      --regional cold --s3express logs--use1-az4--x-s3 --port-base 9400 > /tmp/zb &
  until grep -q '^# profile' /tmp/zb; do sleep 0.2; done
  eval "$(sed '1,/^$/d' /tmp/zb)"
  URL=$(awk '/^quorum:/ {print $NF}' /tmp/zb)
  echo hello | zonalblob put "$URL" greeting
  zonalblob cat "$URL" greeting

--port-base N puts the emulators on N, N+1, ... in the order above (each
zonal bucket's, the regional one's, S3's, Azurite's), so that URLs stay the
same across restarts; a port already taken fails serve (exit 1). Without it
the ports are new on every run.

Latency follows --profile: rapid (default) gives each emulator its service's
published figures (zonal: rapid; regional GCS: regional; S3 Express: express;
Azure: Premium); regional applies GCS regional figures to the zonal buckets
too; zero adds no delay anywhere.

Other clients:
  GCS       gRPC only (no JSON or XML API, so not gcloud storage or gsutil,
            nor STORAGE_EMULATOR_HOST). Go's cloud.google.com/go/storage gRPC
            client (storage.NewGRPCClient) honours STORAGE_EMULATOR_HOST_GRPC,
            which names one emulator: the regional one if served, else the
            first zone's (a comment line says which buckets it reaches); or
            pass option.WithEndpoint(HOST:PORT), insecure transport
            credentials and option.WithoutAuthentication(). Other languages'
            gRPC clients take an endpoint and anonymous credentials in their
            own options (untested here). A zonal bucket accepts only
            appendable writes, which need Rapid's bidi appendable protocol:
            as far as we know only Google's own client libraries with zonal
            bucket support speak it (Go: storage.WithAppendableUploads; only
            Go is tested here), and no other public emulator serves it.
  S3        recent AWS SDKs and the AWS CLI read AWS_ENDPOINT_URL_S3 and
            the key variables (boto3 also takes endpoint_url=...); use
            path-style addressing. Directory buckets need CreateSession
            auth, which the emulator serves; only the AWS SDK for Go v2 is
            tested against it.
  Azure     SDKs and tools that take AZURE_STORAGE_CONNECTION_STRING.

More in docs/serve.md.
`,
		minArgs: 0, maxArgs: 0,
		setup: func(fs *flag.FlagSet) action {
			var p servePlan
			fs.Var((*stringList)(&p.zonal), "gcsrapid", "serve a GCS Rapid (zonal) bucket `NAME` on its own emulator (repeatable)")
			fs.Var((*stringList)(&p.regional), "regional", "serve a regional GCS bucket `NAME` (repeatable)")
			fs.Var((*stringList)(&p.s3express), "s3express", "serve an S3 Express directory bucket `NAME`, as logs--use1-az4--x-s3 (repeatable)")
			fs.Var((*stringList)(&p.azure), "azure", "serve an Azure Blob container `NAME` on Azurite, if installed (repeatable)")
			zones := fs.Int("zones", 0, "zonal buckets named \"zone\", one emulator each (default: 3 when no bucket flag is given)")
			profile := fs.String("profile", "rapid", "latency profile: "+strings.Join(gcsrapidtest.ProfileNames(), ", "))
			fs.IntVar(&p.portBase, "port-base", 0, "put the emulators on ports `N`, N+1, ... (default: free ports, new on every run)")
			fs.StringVar(&p.dir, "dir", "", "directory for the tiered store's cold tier (default: the first regional bucket, else a new temporary directory)")
			return func(ctx context.Context, s streams, args []string) error {
				set := map[string]bool{}
				fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
				buckets := len(p.zonal) + len(p.regional) + len(p.s3express) + len(p.azure)
				switch {
				case set["zones"] && len(p.zonal) > 0:
					return usagef("--zones makes buckets named \"zone\"; with --gcsrapid each name is a zonal bucket of its own: give one or the other")
				case *zones < 0 || *zones > maxZones || set["zones"] && *zones == 0 && buckets == 0:
					return usagef("--zones %d: want 1 to %d (or 0 with a bucket flag)", *zones, maxZones)
				case !set["zones"] && buckets == 0:
					*zones = 3
				}
				p.zones = *zones
				prof, err := gcsrapidtest.ProfileByName(*profile)
				if err != nil {
					return usagef("--profile %q: want one of %s", *profile, strings.Join(gcsrapidtest.ProfileNames(), ", "))
				}
				p.profile = prof
				if err := p.validate(); err != nil {
					return err
				}
				return p.run(ctx, s)
			}
		},
	}
}

// maxZones bounds --zones: each zone is an emulator with its own port.
const maxZones = 64

// servePlan is what serve was asked for, checked before anything starts.
type servePlan struct {
	zones     int      // zonal buckets named "zone", one emulator each
	zonal     []string // --gcsrapid: one emulator each
	regional  []string // one emulator for all
	s3express []string // one emulator for all
	azure     []string // one Azurite for all
	profile   gcsrapidtest.Profile
	portBase  int // 0: free ports
	dir       string
}

// gcsBucketName is a GCS bucket name without dots: 3 to 63 lower-case
// letters, digits, '-' and '_', beginning and ending with a letter or digit.
var gcsBucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$`)

// azureContainerName is an Azure container name: 3 to 63 lower-case letters,
// digits and single hyphens, beginning and ending with a letter or digit.
var azureContainerName = regexp.MustCompile(`^[a-z0-9](?:-?[a-z0-9])*$`)

func (p *servePlan) validate() error {
	seen := map[string]string{}
	once := func(flag, name string) error {
		if prev, ok := seen[name]; ok {
			return usagef("%s %q: already given as %s %q (bucket names are global, as on the real services)", flag, name, prev, name)
		}
		seen[name] = flag
		return nil
	}
	for _, group := range []struct {
		flag  string
		names []string
		ok    func(string) bool
		rule  string
	}{
		{"--gcsrapid", p.zonal, gcsBucketName.MatchString, "3 to 63 lower-case letters, digits, '-' and '_', beginning and ending with a letter or digit"},
		{"--regional", p.regional, gcsBucketName.MatchString, "3 to 63 lower-case letters, digits, '-' and '_', beginning and ending with a letter or digit"},
		{"--s3express", p.s3express, func(n string) bool { return s3express.ValidateBucket(n) == nil },
			"a directory bucket name is BASE--AZID--x-s3, for example logs--use1-az4--x-s3"},
		{"--azure", p.azure, func(n string) bool { return len(n) >= 3 && len(n) <= 63 && azureContainerName.MatchString(n) },
			"3 to 63 lower-case letters, digits and single hyphens, beginning and ending with a letter or digit"},
	} {
		for _, n := range group.names {
			if !group.ok(n) {
				return usagef("%s %q: not a valid name (%s)", group.flag, shortArg(n), group.rule)
			}
			if err := once(group.flag, n); err != nil {
				return err
			}
		}
	}
	if n := p.emulatorCount(); p.portBase != 0 && (p.portBase < 1 || p.portBase+n-1 > 65535) {
		return usagef("--port-base %d: want a port from 1 to %d (ports %d-%d for %d emulators would not all exist)", p.portBase, 65536-n, p.portBase, p.portBase+n-1, n)
	}
	return nil
}

// emulatorCount is how many emulators (and so ports) the plan runs, Azurite
// included.
func (p *servePlan) emulatorCount() int {
	n := p.zones + len(p.zonal)
	for _, names := range [][]string{p.regional, p.s3express, p.azure} {
		if len(names) > 0 {
			n++
		}
	}
	return n
}

// storeLine is one "LABEL:  URL" line of serve's output.
type storeLine struct{ label, url string }

func (p *servePlan) run(ctx context.Context, s streams) error {
	em, err := startEmulators(ctx, p, s.stderr)
	if err != nil {
		return err
	}
	defer em.close()

	var lines []storeLine
	var zonalURLs []string
	for _, z := range em.zonal {
		u := "gcsrapid://" + z.bucket + "?endpoint=" + z.addr
		lines = append(lines, storeLine{z.label, u})
		zonalURLs = append(zonalURLs, u)
	}
	var regionalURLs []string
	for _, name := range p.regional {
		u := "gs://" + name + "?endpoint=" + em.regional
		lines = append(lines, storeLine{"regional " + name, u})
		regionalURLs = append(regionalURLs, u)
	}
	for _, name := range p.s3express {
		lines = append(lines, storeLine{"s3express " + name, "s3express://" + name + "?region=" + s3Region + "&endpoint=http://" + em.s3})
	}
	if em.azure != "" {
		for _, name := range p.azure {
			lines = append(lines, storeLine{"azure " + name, "azpremium://" + name + "?account=" + azureAccount + "&endpoint=" + azureEndpoint(em.azure)})
		}
	}

	hot := ""
	if len(zonalURLs) >= 3 {
		q := url.Values{"replica": zonalURLs}
		q.Set("w", fmt.Sprint(len(zonalURLs)/2+1))
		hot = "quorum://?" + q.Encode()
		lines = append(lines, storeLine{"quorum", hot})
	} else if len(zonalURLs) > 0 {
		hot = zonalURLs[0]
	}
	if hot != "" {
		cold := ""
		switch {
		case p.dir != "" || len(regionalURLs) == 0:
			dir, cleanup, err := coldDir(p.dir)
			if err != nil {
				return err
			}
			defer cleanup()
			cold = (&url.URL{Scheme: "file", Path: dir}).String()
		default:
			cold = regionalURLs[0]
		}
		v := url.Values{"hot": {hot}, "cold": {cold}, "after": {"1m"}}
		if strings.HasPrefix(cold, "file:") {
			// A directory enforces conditional writes only within one
			// process: the programs sharing this URL elect their
			// compactor in hot.
			v.Set("lease_in", "hot")
		}
		lines = append(lines, storeLine{"tiered", "tiered://?" + v.Encode()})
	}

	for _, l := range lines {
		fmt.Fprintf(s.stdout, "%s:  %s\n", l.label, l.url)
	}
	fmt.Fprintln(s.stdout)
	writeServeEnv(s.stdout, p, em)
	<-ctx.Done()
	return nil
}

// coldDir returns the tiered store's cold directory: dir, created if need
// be, or a new temporary one that cleanup removes.
func coldDir(dir string) (abs string, cleanup func(), err error) {
	cleanup = func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "zonalblob-serve-cold-"); err != nil {
			return "", nil, err
		}
		tmp := dir
		cleanup = func() { os.RemoveAll(tmp) }
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	if abs, err = filepath.Abs(dir); err != nil {
		cleanup()
		return "", nil, err
	}
	return abs, cleanup, nil
}

// writeServeEnv writes the shell block: export lines for other clients, then
// comments, the last of which says that serve is ready.
func writeServeEnv(w io.Writer, p *servePlan, em *runningEmulators) {
	export := func(name, value string) { fmt.Fprintf(w, "export %s='%s'\n", name, value) }
	if grpcHost, reaches := em.grpcHost(p); grpcHost != "" {
		if len(em.zonal)+min(len(p.regional), 1) > 1 {
			fmt.Fprintf(w, "# STORAGE_EMULATOR_HOST_GRPC reaches %s; each other GCS bucket is at its URL's endpoint=\n", reaches)
		}
		export("STORAGE_EMULATOR_HOST_GRPC", grpcHost)
	}
	if em.s3 != "" {
		export("AWS_ENDPOINT_URL_S3", "http://"+em.s3)
		export("AWS_ACCESS_KEY_ID", s3AccessKeyID)
		export("AWS_SECRET_ACCESS_KEY", s3SecretAccessKey)
		export("AWS_REGION", s3Region)
	}
	if em.azure != "" {
		export("AZURE_STORAGE_CONNECTION_STRING", azureConnectionString(em.azure))
	}
	fmt.Fprintf(w, "# profile %s; objects live in memory until serve stops (Ctrl-C)\n", p.profile.Name)
}
