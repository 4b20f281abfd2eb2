package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// serveOutput is what serve printed on stdout: its store lines in order and
// the environment of its export lines.
type serveOutput struct {
	labels []string
	urls   map[string]string
	env    map[string]string
}

// readServeOutput reads serve's stdout up to its last line, "# profile ...",
// which it prints once every emulator answers. It returns false if the
// output ends first (serve exited), and an error for a line out of format.
func readServeOutput(sc *bufio.Scanner) (serveOutput, bool, error) {
	out := serveOutput{urls: map[string]string{}, env: map[string]string{}}
	inEnv := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !inEnv && line == "":
			inEnv = true
		case !inEnv:
			label, u, ok := strings.Cut(line, ":  ")
			if !ok || strings.Contains(u, " ") {
				return out, false, fmt.Errorf("store line %q is not \"LABEL:  URL\"", line)
			}
			out.labels = append(out.labels, label)
			out.urls[label] = u
		case strings.HasPrefix(line, "# profile "):
			return out, true, nil
		case strings.HasPrefix(line, "#"):
		default:
			// export NAME='VALUE', as a shell reads it.
			rest, ok := strings.CutPrefix(line, "export ")
			name, quoted, ok2 := strings.Cut(rest, "=")
			value, ok3 := strings.CutPrefix(quoted, "'")
			value, ok4 := strings.CutSuffix(value, "'")
			if !ok || !ok2 || !ok3 || !ok4 || strings.Contains(value, "'") {
				return out, false, fmt.Errorf("shell line %q is not export NAME='VALUE'", line)
			}
			out.env[name] = value
		}
	}
	return out, false, nil
}

func (o serveOutput) environ() []string {
	var env []string
	for k, v := range o.env {
		env = append(env, k+"="+v)
	}
	return env
}

