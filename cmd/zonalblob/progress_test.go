package main

import (
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProgressRenderer(t *testing.T) {
	var buf strings.Builder
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newProgress(&buf, 4<<20, t0)

	p.Add(1 << 20)
	p.tick(t0.Add(400 * time.Millisecond))
	if buf.Len() != 0 {
		t.Fatalf("bar drawn before %v: %q", progressDelay, buf.String())
	}

	p.tick(t0.Add(time.Second))
	first := buf.String()
	for _, want := range []string{"\r[", "25%", "1.0 MiB / 4.0 MiB", "1.0 MiB/s"} {
		if !strings.Contains(first, want) {
			t.Errorf("bar after 1 s lacks %q: %q", want, first)
		}
	}
	if strings.Contains(first, "\n") {
		t.Errorf("a running bar ended its line: %q", first)
	}

	p.Add(3 << 20)
	p.finish(t0.Add(2 * time.Second))
	last := strings.TrimPrefix(buf.String(), first)
	for _, want := range []string{"\r[========================]", "100%", "4.0 MiB / 4.0 MiB", "2.0 MiB/s"} {
		if !strings.Contains(last, want) {
			t.Errorf("final bar lacks %q: %q", want, last)
		}
	}
	if !strings.HasSuffix(last, "\n") {
		t.Errorf("final bar does not end the line: %q", last)
	}
}

func TestProgressErasesLongerLine(t *testing.T) {
	var buf strings.Builder
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newProgress(&buf, 0, t0)
	p.Add(5 << 30)
	p.tick(t0.Add(time.Second))
	// After 10^7 s the rate is a few hundred B/s: a shorter line, which must be
	// padded to cover the one it replaces.
	p.tick(t0.Add(1e7 * time.Second))
	lines := strings.Split(buf.String(), "\r")[1:]
	if len(lines) != 2 {
		t.Fatalf("drew %q, want two redraws", buf.String())
	}
	if lines[0] != "5.0 GiB  5.0 GiB/s" {
		t.Errorf("unknown-total bar = %q, want bytes and rate", lines[0])
	}
	if want := "5.0 GiB  536 B/s  "; lines[1] != want {
		t.Errorf("shorter redraw = %q, want %q", lines[1], want)
	}
}

func TestProgressSilentForFastTransfer(t *testing.T) {
	var buf strings.Builder
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newProgress(&buf, 100, t0)
	p.Add(100)
	p.tick(t0.Add(100 * time.Millisecond))
	p.finish(t0.Add(200 * time.Millisecond))
	if buf.Len() != 0 {
		t.Errorf("a 200 ms transfer drew %q", buf.String())
	}
}

func TestProgressRunDrawsFinalLine(t *testing.T) {
	var buf strings.Builder
	// Started long ago, so the final line is due however fast this machine is.
	p := newProgress(&buf, 10, time.Now().Add(-time.Minute))
	stop := p.run()
	p.Add(10)
	stop()
	if got := buf.String(); !strings.Contains(got, "100%") || !strings.HasSuffix(got, "\n") {
		t.Errorf("after stop, stderr = %q, want a final 100%% line", got)
	}
}

func TestCpProgressOutput(t *testing.T) {
	src, dst := fileStore(t), fileStore(t)
	mustZB(t, strings.Repeat("x", 1<<16), "put", src, "obj")
	for _, tc := range []struct {
		name string
		flag []string
	}{
		// A test's stderr is not a terminal: no bar unless forced, and a
		// forced bar still waits out progressDelay, longer than this copy.
		// What remains is the summary line, or nothing with -q.
		{"auto", nil},
		{"forced", []string{"--progress"}},
		{"suppressed", []string{"--progress=false"}},
		{"forced recursive", []string{"--progress", "-r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, dstKey := "obj", "obj"
			if slices.Contains(tc.flag, "-r") {
				key, dstKey = "", ""
			}
			r := zb(t, "", append([]string{"cp", src, key, dst, dstKey}, tc.flag...)...)
			if r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, "copied 1 object, 65536 bytes (64.0 KiB) in ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want a success with one summary line", r.code, r.stdout, r.stderr)
			}
			r = zb(t, "", append([]string{"cp", "-q", src, key, dst, dstKey}, tc.flag...)...)
			if r.code != 0 || r.stderr != "" || r.stdout != "" {
				t.Errorf("-q: exit %d, stdout %q, stderr %q; want a silent success", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestAutoBool(t *testing.T) {
	for _, tc := range []struct {
		set         []string
		auto, wantV bool
	}{
		{nil, true, true},
		{nil, false, false},
		{[]string{"true"}, false, true},
		{[]string{"false"}, true, false},
	} {
		var b autoBool
		for _, s := range tc.set {
			if err := b.Set(s); err != nil {
				t.Fatal(err)
			}
		}
		if got := b.resolve(tc.auto); got != tc.wantV {
			t.Errorf("set %v, auto %v: resolve = %v, want %v", tc.set, tc.auto, got, tc.wantV)
		}
	}
	var b autoBool
	if err := b.Set("maybe"); err == nil {
		t.Error(`Set("maybe") succeeded`)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {3 << 40, "3.0 TiB"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestProgressCountsObjects(t *testing.T) {
	var buf strings.Builder
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newProgress(&buf, 700, t0)
	p.SetObjects(7)
	for range 3 {
		p.AddObject()
		p.Add(100)
	}
	if got := p.line(t0.Add(time.Second)); !strings.Contains(got, " 42%  3/7 objects  300 B / 700 B") {
		t.Errorf("line = %q, want the object count", got)
	}
}

// slowReader waits before its first read, so that a copy from it lasts
// longer than progressDelay however fast the machine is.
type slowReader struct {
	r     io.Reader
	delay time.Duration
	once  sync.Once
}

func (s *slowReader) Read(p []byte) (int, error) {
	s.once.Do(func() { time.Sleep(s.delay) })
	return s.r.Read(p)
}

// The progress bar's final line comes before the summary line, never after
// it: a copy long enough to show the bar ends with the summary.
func TestCpProgressEndsBeforeSummary(t *testing.T) {
	s := fileStore(t)
	var out, errOut strings.Builder
	in := &slowReader{r: strings.NewReader("payload"), delay: progressDelay + 2*progressInterval}
	if code := run([]string{"cp", "--progress", "-", s, "k"}, in, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := errOut.String()
	bar := strings.LastIndex(got, "\r")
	sum := strings.Index(got, "copied 1 object, 7 bytes in ")
	if bar < 0 || sum < 0 || bar > sum || !strings.HasSuffix(got, "s\n") || strings.Count(got[sum:], "\n") != 1 {
		t.Errorf("stderr = %q; want the bar, then the summary line last", got)
	}
}
