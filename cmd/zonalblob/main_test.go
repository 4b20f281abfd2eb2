package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
)

type result struct {
	code           int
	stdout, stderr string
}

// zb runs one command line in-process with stdin as its input.
func zb(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// mustZB runs a command line that must succeed and returns its stdout.
func mustZB(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := zb(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("zonalblob %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

// wantFail checks the exit code and that stderr says what went wrong.
func wantFail(t *testing.T, r result, code int, inStderr ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr:\n%s", r.code, code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "zonalblob: ") {
		t.Errorf("stderr does not start with \"zonalblob: \":\n%s", r.stderr)
	}
	for _, s := range inStderr {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

// fileStore returns the URL of a new empty directory store.
func fileStore(t *testing.T) string {
	return (&url.URL{Scheme: "file", Path: t.TempDir()}).String()
}

func TestLsEmptyMem(t *testing.T) {
	if out := mustZB(t, "", "ls", "mem://"); out != "" {
		t.Errorf("ls mem:// printed %q, want nothing", out)
	}
}

func TestPutStatCat(t *testing.T) {
	s := fileStore(t)
	mustZB(t, "hello, world\n", "put", s, "docs/hello.txt", "--content-type", "text/plain", "--metadata", "owner=ana", "--metadata", "empty=")
	file := filepath.Join(t.TempDir(), "in.bin")
	if err := os.WriteFile(file, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Flags after the positional arguments, and FILE given by name.
	mustZB(t, "", "put", s, "digits", file, "--content-type", "application/octet-stream")

	if got := mustZB(t, "", "cat", s, "docs/hello.txt"); got != "hello, world\n" {
		t.Errorf("cat = %q", got)
	}
	var st statJSON
	if err := json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", s, "docs/hello.txt")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Key != "docs/hello.txt" || st.Size != 13 || st.ContentType != "text/plain" ||
		st.Metadata["owner"] != "ana" || st.Metadata["empty"] != "" || len(st.Metadata) != 2 ||
		st.MD5 == "" || st.Generation == "" || st.ModTime == nil {
		t.Errorf("stat --json = %+v", st)
	}
	text := mustZB(t, "", "stat", s, "digits")
	for _, want := range []string{"key:", "digits", "size:", "10", "content-type:", "application/octet-stream", "md5:", "generation:", "modified:"} {
		if !strings.Contains(text, want) {
			t.Errorf("stat lacks %q:\n%s", want, text)
		}
	}

	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"whole", nil, "0123456789"},
		{"offset", []string{"--offset", "7"}, "789"},
		{"length", []string{"--length", "3"}, "012"},
		{"range", []string{"--offset", "2", "--length", "4"}, "2345"},
		{"length past end", []string{"--offset", "8", "--length", "100"}, "89"},
		{"offset at end", []string{"--offset", "10"}, ""},
		{"zero length", []string{"--length", "0"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustZB(t, "", append([]string{"cat", s, "digits"}, tc.flags...)...); got != tc.want {
				t.Errorf("cat %v = %q, want %q", tc.flags, got, tc.want)
			}
		})
	}
}

func TestLs(t *testing.T) {
	s := fileStore(t)
	for _, k := range []string{"b", "a/2", "a/1", "c/x/y", "a/3"} {
		mustZB(t, "data-"+k, "put", s, k)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one level", nil, "a/\nb\nc/\n"},
		{"recursive", []string{"-r"}, "a/1\na/2\na/3\nb\nc/x/y\n"},
		{"prefix", []string{"--prefix", "a/"}, "a/1\na/2\na/3\n"},
		{"prefix argument", []string{"a/"}, "a/1\na/2\na/3\n"},
		{"folder without slash", []string{"a"}, "a/1\na/2\na/3\n"},
		{"start after", []string{"-r", "--start-after", "a/2"}, "a/3\nb\nc/x/y\n"},
		{"delimiter", []string{"--delimiter", "/"}, "a/\nb\nc/\n"},
		{"prefix and delimiter", []string{"--prefix", "c/", "--delimiter", "/"}, "c/x/\n"},
		{"nothing matches", []string{"--prefix", "zzz"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustZB(t, "", append([]string{"ls", s}, tc.args...)...); got != tc.want {
				t.Errorf("ls %v =\n%s\nwant\n%s", tc.args, got, tc.want)
			}
		})
	}

	long := mustZB(t, "", "ls", "-l", s)
	lines := strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("ls -l printed %d lines:\n%s", len(lines), long)
	}
	if f := strings.Fields(lines[0]); len(f) != 2 || f[0] != "DIR" || f[1] != "a/" {
		t.Errorf("ls -l directory line = %q", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) != 3 || f[0] != "6" || !strings.HasSuffix(f[1], "Z") || f[2] != "b" {
		t.Errorf("ls -l object line = %q, want size, UTC time, key", lines[1])
	}
	if lines[3] != "TOTAL: 1 object, 6 bytes" {
		t.Errorf("ls -l total line = %q", lines[3])
	}
	if got := mustZB(t, "", "ls", "--long", s, "--prefix", "b"); got != lines[1]+"\nTOTAL: 1 object, 6 bytes\n" {
		t.Errorf("--long = %q, want the -l line %q", got, lines[1])
	}
}

func TestCp(t *testing.T) {
	src, dst := fileStore(t), fileStore(t)
	mustZB(t, "payload", "put", src, "in/obj", "--content-type", "text/x-test", "--metadata", "k=v")

	checkCopy := func(t *testing.T, store, key string) {
		t.Helper()
		if got := mustZB(t, "", "cat", store, key); got != "payload" {
			t.Errorf("copy holds %q", got)
		}
		var st statJSON
		if err := json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", store, key)), &st); err != nil {
			t.Fatal(err)
		}
		if st.ContentType != "text/x-test" || st.Metadata["k"] != "v" {
			t.Errorf("copy lost attributes: content type %q, metadata %v", st.ContentType, st.Metadata)
		}
	}

	t.Run("between stores", func(t *testing.T) {
		mustZB(t, "", "cp", src, "in/obj", dst, "out/obj")
		checkCopy(t, dst, "out/obj")
	})
	t.Run("within a store", func(t *testing.T) {
		mustZB(t, "", "cp", src, "in/obj", src, "in/copy")
		checkCopy(t, src, "in/copy")
	})
	t.Run("to mem", func(t *testing.T) {
		// The mem:// store dies with the command, so only the exit code can be
		// checked here; the file-to-file cases check the bytes.
		mustZB(t, "", "cp", src, "in/obj", "mem://", "obj")
	})
	t.Run("if-not-exist conflict", func(t *testing.T) {
		wantFail(t, zb(t, "", "cp", "--if-not-exist", src, "in/obj", dst, "out/obj"), exitFailed, "already exists")
	})
	t.Run("missing source", func(t *testing.T) {
		wantFail(t, zb(t, "", "cp", src, "nope", dst, "x"), exitNotFound, "not found")
		wantFail(t, zb(t, "", "cp", "mem://", "a", "mem://", "b"), exitNotFound, "not found")
	})
	t.Run("recursive", func(t *testing.T) {
		rsrc, rdst := fileStore(t), fileStore(t)
		for _, k := range []string{"logs/1", "logs/2", "logs/sub/3", "other"} {
			mustZB(t, "x"+k, "put", rsrc, k)
		}
		mustZB(t, "", "cp", "-r", rsrc, "logs/", rdst, "backup/", "--jobs", "2")
		if got, want := mustZB(t, "", "ls", "-r", rdst), "backup/1\nbackup/2\nbackup/sub/3\n"; got != want {
			t.Errorf("after cp -r, ls =\n%s\nwant\n%s", got, want)
		}
		if got := mustZB(t, "", "cat", rdst, "backup/sub/3"); got != "xlogs/sub/3" {
			t.Errorf("backup/sub/3 = %q", got)
		}
		// An empty destination prefix mirrors the keys.
		mirror := fileStore(t)
		mustZB(t, "", "cp", "--recursive", rsrc, "", mirror, "")
		if got, want := mustZB(t, "", "ls", "-r", mirror), "logs/1\nlogs/2\nlogs/sub/3\nother\n"; got != want {
			t.Errorf("mirror ls =\n%s\nwant\n%s", got, want)
		}
		wantFail(t, zb(t, "", "cp", "-r", rsrc, "nothing/", rdst, "x/"), exitNotFound, "no objects under prefix")
	})
}

func TestPutIfNotExist(t *testing.T) {
	s := fileStore(t)
	mustZB(t, "first", "put", "--if-not-exist", s, "lock")
	wantFail(t, zb(t, "second", "put", "--if-not-exist", s, "lock"), exitFailed, "already exists")
	if got := mustZB(t, "", "cat", s, "lock"); got != "first" {
		t.Errorf("a failed --if-not-exist put changed the object to %q", got)
	}
}

func TestGenerationPreconditions(t *testing.T) {
	s := fileStore(t)
	mustZB(t, "v1", "put", s, "k")
	var st statJSON
	if err := json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", s, "k")), &st); err != nil {
		t.Fatal(err)
	}
	wantFail(t, zb(t, "v2", "put", s, "k", "--if-generation", "stale"), exitFailed, "precondition")
	wantFail(t, zb(t, "", "rm", s, "k", "--if-generation", "stale"), exitFailed, "precondition")
	mustZB(t, "", "rm", s, "k", "--if-generation", st.Generation)
	wantFail(t, zb(t, "", "stat", s, "k"), exitNotFound, "not found")
}

func TestRm(t *testing.T) {
	s := fileStore(t)
	for _, k := range []string{"a", "b", "c"} {
		mustZB(t, k, "put", s, k)
	}
	mustZB(t, "", "rm", s, "a", "b")
	if got := mustZB(t, "", "ls", s); got != "c\n" {
		t.Errorf("after rm a b, ls = %q", got)
	}
	// A missing key is reported, and the others are still deleted.
	wantFail(t, zb(t, "", "rm", s, "missing", "c"), exitNotFound, `"missing"`, "not found")
	if got := mustZB(t, "", "ls", s); got != "" {
		t.Errorf("rm did not delete c after a missing key: ls = %q", got)
	}
	mustZB(t, "", "rm", "-f", s, "missing")
	// A malformed key deletes nothing, not even the valid keys before it.
	mustZB(t, "x", "put", s, "keep")
	wantFail(t, zb(t, "", "rm", s, "keep", strings.Repeat("k", 1025)), exitUsage, "longer than 1024")
	if got := mustZB(t, "", "ls", s); got != "keep\n" {
		t.Errorf("rm with a malformed key deleted something: ls = %q", got)
	}
}

func TestUsageErrors(t *testing.T) {
	s := fileStore(t)
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  []string
		stdout  []string
		noError bool // help goes to stdout and is not an error
	}{
		{name: "no arguments", args: nil, code: exitUsage, stderr: []string{"no command given", "Usage:", "Exit codes:"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: []string{`unknown command "frobnicate"; run 'zonalblob help'`}},
		{name: "ls without store", args: []string{"ls"}, code: exitUsage, stderr: []string{"ls: missing STORE\n", "usage: zonalblob ls STORE"}},
		{name: "cat without key", args: []string{"cat", s}, code: exitUsage, stderr: []string{"cat: missing KEY\n"}},
		{name: "stat without key", args: []string{"stat", s}, code: exitUsage, stderr: []string{"stat: missing KEY\n"}},
		{name: "put without key", args: []string{"put", s}, code: exitUsage, stderr: []string{"put: missing KEY\n"}},
		{name: "cp with three", args: []string{"cp", s, "a", s}, code: exitUsage, stderr: []string{"missing DST KEY after the store"}},
		{name: "rm without key", args: []string{"rm", s}, code: exitUsage, stderr: []string{"rm: missing KEY\n"}},
		{name: "too many", args: []string{"cat", s, "a", "b"}, code: exitUsage, stderr: []string{"too many arguments"}},
		{name: "unknown flag", args: []string{"ls", s, "--frob"}, code: exitUsage, stderr: []string{"flag provided but not defined: -frob"}},
		{name: "bad flag value", args: []string{"cat", s, "k", "--offset", "x"}, code: exitUsage, stderr: []string{"--offset"}},
		{name: "negative offset", args: []string{"cat", s, "k", "--offset", "-1"}, code: exitUsage, stderr: []string{"--offset must not be negative"}},
		{name: "bad metadata", args: []string{"put", s, "k", "--metadata", "novalue"}, code: exitUsage, stderr: []string{"want key=value"}},
		{name: "conflicting preconditions", args: []string{"put", s, "k", "--if-not-exist", "--if-generation", "g"}, code: exitUsage, stderr: []string{"exclude each other"}},
		{name: "zero jobs", args: []string{"cp", "-r", s, "", s, "x/", "--jobs", "0"}, code: exitUsage, stderr: []string{"--jobs must be from 1 to 1024"}},
		{name: "help", args: []string{"help"}, code: exitOK, stdout: []string{"Commands:", "Exit codes:", "3    not found", "130  interrupted", "mem://", "file:///tmp/x"}, noError: true},
		{name: "--help", args: []string{"--help"}, code: exitOK, stdout: []string{"Commands:"}, noError: true},
		{name: "help command", args: []string{"help", "cp"}, code: exitOK, stdout: []string{"Usage: zonalblob cp", "Examples:", "-progress"}, noError: true},
		{name: "command --help", args: []string{"ls", "--help"}, code: exitOK, stdout: []string{"Usage: zonalblob ls", "-start-after", "Examples:"}, noError: true},
		{name: "command -h after args", args: []string{"put", s, "k", "-h"}, code: exitOK, stdout: []string{"Usage: zonalblob put", "-if-not-exist"}, noError: true},
		{name: "help unknown", args: []string{"help", "frob"}, code: exitUsage, stderr: []string{`unknown command "frob"`}},
		{name: "version", args: []string{"--version"}, code: exitOK, stdout: []string{"zonalblob ", "schemes: ", "file"}, noError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zb(t, "", tc.args...)
			if tc.noError {
				if r.code != tc.code || r.stderr != "" {
					t.Errorf("exit %d, stderr %q; want exit %d and no stderr", r.code, r.stderr, tc.code)
				}
			} else {
				wantFail(t, r, tc.code, tc.stderr...)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.stdout)
				}
			}
		})
	}
}

