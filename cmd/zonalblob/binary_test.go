package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests in this file run the command as a user does: a separate process,
// with its own arguments, environment, working directory, signals and exit
// code. The process is this test binary, which acts as zonalblob when
// asCLIEnv is set (see TestMain): the same main as the built command.
const asCLIEnv = "ZONALBLOB_TEST_RUN_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLIEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// proc describes one run of the binary.
type proc struct {
	stdin string
	dir   string   // working directory; default: a new empty one, checked to stay empty
	env   []string // added to the environment
}

// zbExec runs the binary with args and returns what it printed and its exit
// code. Unless p.dir is given, it runs in a new empty directory and fails the
// test if anything appears there: no command may write where it was not told.
func zbExec(t *testing.T, p proc, args ...string) result {
	t.Helper()
	cmd := cliCommand(t, &p, args...)
	cmd.Stdin = strings.NewReader(p.stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	checkCwdEmpty(t, p.dir, cmd.Dir)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func cliCommand(t *testing.T, p *proc, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLIEnv+"=1")
	cmd.Env = append(cmd.Env, p.env...)
	cmd.Dir = p.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	return cmd
}

func checkCwdEmpty(t *testing.T, given, dir string) {
	t.Helper()
	if given != "" {
		return
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the command wrote into its working directory: %v %v", names, err)
	}
}

// mustExec runs a command line that must succeed and returns its stdout.
func mustExec(t *testing.T, p proc, args ...string) string {
	t.Helper()
	r := zbExec(t, p, args...)
	if r.code != 0 {
		t.Fatalf("zonalblob %q: exit %d, stderr:\n%s", args, r.code, r.stderr)
	}
	return r.stdout
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lsR lists every key of a store, exactly, through ls -r --json.
func lsR(t *testing.T, store string) []string {
	t.Helper()
	var keys []string
	for line := range strings.Lines(mustExec(t, proc{}, "ls", "-r", "--json", store)) {
		var j listJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("ls --json line %q: %v", line, err)
		}
		keys = append(keys, j.Key)
	}
	return keys
}

func TestBinaryFileURLsRefusedBeforeIO(t *testing.T) {
	parent := t.TempDir()
	target := filepath.Join(parent, "made")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"ls relative", "", []string{"ls", "file:nonexistent"}},
		{"put relative", "hi\n", []string{"put", "file:whatever", "k1"}},
		{"rm relative", "", []string{"rm", "file:zzz", "k1"}},
		{"put relative create_dir", "hi\n", []string{"put", "file:made?create_dir=true", "k1"}},
		{"host taken as path", "hi\n", []string{"put", "file://made" + target + "?create_dir=true", "k1"}},
		{"other host", "", []string{"ls", "file://otherhost" + parent}},
		{"host with port", "", []string{"ls", "file://localhost:80" + parent}},
		{"one slash", "", []string{"ls", "file:" + parent}},
		{"user information", "", []string{"ls", "file://me@" + parent}},
		{"no path", "", []string{"ls", "file://"}},
		{"cp to relative", "", []string{"cp", "mem://", "a", "file:out", "a"}},
		{"cp local to relative", "", []string{"cp", "/dev/null", "file:out", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zbExec(t, proc{stdin: tc.stdin}, tc.args...)
			wantFail(t, r, exitUsage, "file:///ABSOLUTE/PATH")
			if _, err := os.Stat(target); err == nil {
				t.Errorf("%s was created", target)
			}
		})
	}
	// Both absolute forms work, and a bare ?create_dir creates.
	dir := filepath.Join(t.TempDir(), "new")
	mustExec(t, proc{stdin: "v"}, "put", "file://"+dir+"?create_dir", "k")
	if got := mustExec(t, proc{}, "cat", "file://localhost"+dir, "k"); got != "v" {
		t.Errorf("file://localhost reads %q", got)
	}
	// The hint for a relative path names the absolute URL meant.
	cwd := t.TempDir()
	r := zbExec(t, proc{dir: cwd}, "ls", "file:data")
	wantFail(t, r, exitUsage, "file://"+filepath.Join(cwd, "data"))
}

