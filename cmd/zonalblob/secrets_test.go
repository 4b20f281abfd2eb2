package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// newS3 starts the S3 emulator with a general purpose bucket and returns its
// endpoint.
func newS3(t *testing.T, bucket string) string {
	t.Helper()
	srv := s3expresstest.Start(t, s3expresstest.Options{})
	if err := srv.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	return srv.URL()
}

// s3Env is the child's AWS environment for the emulator: its static
// credentials and no shared files or instance metadata.
func s3Env(t *testing.T) []string {
	dir := t.TempDir()
	return []string{
		"AWS_ACCESS_KEY_ID=" + s3expresstest.DefaultAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + s3expresstest.DefaultSecretAccessKey,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// secretMark is in every secret of TestBinaryNoSecretInAnyOutput, and in
// nothing else, so that one search finds any of them in any output.
const secretMark = "Zs3kr1t"

// TestBinaryNoSecretInAnyOutput feeds credentials through every scheme,
// every place a URL can hold one (user information, credential parameters,
// an endpoint's user information) and every nesting (quorum replicas,
// tiered tiers, both), into every command, usage errors and --help included,
// and into bench --url; then searches stdout, stderr and every file the
// commands wrote for any of them.
func TestBinaryNoSecretInAnyOutput(t *testing.T) {
	s3 := newS3(t, "real")
	n := 0
	sec := func() string { n++; return fmt.Sprintf("pw%s%d", secretMark, n) }
	qe := url.QueryEscape
	ep := func(u string) string { return qe(u) }
	leaves := []string{
		// Refused at open, each for its own reason.
		"s3://AKID:" + sec() + "@bucket?region=us-east-1",
		"s3://bucket?region=us-east-1&access_key_id=" + sec() + "&secret_access_key=" + sec(),
		"gs://user:" + sec() + "@bucket",
		"azblob://container?sas_token=" + sec() + "&sig=" + sec(),
		"file://u:" + sec() + "@" + t.TempDir(),
		"file:relative?token=" + sec(),
		"mem://?token=" + sec(),
		"gcsrapid://bucket?endpoint=" + qe("u:"+sec()+"@127.0.0.1:1"),
		"gcsrapid://u:" + sec() + "@bucket",
		"s3express://b--use1-az4--x-s3?region=us-east-1&endpoint=" + ep("http://u:"+sec()+"@127.0.0.1:1"),
		"azpremium://c?account=acct&key=" + sec(),
		"azpremium://c?account=acct&endpoint=" + ep("http://u:"+sec()+"@127.0.0.1:1"),
		"nosuch://u:" + sec() + "@h?password=" + sec(),
		// Opened, then failing on I/O: the SDK's own errors quote the
		// endpoint it dialled.
		"s3://bucket?region=us-east-1&use_path_style=true&endpoint=" + ep("http://u:"+sec()+"@127.0.0.1:1"),
		"s3://missing?region=us-east-1&use_path_style=true&endpoint=" + ep(strings.Replace(s3, "://", "://u:"+sec()+"@", 1)),
	}
	var urls []string
	for _, l := range leaves {
		urls = append(urls,
			l,
			"quorum://?w=1&replica="+qe(l),
			"tiered://?after=1h&hot="+qe(l)+"&cold=mem%3A%2F%2F",
			"quorum://?w=1&replica="+qe("tiered://?hot="+qe(l)+"&cold=mem%3A%2F%2F"),
		)
	}
	env := append(s3Env(t), "AWS_MAX_ATTEMPTS=1", "AWS_RETRY_MODE=standard")
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "local"), "data")
	other := "file://" + t.TempDir()
	mustExec(t, proc{stdin: "x", env: env}, "put", "-q", other, "k")
	check := func(what string, out string) {
		t.Helper()
		if i := strings.Index(out, secretMark); i >= 0 {
			t.Errorf("%s shows a secret: ...%s...", what, out[max(0, i-60):min(len(out), i+40)])
		}
	}
	commands := func(u string) [][]string {
		return [][]string{
			{"ls", u},
			{"ls", "-lr", u, "p/"},
			{"stat", u, "k"},
			{"cat", u, "k"},
			{"put", u, "k"},
			{"rm", u, "k"},
			{"rm", "-r", "--yes", u, "p/"},
			{"du", u},
			{"cp", u, "k", other, "k2"},
			{"cp", other, "k", u, "k"},
			{"cp", "local", u, "k"},
			{"cp", u, "k", "./dl"},
			// Usage errors and help, which could echo an argument.
			{"cat", u},
			{"ls", u, "a", "b"},
			{"ls", u, "--frob=" + u},
			{"ls", u, "--help"},
			{"help", u},
			{"lss", u},
			{u},
		}
	}
	for i, u := range urls {
		cmds := commands(u)
		if i%4 != 0 {
			// The nestings: the commands that open the store in each way.
			cmds = cmds[:1]
			cmds = append(cmds, []string{"cp", other, "k", u, "k"}, []string{"put", u, "k"})
		}
		for _, args := range cmds {
			r := zbExec(t, proc{stdin: "x", dir: work, env: env}, args...)
			check(fmt.Sprintf("%s (url %d, exit %d)", args[0], i, r.code), r.stdout+r.stderr)
		}
	}
	// bench --url writes a report to stdout and three files.
	out := t.TempDir()
	for i, u := range urls {
		if i%2 != 0 {
			continue
		}
		r := zbExec(t, proc{dir: work, env: env}, "bench", "--url", u, "--timeout", "2s", "--duration", "50ms", "--warmup", "0s", "--rate", "50", "--out", out)
		check(fmt.Sprintf("bench --url (url %d, exit %d)", i, r.code), r.stdout+r.stderr)
	}
	filepath.WalkDir(work, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			check(p, string(b)+p)
		}
		return nil
	})
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".png") {
			b, _ := os.ReadFile(p)
			check(p, string(b))
		}
		return nil
	})
	if n < 15 {
		t.Fatalf("only %d secrets", n)
	}
}