func TestStoreAndKeyErrors(t *testing.T) {
	s := fileStore(t)
	missingDir := (&url.URL{Scheme: "file", Path: filepath.Join(t.TempDir(), "absent")}).String()
	long := strings.Repeat("k", 1025)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"unknown scheme", []string{"ls", "nosuch://bucket"}, exitUsage, []string{`unknown scheme "nosuch"`, "registered schemes:", "file", "mem"}},
		{"no scheme", []string{"ls", "/tmp/dir"}, exitUsage, []string{"no scheme", "registered schemes:"}},
		{"unknown query parameter", []string{"ls", s + "?bogus=1"}, exitUsage, []string{"cannot open", `"bogus"`}},
		{"missing directory", []string{"ls", missingDir}, exitUsage, []string{"cannot open", "create_dir=true"}},
		{"cat not found", []string{"cat", s, "nope"}, exitNotFound, []string{`"nope"`, "not found"}},
		{"stat not found", []string{"stat", s, "nope"}, exitNotFound, []string{"not found"}},
		{"rm not found", []string{"rm", s, "nope"}, exitNotFound, []string{"not found"}},
		{"put file not found", []string{"put", s, "k", filepath.Join(t.TempDir(), "nofile")}, exitFailed, []string{"no such file"}},
		{"over-long key", []string{"cat", s, long}, exitUsage, []string{"invalid key", "1025 bytes, longer than 1024"}},
		{"over-long put key", []string{"put", s, long}, exitUsage, []string{"longer than 1024"}},
		{"NUL in key", []string{"stat", s, "a\x00b"}, exitUsage, []string{"invalid key", "NUL"}},
		{"invalid UTF-8 key", []string{"cat", s, "a\xffb"}, exitUsage, []string{"not valid UTF-8"}},
		{"dot segment on file://", []string{"put", s, "a/./b"}, exitUsage, []string{"invalid key", `"." path segment`}},
		{"cp over-long destination", []string{"cp", s, "a", s, long}, exitUsage, []string{"longer than 1024"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFail(t, zb(t, "", tc.args...), tc.code, tc.stderr...)
		})
	}
}