func TestBinaryFileKeysNeverAlias(t *testing.T) {
	dir := t.TempDir()
	s := "file://" + dir
	mustExec(t, proc{stdin: "plain"}, "put", s, "x")
	for _, k := range []string{"/x", "//x", "//y", "/y/z"} {
		r := zbExec(t, proc{stdin: "slash"}, "put", s, k)
		wantFail(t, r, exitUsage, "invalid key", `cannot begin with "/"`)
		wantFail(t, zbExec(t, proc{}, "cat", s, k), exitUsage, "invalid key")
		wantFail(t, zbExec(t, proc{}, "rm", s, k), exitUsage, "invalid key")
	}
	for _, k := range []string{"k.attrs", "k.1f2e3d.tmp"} {
		wantFail(t, zbExec(t, proc{stdin: "x"}, "put", s, k), exitUsage, "invalid key")
	}
	if got := mustExec(t, proc{}, "cat", s, "x"); got != "plain" {
		t.Errorf("x holds %q after puts of /x and //x", got)
	}
	// A key only this store refuses still stops rm before it deletes any.
	wantFail(t, zbExec(t, proc{}, "rm", s, "x", "/x"), exitUsage, `cannot begin with "/"`)
	// Keys the escaping must keep apart.
	distinct := []string{"a//b", "a/b", "__0x2f__b", "t\tab", "nl\nkey", "...", "a/../b", "trail ", "obj.tmp"}
	for i, k := range distinct {
		mustExec(t, proc{stdin: fmt.Sprint(i)}, "put", s, k)
	}
	for i, k := range distinct {
		if got := mustExec(t, proc{}, "cat", s, k); got != fmt.Sprint(i) {
			t.Errorf("cat %q = %q, want %d", k, got, i)
		}
	}
	want := slices.Sorted(slices.Values(append(distinct, "x")))
	if got := lsR(t, s); !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

func TestBinaryLongKeys(t *testing.T) {
	s := "file://" + t.TempDir()
	long := strings.Repeat("k", 1024)
	r := zbExec(t, proc{stdin: "x"}, "put", s, long)
	wantFail(t, r, exitUsage, "invalid key", "...(1024 bytes)...", "at most 234 bytes")
	if len(r.stderr) > 400 || strings.Count(r.stderr, strings.Repeat("k", 100)) > 0 {
		t.Errorf("the refusal of a long key is %d bytes and quotes it whole:\n%s", len(r.stderr), r.stderr)
	}
	// The documented maximum in segments a file system holds round-trips.
	seg := strings.Repeat("s", 199) + "/"
	key := strings.Repeat(seg, 6)[:1023] + "z"
	mustExec(t, proc{stdin: "long"}, "put", s, key)
	if got := mustExec(t, proc{}, "cat", s, key); got != "long" {
		t.Errorf("cat of a 1024-byte key = %q", got)
	}
	if got := lsR(t, s); len(got) != 1 || got[0] != key {
		t.Errorf("ls -r --json = %.80q", got)
	}
	// Over the contract's limit on every store, shortened the same way.
	wantFail(t, zbExec(t, proc{}, "cat", "mem://", long+"k"), exitUsage, "1025 bytes, longer than 1024", "...(1025 bytes)...")
}

// A store directory on another file system than the temporary directory
// must take writes: fileblob's default temporary file could not be renamed
// across.
func TestBinaryPutAcrossFileSystems(t *testing.T) {
	var cands []string
	for _, d := range []string{t.TempDir(), "/dev/shm", "/run/user", mustGetwd(t)} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && writable(d) {
			cands = append(cands, d)
		}
	}
	dev := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return uint64(st.Dev)
	}
	// The first pair that differs: the test's own temporary directory for
	// the store whenever it is one of them.
	var storeParent, tmp string