// serve prints URLs that other zonalblob commands use, and stops with its
// context.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errOut strings.Builder
		done <- runContext(ctx, []string{"serve", "--profile", "zero", "--dir", t.TempDir()}, strings.NewReader(""), pw, &errOut)
		pw.Close()
	}()
	out, ok, err := readServeOutput(bufio.NewScanner(pr))
	go io.Copy(io.Discard, pr)
	if err != nil || !ok {
		t.Fatalf("serve ended before it was ready (%v): %v", err, out)
	}
	if want := []string{"zone 0", "zone 1", "zone 2", "quorum", "tiered"}; strings.Join(out.labels, ",") != strings.Join(want, ",") {
		t.Errorf("store lines %q, want %q", out.labels, want)
	}
	// Its cold tier is a directory, which enforces conditional writes
	// only within one process: the programs sharing the URL keep the
	// compactor lease in hot.
	if tu, err := url.Parse(out.urls["tiered"]); err != nil || tu.Query().Get("lease_in") != "hot" || !strings.HasPrefix(tu.Query().Get("cold"), "file:") {
		t.Errorf("tiered = %s, want cold a directory and lease_in=hot", out.urls["tiered"])
	}
	if got, want := out.env["STORAGE_EMULATOR_HOST_GRPC"], endpointOf(t, out.urls["zone 0"]); got != want {
		t.Errorf("STORAGE_EMULATOR_HOST_GRPC = %q, want zone 0's endpoint %q", got, want)
	}
	for _, name := range []string{"zone 0", "zone 2", "quorum", "tiered"} {
		u := out.urls[name]
		// Keys of their own: a quorum does not serve objects written
		// around it.
		key := "greeting/" + strings.ReplaceAll(name, " ", "")
		mustZB(t, "hello "+name, "put", u, key, "-")
		if got := mustZB(t, "", "cat", u, key); got != "hello "+name {
			t.Errorf("%s: cat = %q", name, got)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d when stopped", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}

// endpointOf returns the host:port a printed store URL reaches.
func endpointOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ep := u.Query().Get("endpoint")
	if e, err := url.Parse(ep); err == nil && e.Scheme == "http" {
		ep = e.Host
	}
	return ep
}

// servedProcess is serve running as a separate process.
type servedProcess struct {
	cmd     *exec.Cmd
	out     serveOutput
	stderr  *syncBuffer
	exited  chan struct{} // closed when the process has ended, after waitErr is set
	waitErr error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe runs serve with args in the package directory (inside the
// repository, where Azurite is found under tools/) and waits until it has
// printed everything. If serve exits first it returns nil and its exit code
// and stderr. The process is interrupted when the test ends.
func startServe(t *testing.T, env []string, args ...string) (*servedProcess, result) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(t, &proc{dir: wd, env: env}, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	sp := &servedProcess{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = sp.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type reading struct {
		ok  bool
		err error
	}
	ready := make(chan reading, 1)
	var stdoutCopy syncBuffer
	go func() {
		var r reading
		sp.out, r.ok, r.err = readServeOutput(bufio.NewScanner(io.TeeReader(stdout, &stdoutCopy)))
		ready <- r
		io.Copy(io.Discard, stdout)
		sp.waitErr = cmd.Wait()
		close(sp.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-sp.exited:
			return
		default:
		}
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-sp.exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
		}
	})
	select {
	case r := <-ready:
		if r.err != nil {
			t.Fatalf("%v; stdout:\n%s", r.err, stdoutCopy.String())
		}
		if r.ok {
			return sp, result{}
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("serve printed no ready line; stdout:\n%s\nstderr:\n%s", stdoutCopy.String(), sp.stderr.String())
	}
	<-sp.exited
	code := 0
	if ee, ok := sp.waitErr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return nil, result{code: code, stdout: stdoutCopy.String(), stderr: sp.stderr.String()}
}

// stop interrupts serve as Ctrl-C does and returns its exit code.
func (sp *servedProcess) stop(t *testing.T) int {
	t.Helper()
	if err := sp.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sp.exited:
		if ee, ok := sp.waitErr.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if sp.waitErr != nil {
			t.Fatal(sp.waitErr)
		}
		return 0
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop when interrupted")
	}
	return -1
}

// freePortBase returns a port p such that p, ..., p+n-1 are free now. The
// candidates lie below the kernel's ephemeral range (32768 up on Linux),
// where the many client connections of a busy machine take their ports:
// picked from there, a run of free consecutive ports is often not found.
func freePortBase(t *testing.T, n int) int {
	t.Helper()
	for range 500 {
		base := 20000 + rand.IntN(12000)
		var held []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			held = append(held, l)
		}
		free := len(held) == n
		for _, l := range held {
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("found no %d free consecutive ports", n)
	return 0
}

// Every emulator serve runs works from another process given only the
// printed URLs and exports: put, ls and cat on each store, the quorum over
// the three zonal buckets and the tiered store over it with the regional
// bucket as cold tier; --port-base gives the ports asked for, in the
// documented order; Ctrl-C ends serve with exit 0.
func TestServeEmulators(t *testing.T) {
	const (
		directory = "logs--use1-az4--x-s3"
		realKey   = "not-a-test-credential-7f3a"
	)
	args := []string{"--profile", "zero",
		"--gcsrapid", "zone-a", "--gcsrapid", "zone-b", "--gcsrapid", "zone-c",
		"--regional", "cold", "--s3express", directory, "--azure", "data"}
	// Credentials in serve's own environment are never printed.
	env := []string{"AWS_SECRET_ACCESS_KEY=" + realKey, "AZURE_STORAGE_CONNECTION_STRING=AccountName=x;AccountKey=" + realKey}
	var sp *servedProcess
	var base int
	for attempt := 0; sp == nil; attempt++ {
		base = freePortBase(t, 6)
		var r result
		sp, r = startServe(t, env, append(args, "--port-base", strconv.Itoa(base))...)
		// Another process may take a port between the check and serve.
		if sp == nil && (attempt == 2 || !strings.Contains(r.stderr, "is taken")) {
			t.Fatalf("serve exited %d before it was ready; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	}
	out := sp.out
	// Serve skips Azure where Azurite is not installed (its note on stderr
	// may still be on its way here: it is checked once serve has exited).
	azureSkipped := !slices.Contains(out.labels, "azure data")

	wantLabels := []string{"gcsrapid zone-a", "gcsrapid zone-b", "gcsrapid zone-c", "regional cold", "s3express " + directory, "azure data", "quorum", "tiered"}
	if azureSkipped {
		wantLabels = append(wantLabels[:5], wantLabels[6:]...)
	}
	if strings.Join(out.labels, ",") != strings.Join(wantLabels, ",") {
		t.Fatalf("store lines %q, want %q", out.labels, wantLabels)
	}
	for i, label := range wantLabels[:len(wantLabels)-2] {
		if got, want := endpointOf(t, out.urls[label]), fmt.Sprintf("127.0.0.1:%d", base+i); got != want {
			t.Errorf("%s at %s, want %s (--port-base %d)", label, got, want, base)
		}
	}
	wantEnv := map[string]string{
		"STORAGE_EMULATOR_HOST_GRPC": fmt.Sprintf("127.0.0.1:%d", base+3),
		"AWS_ENDPOINT_URL_S3":        fmt.Sprintf("http://127.0.0.1:%d", base+4),
		"AWS_ACCESS_KEY_ID":          s3expresstest.DefaultAccessKeyID,
		"AWS_SECRET_ACCESS_KEY":      s3expresstest.DefaultSecretAccessKey,
		"AWS_REGION":                 s3expresstest.Region,
	}
	if !azureSkipped {
		wantEnv["AZURE_STORAGE_CONNECTION_STRING"] = out.env["AZURE_STORAGE_CONNECTION_STRING"]
		if cs := out.env["AZURE_STORAGE_CONNECTION_STRING"]; !strings.Contains(cs, fmt.Sprintf("BlobEndpoint=http://127.0.0.1:%d/", base+5)) {
			t.Errorf("AZURE_STORAGE_CONNECTION_STRING = %q, want Azurite's at port %d", cs, base+5)
		}
	}
	for k, v := range wantEnv {
		if out.env[k] != v {
			t.Errorf("export %s=%q, want %q", k, out.env[k], v)
		}
	}
	if len(out.env) != len(wantEnv) {
		t.Errorf("exports %v, want the names of %v", out.env, wantEnv)
	}
	tiered, err := url.Parse(out.urls["tiered"])
	if err != nil {
		t.Fatal(err)
	}
	if tq := tiered.Query(); tq.Get("hot") != out.urls["quorum"] || tq.Get("cold") != out.urls["regional cold"] {
		t.Errorf("tiered = %s, want hot: the quorum, cold: the regional bucket", out.urls["tiered"])
	}
	if strings.Contains(sp.stderr.String(), realKey) {
		t.Errorf("serve printed a credential of its environment")
	}

	// From another process with the exports only, as a second shell.
	for i, label := range out.labels {
		u, key, data := out.urls[label], fmt.Sprintf("greeting-%d", i), "hello "+label
		mustExec(t, proc{stdin: data, env: out.environ()}, "put", u, key, "-")
		if got := mustExec(t, proc{env: out.environ()}, "ls", u); !strings.Contains("\n"+got, "\n"+key+"\n") {
			t.Errorf("%s: ls =\n%s\nwant %s in it", label, got, key)
		}
		if got := mustExec(t, proc{env: out.environ()}, "cat", u, key); got != data {
			t.Errorf("%s: cat = %q, want %q", label, got, data)
		}
	}

	if code := sp.stop(t); code != exitOK {
		t.Errorf("serve exited %d when interrupted, want 0; stderr:\n%s", code, sp.stderr.String())
	}
	if azureSkipped {
		if !strings.Contains(sp.stderr.String(), "--azure data skipped") {
			t.Errorf("serve served no Azure container and said nothing of it; stderr:\n%s", sp.stderr.String())
		}
		emulators.Unavailable(t, "azurite", errors.New(strings.TrimSpace(sp.stderr.String())))
	}
}

// Bad requests fail before anything starts: bad or repeated names, flags
// that contradict each other, ports out of range (exit 2); a taken port
// (exit 1). Each error says what is wrong.
func TestServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"short GCS name", []string{"--gcsrapid", "a"}, []string{`--gcsrapid "a": not a valid name`, "3 to 63"}},
		{"upper-case GCS name", []string{"--regional", "Cold"}, []string{`--regional "Cold"`}},
		{"not a directory bucket", []string{"--s3express", "logs"}, []string{`--s3express "logs"`, "BASE--AZID--x-s3"}},
		{"bad container", []string{"--azure", "a--b"}, []string{`--azure "a--b"`}},
		{"name given twice", []string{"--gcsrapid", "zone-a", "--regional", "zone-a"}, []string{`--regional "zone-a": already given as --gcsrapid`}},
		{"zones and gcsrapid", []string{"--zones", "2", "--gcsrapid", "zone-a"}, []string{"--zones"}},
		{"no zones", []string{"--zones", "0"}, []string{"--zones 0"}},
		{"port base too high", []string{"--port-base", "65534"}, []string{"--port-base 65534", "from 1 to 65533"}},
		{"too many zones", []string{"--zones", "1000"}, []string{"--zones 1000"}},
		{"unknown profile", []string{"--profile", "bogus"}, []string{`--profile "bogus"`, "rapid"}},
		{"argument", []string{"zone"}, []string{"takes no arguments"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantFail(t, zb(t, "", append([]string{"serve"}, tc.args...)...), exitUsage, tc.want...)
		})
	}

	t.Run("port taken", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		r := zb(t, "", "serve", "--profile", "zero", "--gcsrapid", "zone-a", "--port-base", strconv.Itoa(port))
		wantFail(t, r, exitFailed, fmt.Sprintf("127.0.0.1:%d", port), "gcsrapid zone-a", "is taken")
		if r.stdout != "" {
			t.Errorf("serve printed URLs although it failed:\n%s", r.stdout)
		}
	})
}

// --help says how other clients reach the emulators.
func TestServeHelp(t *testing.T) {
	help := mustZB(t, "", "serve", "--help")
	for _, want := range []string{"--gcsrapid NAME", "--port-base", "STORAGE_EMULATOR_HOST_GRPC", "AWS_ENDPOINT_URL_S3", "endpoint_url", "AZURE_STORAGE_CONNECTION_STRING", "appendable"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

// Where Azurite is not installed (here: outside any repository), --azure is
// skipped with a note on stderr and everything else is served.
func TestServeWithoutAzurite(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"serve", "--profile", "zero", "--regional", "cold", "--azure", "data"}, strings.NewReader(""), pw, &errOut)
		pw.Close()
	}()
	out, ok, err := readServeOutput(bufio.NewScanner(pr))
	go io.Copy(io.Discard, pr)
	if err != nil || !ok {
		t.Fatalf("serve ended before it was ready (%v): %v\n%s", err, out, errOut.String())
	}
	if strings.Join(out.labels, ",") != "regional cold" {
		t.Errorf("store lines %q, want only the regional bucket", out.labels)
	}
	if _, ok := out.env["AZURE_STORAGE_CONNECTION_STRING"]; ok {
		t.Error("serve exported Azure settings without Azurite")
	}
	if got := errOut.String(); !strings.Contains(got, "--azure data skipped: Azurite is not installed") || !strings.Contains(got, "make tools") {
		t.Errorf("stderr = %q, want a note that says how to install Azurite", got)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d when stopped", code)
	}
}