func TestCredentialsNeverPrinted(t *testing.T) {
	secrets := []string{"secretpass", "AKIDSECRET", "SIGSECRET", "TOKSECRET"}
	// Each URL fails before any network I/O: an unknown parameter or scheme is
	// rejected when the URL is opened.
	urls := []string{
		"s3://user:secretpass@bucket?region=us-east-1&access_key_id=AKIDSECRET",
		"azblob://user:secretpass@container?sas_token=SIGSECRET&sig=SIGSECRET",
		(&url.URL{Scheme: "file", Path: t.TempDir(), User: url.UserPassword("user", "secretpass"), RawQuery: "token=TOKSECRET"}).String(),
		"gcsrapid://user:secretpass@bucket?token=TOKSECRET",
		"nosuch://bucket?password=secretpass&auth=TOKSECRET",
	}
	other := fileStore(t)
	for _, u := range urls {
		for _, args := range [][]string{
			{"ls", u},
			{"stat", u, "k"},
			{"cat", u, "k"},
			{"put", u, "k"},
			{"rm", u, "k"},
			{"cp", u, "k", other, "k"},
			{"cp", other, "k", u, "k"},
		} {
			r := zb(t, "data", args...)
			if r.code == 0 || r.stderr == "" {
				t.Errorf("%s %s: exit %d, stderr %q; want a failure", args[0], redactedForLog(u), r.code, r.stderr)
			}
			for _, s := range secrets {
				if strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("%s: output shows the secret %q:\n%s%s", args[0], s, r.stdout, r.stderr)
				}
			}
		}
	}
}