pairs:
	for _, a := range cands {
		for _, b := range cands {
			if dev(a) != dev(b) {
				storeParent, tmp = a, b
				break pairs
			}
		}
	}
	store, err := os.MkdirTemp(cmp.Or(storeParent, t.TempDir()), "zonalblob-xdev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(store) })
	// With no second file system here, TMPDIR names a directory that does
	// not exist: a write that put a temporary file there would fail just
	// as a rename across file systems does.
	tmpDir := filepath.Join(t.TempDir(), "absent")
	if storeParent != "" {
		if tmpDir, err = os.MkdirTemp(tmp, "zonalblob-tmp-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(tmpDir) })
	}
	p := proc{stdin: "across", env: []string{"TMPDIR=" + tmpDir}}
	mustExec(t, p, "put", "file://"+store, "k")
	if got := mustExec(t, proc{}, "cat", "file://"+store, "k"); got != "across" {
		t.Errorf("cat = %q", got)
	}
	if got := lsR(t, "file://"+store); !slices.Equal(got, []string{"k"}) {
		t.Errorf("keys = %q: a temporary file shows", got)
	}
}

func mustGetwd(t *testing.T) string {
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func writable(dir string) bool {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

func TestBinaryNumbers(t *testing.T) {
	for _, tc := range []struct {
		flag, value string
		want        []string
	}{
		{"--cost-writes", "NaN", []string{"not a decimal number"}},
		{"--cost-writes", "Inf", []string{"not a decimal number"}},
		{"--cost-writes", "1e300", []string{"not a decimal number"}},
		{"--cost-writes", "99999999", []string{"out of range", "at most 1e+07"}},
		{"--cost-writes", "-5", []string{"not a decimal number"}},
		{"--cost-writes", "0", []string{"out of range"}},
		{"--cost-size", "18014398509481985KiB", []string{"out of range", "1 bytes to 5TiB"}},
		{"--cost-size", "9007199254740992KiB", []string{"out of range"}},
		{"--cost-size", "99999999999999999999999", []string{"out of range"}},
		{"--cost-size", "1.5B", []string{"not a whole number of bytes", "a size is a whole number of bytes"}},
		{"--cost-size", "0", []string{"out of range"}},
		{"--cost-size", "-1KiB", []string{"not a size"}},
		{"--cost-size", "1 GiB x", []string{"not a size"}},
		{"--cost-retention", "1e300d", []string{"not a duration"}},
		{"--cost-retention", "99999999d", []string{"out of range"}},
		{"--cost-retention", "9999999h", []string{"out of range"}},
		{"--cost-retention", "-1h", []string{"out of range"}},
		{"--cost-replicas", "99999999999999999999", []string{"not a whole number from 1 to 16"}},
		{"--rate", "Inf", []string{"not a decimal number"}},
		{"--size", "10,65MiB", []string{"out of range", "0 bytes to 64MiB"}},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			r := zbExec(t, proc{}, "bench", "--cost", tc.flag, tc.value)
			wantFail(t, r, exitUsage, append([]string{"-" + strings.TrimLeft(tc.flag, "-")}, tc.want...)...)
			if strings.Contains(r.stdout+r.stderr, "$NaN") || strings.Contains(r.stdout, "Cost:") {
				t.Errorf("printed an estimate:\n%s", r.stdout)
			}
		})
	}
	for _, size := range []string{"1GiB", "1.5MiB", "64KiB", "4096", "2GB"} {
		out := mustExec(t, proc{}, "bench", "--cost", "--cost-size", size, "--cost-writes", "0.5", "--cost-retention", "7.5d")
		if !strings.Contains(out, "Assumptions:") || strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
			t.Errorf("--cost-size %s:\n%s", size, out)
		}
	}
}