// redactedForLog keeps test failure messages themselves free of the secrets.
func redactedForLog(u string) string {
	return blob.Redact(u)
}

func TestRedactorHidesSecretsInAnyMessage(t *testing.T) {
	secrets := argSecrets([]string{
		"file:///tmp/x",
		"not a url",
		"s3://AKIDUSER:p%40ss%2Fword@bucket?region=us-east-1&secret_access_key=S3CR3T%2BKEY&endpoint=http://h",
	})
	// Drivers may echo credentials raw, query-escaped or path-escaped.
	msg := "dial as AKIDUSER with p@ss/word, p%40ss%2Fword or p@ss%2Fword; key S3CR3T+KEY or S3CR3T%2BKEY; region us-east-1 via http://h"
	got := blob.RedactSecrets(msg, secrets)
	for _, s := range []string{"AKIDUSER", "p@ss", "ss/word", "S3CR3T"} {
		if strings.Contains(got, s) {
			t.Errorf("redact left %q in %q", s, got)
		}
	}
	for _, s := range []string{"us-east-1", "http://h", "dial as"} {
		if !strings.Contains(got, s) {
			t.Errorf("redact removed the harmless %q: %q", s, got)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantPos  []string
		wantLong bool
		wantPre  string
	}{
		{"flags first", []string{"-l", "--prefix", "p", "s"}, []string{"s"}, true, "p"},
		{"flags last", []string{"s", "-l", "--prefix=p"}, []string{"s"}, true, "p"},
		{"mixed", []string{"a", "--prefix", "p", "b", "-l", "c"}, []string{"a", "b", "c"}, true, "p"},
		{"dash is an argument", []string{"a", "-", "-l"}, []string{"a", "-"}, true, ""},
		{"double dash ends flags", []string{"a", "--", "-l", "--prefix"}, []string{"a", "-l", "--prefix"}, false, ""},
		{"none", nil, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stats bool
			fs := (&command{name: "t"}).flagSet(&stats)
			long := fs.Bool("l", false, "")
			prefix := fs.String("prefix", "", "")
			pos, err := parseInterspersed(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(pos, "|") != strings.Join(tc.wantPos, "|") || len(pos) != len(tc.wantPos) || *long != tc.wantLong || *prefix != tc.wantPre {
				t.Errorf("got %q long=%v prefix=%q; want %q long=%v prefix=%q", pos, *long, *prefix, tc.wantPos, tc.wantLong, tc.wantPre)
			}
		})
	}
}

func TestKeyBeginningWithDash(t *testing.T) {
	s := fileStore(t)
	mustZB(t, "dash", "put", s, "--", "-k")
	if got := mustZB(t, "", "cat", s, "--", "-k"); got != "dash" {
		t.Errorf("cat -- -k = %q", got)
	}
}

// A store URL with the key glued on ("cat gs://b/k", as gsutil takes it) is
// a usage error that shows the two-argument form; a URL that is a store as
// it stands gets no such hint.
func TestGluedKeyHint(t *testing.T) {
	dir := t.TempDir()
	s := (&url.URL{Scheme: "file", Path: dir}).String()
	mustZB(t, "x", "put", s, "greeting")
	for _, tc := range []struct {
		name string
		args []string
		hint string // "" for none
	}{
		{"cat", []string{"cat", "gs://b/k"}, "cat takes STORE KEY as two arguments: zonalblob cat gs://b k\n"},
		{"cat with a query", []string{"cat", "s3://b/logs/k?region=eu-west-1"}, "zonalblob cat 's3://b?region=eu-west-1' logs/k\n"},
		{"stat", []string{"stat", "gs://b/k"}, "stat takes STORE KEY as two arguments: zonalblob stat gs://b k\n"},
		{"rm", []string{"rm", "gs://b/k"}, "rm takes STORE KEY as two arguments: zonalblob rm gs://b k\n"},
		{"cp download", []string{"cp", "gs://bucket/key", "./x"}, "cp takes STORE KEY as two arguments: zonalblob cp gs://bucket key ./x\n"},
		{"cp upload", []string{"cp", "./x", "gs://bucket/key"}, "cp takes STORE KEY as two arguments: zonalblob cp ./x gs://bucket key\n"},
		{"mv", []string{"mv", "gs://bucket/key", "./x"}, "mv takes STORE KEY as two arguments: zonalblob mv gs://bucket key ./x\n"},
		{"put opens the URL", []string{"put", "gs://b/k", "./f"}, "put takes STORE KEY as two arguments: zonalblob put gs://b k ./f\n"},
		{"ls", []string{"ls", "gs://bucket/logs"}, "ls takes STORE PREFIX as two arguments: zonalblob ls gs://bucket logs\n"},
		{"file URL of an object", []string{"cat", s + "/greeting"}, "cat takes STORE KEY as two arguments: zonalblob cat " + s + " greeting\n"},
		{"file URL of a store", []string{"cat", s}, ""},
		{"bucket alone", []string{"cat", "gs://b"}, ""},
		{"prefix", []string{"cat", "gs://b/logs/"}, ""},
		{"mem", []string{"cat", "mem://"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zb(t, "", tc.args...)
			wantFail(t, r, exitUsage)
			if tc.hint == "" {
				if strings.Contains(r.stderr, "as two arguments") {
					t.Errorf("hint for a store URL:\n%s", r.stderr)
				}
				return
			}
			if !strings.Contains(r.stderr, "\nzonalblob: ") || !strings.Contains(r.stderr, tc.hint) {
				t.Errorf("stderr lacks the hint %q:\n%s", tc.hint, r.stderr)
			}
		})
	}
}

// ls takes a prefix, not a pattern: one with *, ? or [ that matches nothing
// says so on stderr, and exits 0 as any listing that matches nothing does.
func TestLsWildcardNote(t *testing.T) {
	s := fileStore(t)
	mustZB(t, "x", "put", s, "grape")
	note := `zonalblob: ls takes a key prefix; wildcards are not expanded: no key starts with "gr*"` + "\n"
	for _, flags := range [][]string{nil, {"--json"}, {"-r"}, {"-l"}} {
		r := zb(t, "", append([]string{"ls", s, "gr*"}, flags...)...)
		if r.code != 0 || r.stdout != "" && !slices.Contains(flags, "-l") || r.stderr != note {
			t.Errorf("ls %v 'gr*': exit %d, stdout %q, stderr %q; want 0, nothing, the note", flags, r.code, r.stdout, r.stderr)
		}
	}
	if r := zb(t, "", "ls", s, "gr"); r.code != 0 || r.stdout != "grape\n" || r.stderr != "" {
		t.Errorf("ls gr: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := zb(t, "", "ls", s, "zz"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("ls zz: exit %d, stdout %q, stderr %q; want silence", r.code, r.stdout, r.stderr)
	}
	mustZB(t, "y", "put", s, "a*b")
	if r := zb(t, "", "ls", s, "a*"); r.code != 0 || r.stdout != "a*b\n" || r.stderr != "" {
		t.Errorf("ls a* with a key a*b: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := zb(t, "", "du", s, "gr?"); r.code != 0 || !strings.Contains(r.stderr, "du takes a key prefix; wildcards are not expanded") {
		t.Errorf("du gr?: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Every command that prints a result prints it as JSON with --json, one
// object per line, and nothing else on stdout.
func TestJSONOutputs(t *testing.T) {
	s, d := fileStore(t), fileStore(t)
	decode := func(t *testing.T, out string, v any) {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var all []json.RawMessage
		for _, l := range lines {
			if !json.Valid([]byte(l)) {
				t.Fatalf("not a JSON line: %q in\n%s", l, out)
			}
			all = append(all, json.RawMessage(l))
		}
		b, _ := json.Marshal(all)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}

	var put []putJSON
	decode(t, mustZB(t, "hello", "put", "--json", s, "logs/a"), &put)
	var st statJSON
	if err := json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", s, "logs/a")), &st); err != nil {
		t.Fatal(err)
	}
	if len(put) != 1 || put[0].Key != "logs/a" || put[0].Size != 5 || put[0].Generation == "" || put[0].Generation != st.Generation {
		t.Errorf("put --json = %+v, want logs/a, 5 bytes, generation %q", put, st.Generation)
	}
	mustZB(t, "hi", "put", s, "logs/sub/b")

	var cp []copyJSON
	decode(t, mustZB(t, "", "cp", "--json", "-r", s, "logs/", d, "bk/"), &cp)
	if len(cp) != 2 || cp[0] != (copyJSON{SrcKey: "logs/a", DstKey: "bk/a", Size: 5}) || cp[1] != (copyJSON{SrcKey: "logs/sub/b", DstKey: "bk/sub/b", Size: 2}) {
		t.Errorf("cp -r --json = %+v", cp)
	}
	local := filepath.Join(t.TempDir(), "a.txt")
	cp = nil
	decode(t, mustZB(t, "", "cp", "--json", s, "logs/a", local), &cp)
	if len(cp) != 1 || cp[0] != (copyJSON{SrcKey: "logs/a", DstPath: local, Size: 5}) {
		t.Errorf("cp --json download = %+v", cp)
	}
	wantFail(t, zb(t, "", "cp", "--json", s, "logs/a", "-"), exitUsage, "--json")

	var du []duJSON
	decode(t, mustZB(t, "", "du", "--json", s), &du)
	if len(du) != 1 || du[0].Size != 7 || du[0].Objects != 2 || len(du[0].Entries) != 1 || du[0].Entries[0] != (duEntryJSON{Key: "logs/", Dir: true, Size: 7, Objects: 2}) {
		t.Errorf("du --json = %+v", du)
	}
	du = nil
	decode(t, mustZB(t, "", "du", "--json", "-s", s, "logs/sub"), &du)
	if len(du) != 1 || du[0].Prefix != "logs/sub/" || du[0].Size != 2 || du[0].Entries != nil {
		t.Errorf("du -s --json = %+v", du)
	}
	if out := mustZB(t, "", "du", "--json", fileStore(t)); out != `{"prefix":"","size":0,"objects":0,"entries":[]}`+"\n" {
		t.Errorf("du --json of an empty store = %q", out)
	}

	var rm []rmJSON
	decode(t, mustZB(t, "", "rm", "--json", d, "bk/sub/b"), &rm)
	if len(rm) != 1 || rm[0].Key != "bk/sub/b" || rm[0].Size != nil {
		t.Errorf("rm --json = %+v", rm)
	}
	mustZB(t, "abc", "put", d, "bk/c")
	rm = nil
	decode(t, mustZB(t, "", "rm", "--json", "-r", "--yes", d, "bk"), &rm)
	if len(rm) != 2 || rm[0].Key != "bk/a" || rm[0].Size == nil || *rm[0].Size != 5 || rm[1].Key != "bk/c" || *rm[1].Size != 3 {
		t.Errorf("rm -r --json = %+v", rm)
	}
	// What was deleted is printed even when another key fails.
	mustZB(t, "x", "put", d, "k")
	r := zb(t, "", "rm", "--json", d, "nope", "k")
	wantFail(t, r, exitNotFound, "nope")
	if r.stdout != `{"key":"k"}`+"\n" {
		t.Errorf("rm --json with a failure: stdout %q", r.stdout)
	}

	var v []versionJSON
	decode(t, mustZB(t, "", "version", "--json"), &v)
	if len(v) != 1 || v[0].Version == "" || !slices.Contains(v[0].Schemes, "file") {
		t.Errorf("version --json = %+v", v)
	}
}