func TestBinaryCpLocalFiles(t *testing.T) {
	work := t.TempDir()
	s := "file://" + t.TempDir()
	writeFile(t, filepath.Join(work, "report.csv"), "a,b\n")
	writeFile(t, filepath.Join(work, "tree/1"), "one")
	writeFile(t, filepath.Join(work, "tree/sub/2"), "two")
	in := proc{dir: work}

	r := zbExec(t, in, "cp", "./report.csv", s, "reports/2025.csv")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "copied 1 object, 4 bytes in ") {
		t.Fatalf("upload: exit %d, stderr %q", r.code, r.stderr)
	}
	mustExec(t, in, "cp", "report.csv", s, "reports/")
	mustExec(t, in, "cp", "-r", "tree", s, "up/")
	mustExec(t, in, "cp", "-r", "tree/", s, "flat/")
	want := []string{"flat/1", "flat/sub/2", "reports/2025.csv", "reports/report.csv", "up/tree/1", "up/tree/sub/2"}
	if got := lsR(t, s); !slices.Equal(got, want) {
		t.Errorf("after uploads, keys = %q, want %q", got, want)
	}

	// Downloads: to a file, into a folder, a tree.
	mustExec(t, in, "cp", s, "reports/2025.csv", "./dl.csv")
	mustExec(t, in, "cp", s, "reports/2025.csv", "into/")
	mustExec(t, in, "cp", "-r", s, "up/", "./back")
	for path, want := range map[string]string{"dl.csv": "a,b\n", "into/2025.csv": "a,b\n", "back/tree/1": "one", "back/tree/sub/2": "two"} {
		if got, err := os.ReadFile(filepath.Join(work, path)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	// "-" is standard input or output; "." copies the working directory's
	// contents.
	mustExec(t, proc{stdin: "piped"}, "cp", "-", s, "io/piped")
	if got := mustExec(t, proc{}, "cp", "-q", s, "io/piped", "-"); got != "piped" {
		t.Errorf("cp to - printed %q", got)
	}
	mustExec(t, proc{dir: filepath.Join(work, "tree")}, "cp", "-r", ".", s, "dot/")
	if got := lsR(t, s+"/"); !slices.Contains(got, "dot/sub/2") || !slices.Contains(got, "dot/1") {
		t.Errorf("cp -r . gave %q", got)
	}
	mustExec(t, proc{}, "rm", "-q", s, "io/piped", "dot/1", "dot/sub/2")
	wantFail(t, zbExec(t, proc{}, "cp", "-r", "-", s, "x/"), exitUsage, `"-" (standard input or output) is one object`)
	// No temporary file is left beside a download.
	ents, _ := os.ReadDir(filepath.Join(work, "into"))
	if len(ents) != 1 {
		t.Errorf("into/ holds %d entries", len(ents))
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"folder without -r", []string{"cp", s, "up", "./x"}, exitUsage, []string{`"up" is not an object but a folder of 2 objects: add -r`}},
		{"directory without -r", []string{"cp", "tree", s, "t/"}, exitUsage, []string{"tree is a directory: add -r"}},
		{"-r destination without slash", []string{"cp", "-r", s, "up/", s, "out"}, exitUsage, []string{`end it in "/" ("out/")`, "run on"}},
		{"-r local destination prefix", []string{"cp", "-r", "tree", s, "t"}, exitUsage, []string{`end it in "/"`}},
		{"two local paths", []string{"cp", "a", "b"}, exitUsage, []string{"both ends are local paths"}},
		{"missing DST key", []string{"cp", "./report.csv", s}, exitUsage, []string{"missing DST KEY after the store"}},
		{"missing local file", []string{"cp", "./nope", s, "k"}, exitFailed, []string{"no such file"}},
		{"missing object", []string{"cp", s, "nope", "./nope"}, exitNotFound, []string{"not found"}},
		{"empty prefix", []string{"cp", "-r", s, "nothing/", "./n"}, exitNotFound, []string{`no objects under prefix "nothing/"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFail(t, zbExec(t, in, tc.args...), tc.code, tc.want...)
		})
	}
	if got := lsR(t, s); !slices.Equal(got, want) {
		t.Errorf("failed copies changed the store: %q", got)
	}
	for _, p := range []string{"x", "n", "nope"} {
		if _, err := os.Stat(filepath.Join(work, p)); err == nil {
			t.Errorf("a failed copy left %s", p)
		}
	}
}

// An object whose name would leave the target directory is refused, and
// nothing is written outside.
func TestBinaryCpDownloadStaysInside(t *testing.T) {
	mem := t.TempDir()
	s := "file://" + mem
	mustExec(t, proc{stdin: "evil"}, "put", s, "d/../../escaped")
	work := t.TempDir()
	r := zbExec(t, proc{dir: work}, "cp", "-r", s, "d/", "./out")
	wantFail(t, r, exitFailed, "cannot be a local file name")
	if _, err := os.Stat(filepath.Join(filepath.Dir(work), "escaped")); err == nil {
		t.Error("a download escaped its directory")
	}
}

func TestBinaryCpFolderSemanticsBetweenStores(t *testing.T) {
	src, dst := "file://"+t.TempDir(), "file://"+t.TempDir()
	for i, k := range []string{"logs/1", "logs/2", "logs/sub/3", "logsx", "other"} {
		mustExec(t, proc{stdin: fmt.Sprint(i)}, "put", "-q", src, k)
	}
	r := zbExec(t, proc{}, "cp", "-r", src, "logs/", dst, "out/")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "copied 3 objects, 3 bytes in ") {
		t.Errorf("cp -r: exit %d, stderr %q", r.code, r.stderr)
	}
	mustExec(t, proc{}, "cp", "-r", "-q", src, "logs", dst, "named/")
	mustExec(t, proc{}, "cp", src, "other", dst, "single/")
	want := []string{"named/logs/1", "named/logs/2", "named/logs/sub/3", "out/1", "out/2", "out/sub/3", "single/other"}
	if got := lsR(t, dst); !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

// waitFor polls ready until it holds, failing the test if the started
// command ends first; it returns the channel that receives cmd.Wait's error.
func waitFor(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer, ready func() bool) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for !ready() {
		select {
		case err := <-done:
			t.Fatalf("the command ended before it was interrupted: %v\n%s", err, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return done
}

// Ctrl-C in the middle of a copy: exit 130, a count, and only whole objects
// in the store. The fifth file is a FIFO that never ends, so the copy is
// stopped exactly there, whatever the machine's speed.
func TestBinaryInterruptedCopy(t *testing.T) {
	src := t.TempDir()
	for _, n := range []string{"f1", "f2", "f3", "f4", "f6", "f7"} {
		writeFile(t, filepath.Join(src, n), n)
	}
	fifo := filepath.Join(src, "f5")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Held open for writing, so the copy's open succeeds and its read waits.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dstDir := t.TempDir()
	cmd := cliCommand(t, &proc{}, "cp", "-r", "--jobs", "1", src+"/", "file://"+dstDir, "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the four files before the FIFO are stored.
	done := waitFor(t, cmd, &stderr, func() bool {
		ents, _ := os.ReadDir(dstDir)
		n := 0
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".attrs") && !strings.HasSuffix(e.Name(), ".tmp") {
				n++
			}
		}
		return n == 4
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = <-done
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("exit %v, want %d; stderr:\n%s", err, exitInterrupted, stderr.String())
	}
	if got := stderr.String(); got != "zonalblob: interrupted: 4 of 7 copied\n" {
		t.Errorf("stderr = %q", got)
	}
	if got := lsR(t, "file://"+dstDir); !slices.Equal(got, []string{"f1", "f2", "f3", "f4"}) {
		t.Errorf("after the interrupt the store holds %q", got)
	}
}

// Ctrl-C while put waits for more input on a pipe: exit 130 at once, no
// object. The object's temporary file appearing shows that the command is
// under way (its handler installed, the write begun) before the signal.
func TestBinaryInterruptedPut(t *testing.T) {
	dir := t.TempDir()
	cmd := cliCommand(t, &proc{}, "put", "file://"+dir, "k", "--content-type", "text/plain")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, cmd, &stderr, func() bool {
		ents, _ := os.ReadDir(dir)
		return len(ents) > 0 && strings.HasSuffix(ents[0].Name(), ".tmp")
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The pipe stays open: the command must not wait for its end.
	err = <-done
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("exit %v, want %d", err, exitInterrupted)
	}
	if got := stderr.String(); got != "zonalblob: interrupted: 0 of 1 written\n" {
		t.Errorf("stderr = %q", got)
	}
	if got := lsR(t, "file://"+dir); len(got) != 0 {
		t.Errorf("an interrupted put left %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("an interrupted put left files: %v", ents)
	}
}

func TestBinaryLs(t *testing.T) {
	s := "file://" + t.TempDir()
	for _, k := range []string{"b", "a/1", "a/22", "c/x/y", "bell\x07key", "nl\nkey", "\"quoted"} {
		mustExec(t, proc{stdin: k}, "put", "-q", s, k)
	}
	if got, want := mustExec(t, proc{}, "ls", s), "\"\\\"quoted\"\na/\nb\n\"bell\\akey\"\nc/\n\"nl\\nkey\"\n"; got != want {
		t.Errorf("ls =\n%s\nwant\n%s", got, want)
	}
	if got, want := mustExec(t, proc{}, "ls", "-r", s, "a/"), "a/1\na/22\n"; got != want {
		t.Errorf("ls -r a/ = %q", got)
	}
	long := mustExec(t, proc{}, "ls", "-lh", s, "a")
	lines := strings.Split(strings.TrimSuffix(long, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "4 B ") || lines[2] != "TOTAL: 2 objects, 7 bytes" {
		t.Errorf("ls -lh a =\n%s", long)
	}
	if got := mustExec(t, proc{}, "ls", "-rl", s, "c/"); !strings.HasSuffix(got, "c/x/y\nTOTAL: 1 object, 5 bytes\n") {
		t.Errorf("ls -rl = %q", got)
	}
	var keys []string
	for line := range strings.Lines(mustExec(t, proc{}, "ls", "--json", s)) {
		var j listJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		if j.Dir != strings.HasSuffix(j.Key, "/") || !j.Dir && (j.Size == nil || j.ModTime == nil) {
			t.Errorf("json line %s", line)
		}
		keys = append(keys, j.Key)
	}
	if want := []string{"\"quoted", "a/", "b", "bell\x07key", "c/", "nl\nkey"}; !slices.Equal(keys, want) {
		t.Errorf("ls --json keys = %q, want %q", keys, want)
	}
	wantFail(t, zbExec(t, proc{}, "ls", "-lz", s), exitUsage, "flag provided but not defined: -lz")
	wantFail(t, zbExec(t, proc{}, "ls", "-r", "--delimiter", "/", s), exitUsage, "-r lists every object")
	wantFail(t, zbExec(t, proc{}, "ls", s, "a/", "--prefix", "b"), exitUsage, "give the prefix once")
}

func TestBinaryRmAndDu(t *testing.T) {
	s := "file://" + t.TempDir()
	for _, k := range []string{"logs/1", "logs/2", "logs/sub/3", "logsx", "top"} {
		mustExec(t, proc{stdin: "data-" + k}, "put", "-q", s, k)
	}
	du := mustExec(t, proc{}, "du", s)
	if want := []string{"logs/", "logsx", "top", "TOTAL"}; !slices.Equal(lastFields(du), want) {
		t.Errorf("du =\n%s", du)
	}
	if f := strings.Fields(strings.Split(du, "\n")[0]); f[0] != "37" || f[1] != "3" {
		t.Errorf("du logs/ line = %q, want 37 bytes in 3 objects", f)
	}
	if got := mustExec(t, proc{}, "du", "-sh", s, "logs"); strings.Join(strings.Fields(got), " ") != "37 B 3 TOTAL" {
		t.Errorf("du -sh logs = %q", got)
	}

	// A folder is not an object, and the error says which it is.
	wantFail(t, zbExec(t, proc{}, "stat", s, "logs"), exitNotFound, "not found", `("logs" is a folder: list it with ls STORE logs/)`)
	wantFail(t, zbExec(t, proc{}, "cat", s, "logs/"), exitNotFound, "not found", `("logs/" is a folder`)
	r := zbExec(t, proc{}, "rm", "-r", s, "logs")
	wantFail(t, r, exitUsage, `rm -r would delete 3 objects (37 bytes) under "logs/"; add --yes`)
	if got := lsR(t, s); len(got) != 5 {
		t.Errorf("rm -r without --yes deleted: %q", got)
	}
	r = zbExec(t, proc{}, "rm", "-ry", s, "logs")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "deleted 3 objects, 37 bytes in ") {
		t.Errorf("rm -ry: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := lsR(t, s); !slices.Equal(got, []string{"logsx", "top"}) {
		t.Errorf("after rm -r logs: %q", got)
	}
	wantFail(t, zbExec(t, proc{}, "rm", "-r", "--yes", s, "logs"), exitNotFound, `no objects under prefix "logs/"`)
	wantFail(t, zbExec(t, proc{}, "rm", "--yes", s, "top"), exitUsage, "--yes confirms rm -r")
	r = zbExec(t, proc{}, "rm", s, "top", "logsx")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "deleted 2 objects in ") {
		t.Errorf("rm: exit %d, stderr %q", r.code, r.stderr)
	}
}

func lastFields(out string) []string {
	var names []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		names = append(names, f[len(f)-1])
	}
	return names
}

func TestBinaryUsageErrors(t *testing.T) {
	s := "file://" + t.TempDir()
	notDir := filepath.Join(t.TempDir(), "file")
	writeFile(t, notDir, "x")
	missing := filepath.Join(t.TempDir(), "missing")
	defer func() {
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("create_dir=false or =maybe created %s", missing)
		}
	}()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"s3 without region", []string{"ls", "s3://bucket"}, exitUsage, []string{"region is required"}},
		{"gs without bucket", []string{"ls", "gs://"}, exitUsage, []string{"bucket name is required"}},
		{"azblob without container", []string{"ls", "azblob:///x/"}, exitUsage, []string{"container name is required"}},
		{"gs path without slash", []string{"ls", "gs://bucket/prefix"}, exitUsage, []string{`must end in "/"`, "gs://bucket/prefix/"}},
		{"gs path and prefix", []string{"ls", "gs://bucket/p/?prefix=q/"}, exitUsage, []string{"both a path and ?prefix="}},
		{"mem with a name", []string{"ls", "mem://bucket"}, exitUsage, []string{"mem:// takes no bucket name"}},
		{"gcsrapid path", []string{"ls", "gcsrapid://bucket/prefix/"}, exitUsage, []string{"gcsrapid://BUCKET"}},
		{"cat missing key", []string{"cat", s}, exitUsage, []string{"cat: missing KEY\n"}},
		{"cp missing everything", []string{"cp"}, exitUsage, []string{"cp: missing SRC and DST\n"}},
		{"put stdin into a folder", []string{"put", s, "dir/"}, exitUsage, []string{`"dir/" ends in "/", a folder`}},
		{"huge jobs", []string{"cp", "-r", "--jobs", "99999999999999999999", s, "", s, "x/"}, exitUsage, []string{"-jobs"}},
		{"bad offset", []string{"cat", s, "k", "--offset", "1e3"}, exitUsage, []string{"-offset"}},
		{"empty metadata key", []string{"put", s, "k", "--metadata", "=v"}, exitUsage, []string{"want key=value"}},
		{"unknown parameter", []string{"ls", s + "?bogus=1"}, exitUsage, []string{`"bogus"`}},
		{"fragment", []string{"ls", s + "#frag"}, exitUsage, []string{"#fragment, which no store reads"}},
		{"create_dir=false", []string{"ls", "file://" + missing + "?create_dir=false"}, exitUsage, []string{"no such file"}},
		{"create_dir not a boolean", []string{"ls", "file://" + missing + "?create_dir=maybe"}, exitUsage, []string{`create_dir: "maybe" is not true or false`}},
		{"version with an argument", []string{"version", "extra"}, exitUsage, []string{`version: takes no arguments, got "extra"`}},
		{"nested relative file URL", []string{"ls", "quorum://?w=1&replica=file:relative"}, exitUsage, []string{"quorum replica 0", "file:///ABSOLUTE/PATH"}},
		{"leading space", []string{"ls", " " + s}, exitUsage, []string{"malformed URL"}},
		{"not a directory", []string{"ls", "file://" + notDir}, exitUsage, []string{"is not a directory"}},
		{"invalid UTF-8 prefix", []string{"ls", s, "a\xffb"}, exitUsage, []string{"not valid UTF-8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFail(t, zbExec(t, proc{}, tc.args...), tc.code, tc.want...)
		})
	}
	// An unknown command gets one line, with the nearest command.
	r := zbExec(t, proc{}, "lsit", s)
	wantFail(t, r, exitUsage, `unknown command "lsit" (did you mean "ls"?); run 'zonalblob help'`)
	if strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
		t.Errorf("unknown command printed more than one line:\n%s%s", r.stdout, r.stderr)
	}
	// Help names the new commands.
	help := mustExec(t, proc{}, "help")
	for _, c := range []string{"  du ", "  cp ", "  rm "} {
		if !strings.Contains(help, c) {
			t.Errorf("help lacks %q", c)
		}
	}
}

// A path in a cloud URL is the key prefix, as gsutil reads gs://bucket/dir/:
// here on S3's emulator.
func TestBinaryCloudURLPathIsPrefix(t *testing.T) {
	srv := newS3(t, "pfx")
	base := "s3://pfx"
	q := "?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(srv)
	env := s3Env(t)
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "f"), "in a folder")
	mustExec(t, proc{dir: work, env: env}, "cp", "f", base+"/logs/2025/"+q, "k")
	if got := mustExec(t, proc{env: env}, "ls", "-r", base+q); got != "logs/2025/k\n" {
		t.Errorf("the bucket holds %q, want logs/2025/k", got)
	}
	if got := mustExec(t, proc{env: env}, "cat", base+"/logs/"+q, "2025/k"); got != "in a folder" {
		t.Errorf("cat through the prefix = %q", got)
	}
}

// Standard output carries the command's result only. gocloud's gcsblob
// prints a warning with fmt.Printf when it finds no credentials (here: a
// credentials file that does not exist); it must reach stderr, and stdout
// stay valid JSON for jq. Neither URL does network I/O: the gs:// replica of
// the quorum fails at once, and the tiered store's cold tier is not touched
// by a put.
func TestBinaryLibraryOutputNeverOnStdout(t *testing.T) {
	env := []string{"GOOGLE_APPLICATION_CREDENTIALS=" + filepath.Join(t.TempDir(), "absent.json"),
		"STORAGE_EMULATOR_HOST=", "STORAGE_EMULATOR_HOST_GRPC="}
	gs := url.QueryEscape("gs://bucket/")
	mem := url.QueryEscape("mem://")
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		lines int
	}{
		{"ls --json", "", []string{"ls", "--json", "quorum://?w=2&replica=" + mem + "&replica=" + mem + "&replica=" + gs}, 0},
		{"put --json", "hello", []string{"put", "--json", "tiered://?manual=true&hot=" + mem + "&cold=" + gs, "k"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := zbExec(t, proc{stdin: tc.stdin, env: env}, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "unable to load GCP Default Credentials") {
				t.Errorf("gcsblob's warning is not on stderr:\n%s", r.stderr)
			}
			n := 0
			for line := range strings.Lines(r.stdout) {
				n++
				if !json.Valid([]byte(line)) {
					t.Errorf("stdout line %q is not JSON", line)
				}
			}
			if n != tc.lines || (n > 0 && !strings.HasSuffix(r.stdout, "}\n")) {
				t.Errorf("stdout = %q, want %d JSON lines and nothing else", r.stdout, tc.lines)
			}
			// The warning ends its line: the next message is not glued to it.
			if i := strings.Index(r.stderr, "Warning: "); i >= 0 && strings.Contains(strings.SplitN(r.stderr[i:], "\n", 2)[0], "zonalblob: ") {
				t.Errorf("a message runs on from the warning:\n%s", r.stderr)
			}
		})
	}
}
