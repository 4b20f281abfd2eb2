package fault

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
)

func put(t *testing.T, s blob.Store, key, data string) {
	t.Helper()
	if err := blob.Put(t.Context(), s, key, []byte(data), nil); err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
}

func read(t *testing.T, s blob.Store, key string) string {
	t.Helper()
	b, err := blob.ReadAll(t.Context(), s, key)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

func exists(t *testing.T, s blob.Store, key string) bool {
	t.Helper()
	ok, err := blob.Exists(t.Context(), s, key)
	if err != nil {
		t.Fatalf("exists %q: %v", key, err)
	}
	return ok
}

// statPattern makes n Stat calls and records which ones failed.
func statPattern(s *Store, n int) string {
	var b strings.Builder
	for range n {
		if _, err := s.Stat(context.Background(), "k"); errors.Is(err, ErrInjected) {
			b.WriteByte('x')
		} else {
			b.WriteByte('.')
		}
	}
	return b.String()
}

func TestZeroRulesPassThrough(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	s := Wrap(mem, Options{Seed: 1})

	opts := &blob.WriterOptions{ContentType: "text/plain", Metadata: map[string]string{"a": "b"}}
	if err := blob.Put(ctx, s, "dir/a", []byte("hello"), opts); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"dir/b", "dir/c", "other"} {
		put(t, s, k, k)
	}

	a, err := s.Stat(ctx, "dir/a")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mem.Stat(ctx, "dir/a")
	if a.ContentType != "text/plain" || a.Metadata["a"] != "b" || a.Generation != want.Generation || a.Size != 5 {
		t.Errorf("Stat = %+v, inner has %+v", a, want)
	}

	r, err := s.NewRangeReader(ctx, "dir/a", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "ell" || r.Attributes().Size != 5 || r.Attributes().ContentType != "text/plain" {
		t.Errorf("range read = %q, attrs %+v", got, r.Attributes())
	}

	// Paging through the wrapper must return the inner store's pages verbatim.
	lo := &blob.ListOptions{Prefix: "dir/", PageSize: 2}
	for {
		p, err := s.List(ctx, lo)
		if err != nil {
			t.Fatal(err)
		}
		ip, _ := mem.List(ctx, lo)
		if len(p.Objects) != len(ip.Objects) || p.NextPageToken != ip.NextPageToken {
			t.Fatalf("page %+v, inner page %+v", p, ip)
		}
		for i := range p.Objects {
			if !reflect.DeepEqual(p.Objects[i], ip.Objects[i]) {
				t.Errorf("object %d = %+v, inner %+v", i, p.Objects[i], ip.Objects[i])
			}
		}
		if p.NextPageToken == "" {
			break
		}
		lo.PageToken = p.NextPageToken
	}

	// Errors are the inner store's, untouched.
	_, err = s.Stat(ctx, "missing")
	var be *blob.Error
	if !errors.Is(err, blob.ErrNotFound) || errors.Is(err, ErrInjected) || !errors.As(err, &be) || be.Op != "stat" {
		t.Errorf("Stat(missing) = %v", err)
	}
	if err := s.Delete(ctx, "dir/a", &blob.DeleteOptions{If: blob.IfGenerationMatch("nope")}); !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("Delete with a stale generation = %v", err)
	}
	if err := blob.Put(ctx, s, "dir/b", nil, &blob.WriterOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrExists) {
		t.Errorf("IfNotExist over an existing key = %v", err)
	}
	if err := s.Delete(ctx, "dir/a", nil); err != nil || exists(t, mem, "dir/a") {
		t.Errorf("Delete = %v, still there: %v", err, exists(t, mem, "dir/a"))
	}

	// Cancelling the writer's context before Close commits nothing.
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.NewWriter(wctx, "cancelled", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	cancel()
	if err := w.Close(); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Close after cancel = %v, want context.Canceled", err)
	}
	if exists(t, mem, "cancelled") {
		t.Error("a cancelled writer committed")
	}

	if n := s.Stats()[OpStat]; n.Failures != 0 || n.Calls == 0 {
		t.Errorf("Stats()[OpStat] = %+v", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "dir/b"); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Stat after Close = %v", err)
	}
}

// TestHelpersAsOverInner runs the blob helpers for optional capabilities over
// the wrapper and over a bare inner store, with and without the capabilities,
// and expects the same outcomes.
func TestHelpersAsOverInner(t *testing.T) {
	type result struct {
		createErr, copyErr, prewarmErr, prewarmAgainErr, appendErr bool
		unsupported                                                bool
		copied, prewarmed, appended, readAt                        string
	}
	run := func(t *testing.T, s blob.Store) result {
		ctx := t.Context()
		var r result
		put(t, s, "src", "source")
		key, err := blob.CreateBytes(ctx, s, "logs/", []byte("created"), nil)
		r.createErr = err != nil || !strings.HasPrefix(key, "logs/") || read(t, s, key) != "created"
		r.copyErr = blob.Copy(ctx, s, "dst", "src", nil) != nil
		r.copied = read(t, s, "dst")
		w, err := blob.Prewarm(ctx, s, "warm", nil)
		r.prewarmErr = err != nil
		if err == nil {
			w.Write([]byte("warm data"))
			r.prewarmErr = w.Close() != nil
		}
		r.prewarmed = read(t, s, "warm")
		if w, err := blob.Prewarm(ctx, s, "warm", nil); err == nil {
			r.prewarmAgainErr = w.Close() != nil
		} else {
			r.prewarmAgainErr = true
		}
		aw, err := blob.Append(ctx, s, "src", &blob.AppendOptions{IfSizeMatch: -1})
		r.appendErr = err != nil
		r.unsupported = errors.Is(err, blob.ErrUnsupported)
		if err == nil {
			aw.Write([]byte("+more"))
			r.appendErr = aw.Close() != nil
		}
		r.appended = read(t, s, "src")
		ra, err := blob.OpenReaderAt(ctx, s, "dst")
		if err != nil {
			t.Fatal(err)
		}
		defer ra.Close()
		p := make([]byte, 3)
		if n, err := ra.ReadAt(p, 2); err != nil || n != 3 || ra.Size() != 6 {
			t.Fatalf("ReadAt = %d, %v, size %d", n, err, ra.Size())
		}
		r.readAt = string(p)
		return r
	}
	for _, full := range []bool{false, true} {
		name := map[bool]string{false: "core only", true: "all optional"}[full]
		t.Run(name, func(t *testing.T) {
			newInner := func() blob.Store {
				if full {
					return newFullMem()
				}
				return newMem()
			}
			want := run(t, newInner())
			inner := newInner()
			got := run(t, Wrap(inner, Options{}))
			if got != want {
				t.Errorf("over the wrapper %+v\nover the inner store %+v", got, want)
			}
			if want.unsupported == full {
				t.Errorf("Append unsupported = %v with full = %v", want.unsupported, full)
			}
			if f, ok := inner.(*fullMem); ok {
				for _, op := range []string{"create", "copy", "prewarm", "append", "reader-at"} {
					if f.calls(op) == 0 {
						t.Errorf("the wrapper did not use the inner store's native %s", op)
					}
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	pattern := func(seed uint64) string {
		s := Wrap(newMem(), Options{Seed: seed})
		s.FailRandom(OpStat, 0.5, nil)
		return statPattern(s, 128)
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	if a != b {
		t.Errorf("same seed, different failures:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 injected the same failures: %s", a)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("p=0.5 over 128 calls gave %s", a)
	}

	// Rules on several ops draw from the one stream in call order, so a mixed
	// sequence replays too.
	mixed := func(seed uint64) string {
		s := Wrap(newMem(), Options{Seed: seed})
		s.FailRandom(OpStat, 0.3, nil)
		s.FailRandom(OpList, 0.6, nil)
		var b strings.Builder
		for i := range 200 {
			var err error
			if i%3 == 0 {
				_, err = s.List(context.Background(), nil)
			} else {
				_, err = s.Stat(context.Background(), "k")
			}
			b.WriteString(map[bool]string{true: "x", false: "."}[errors.Is(err, ErrInjected)])
		}
		return b.String()
	}
	if m1, m2 := mixed(11), mixed(11); m1 != m2 {
		t.Errorf("same seed, mixed ops, different failures:\n%s\n%s", m1, m2)
	}
}

func TestCountedRules(t *testing.T) {
	tests := []struct {
		name string
		add  func(s *Store) RuleID
		want string
	}{
		{"nth", func(s *Store) RuleID { return s.FailNth(OpStat, 3, nil) }, "..x......."},
		{"first", func(s *Store) RuleID { return s.FailNth(OpStat, 1, nil) }, "x........."},
		{"from n for k", func(s *Store) RuleID { return s.FailFrom(OpStat, 2, 3, nil) }, ".xxx......"},
		{"from n on", func(s *Store) RuleID { return s.FailFrom(OpStat, 7, 0, nil) }, "......xxxx"},
		{"other op", func(s *Store) RuleID { return s.FailFrom(OpList, 1, 0, nil) }, ".........."},
		{"other key", func(s *Store) RuleID { return s.Add(Rule{Op: OpStat, KeyPrefix: "z"}) }, ".........."},
		{"matching key", func(s *Store) RuleID { return s.Add(Rule{Op: OpStat, KeyPrefix: "k", Skip: 8}) }, "........xx"},
		{"never", func(s *Store) RuleID { return s.FailRandom(OpStat, 0, nil) }, ".........."},
		{"always", func(s *Store) RuleID { return s.FailRandom(OpStat, 1, nil) }, "xxxxxxxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMem()
			put(t, mem, "k", "v")
			s := Wrap(mem, Options{})
			statPattern(s, 2) // calls before the rule is added do not count toward it
			id := tt.add(s)
			if got := statPattern(s, 10); got != tt.want {
				t.Errorf("failures %s, want %s", got, tt.want)
			}
			if !s.Remove(id) || s.Remove(id) {
				t.Error("Remove did not remove the rule exactly once")
			}
			if got := statPattern(s, 3); got != "..." {
				t.Errorf("after Remove: %s", got)
			}
			st := s.Stats()[OpStat]
			if want := int64(strings.Count(tt.want, "x")); st.Calls != 15 || st.Failures != want {
				t.Errorf("Stats = %+v, want 15 calls, %d failures", st, want)
			}
		})
	}
}

func TestFailRandomRate(t *testing.T) {
	for _, p := range []float64{0.1, 0.5, 0.9} {
		s := Wrap(newMem(), Options{Seed: 42})
		s.FailRandom(OpStat, p, nil)
		const n = 4000
		got := float64(strings.Count(statPattern(s, n), "x")) / n
		if got < p-0.05 || got > p+0.05 {
			t.Errorf("p=%v: failed %.3f of calls", p, got)
		}
	}
}

// A Delay rule holds a call for its delay on the clock (the bubble's fake one
// here), no less, and counts it; a context that ends first ends the call.
func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		put(t, mem, "k", "v")
		s := Wrap(mem, Options{})
		const d = 30 * time.Millisecond
		id := s.AddLatency(OpStat, latency.Fixed(d))
		done := make(chan error, 1)
		go func() {
			_, err := s.Stat(t.Context(), "k")
			done <- err
		}()
		time.Sleep(d - time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Stat returned (%v) before its %v delay was over", err, d)
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("Stat still blocked once its %v delay was over", d)
		}
		if st := s.Stats()[OpStat]; st != (OpStats{Calls: 1, Delays: 1, Delayed: d}) {
			t.Errorf("Stats = %+v, want 1 call delayed by %v", st, d)
		}

		// A deadline shorter than the delay ends the call with the context's
		// error; the delay drawn still counts in full.
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		defer cancel()
		_, err := s.Stat(ctx, "k")
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrInjected) {
			t.Errorf("Stat past its deadline = %v", err)
		}
		if st := s.Stats()[OpStat]; st != (OpStats{Calls: 2, Failures: 1, Delays: 2, Delayed: 2 * d}) {
			t.Errorf("Stats = %+v, want 2 calls delayed by %v each, 1 cut short", st, d)
		}

		// Once the rule is removed, a call is not delayed at all: it
		// returns without the clock moving.
		s.Remove(id)
		go func() {
			_, err := s.Stat(t.Context(), "k")
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Stat blocked after the latency rule was removed")
		}
		if st := s.Stats()[OpStat]; st.Calls != 3 || st.Delays != 2 || st.Delayed != 2*d {
			t.Errorf("Stats = %+v, want a third call, not delayed", st)
		}
	})
}

// A hung call returns only when its context ends, however long that takes.
func TestHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := newMem()
		put(t, mem, "k", "v")
		s := Wrap(mem, Options{})
		s.Hang(OpRead)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := s.NewRangeReader(ctx, "k", 0, -1)
			done <- err
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("hung read returned %v before its context ended", err)
		default:
		}
		// Only reads hang; the rest of the store works meanwhile.
		if _, err := s.Stat(t.Context(), "k"); err != nil {
			t.Errorf("Stat = %v", err)
		}
		cancel()
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrInjected) {
				t.Errorf("hung read = %v", err)
			}
		default:
			t.Fatal("hung read still blocked after its context ended")
		}
		if st := s.Stats()[OpRead]; st != (OpStats{Calls: 1, Failures: 1}) {
			t.Errorf("Stats = %+v, want 1 call, failed", st)
		}
	})
}

func TestDown(t *testing.T) {
	ctx := t.Context()
	mem := newMem()
	put(t, mem, "k", "v")
	s := Wrap(mem, Options{Name: "zone-b"})
	r, err := s.NewRangeReader(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := s.NewWriter(ctx, "new", nil)
	if err != nil {
		t.Fatal(err)
	}

	s.SetDown(true)
	s.AddLatency(OpStat, latency.Fixed(time.Hour)) // down fails fast, before any rule
	calls := map[string]func() error{
		"read":   func() error { _, err := s.NewRangeReader(ctx, "k", 0, -1); return err },
		"write":  func() error { _, err := s.NewWriter(ctx, "k", nil); return err },
		"stat":   func() error { _, err := s.Stat(ctx, "k"); return err },
		"list":   func() error { _, err := s.List(ctx, nil); return err },
		"delete": func() error { return s.Delete(ctx, "k", nil) },
		"copy":   func() error { return blob.Copy(ctx, s, "k2", "k", nil) },
		"create": func() error { _, err := blob.CreateBytes(ctx, s, "p/", nil, nil); return err },
		"data":   func() error { _, err := r.Read(make([]byte, 1)); return err },
		"commit": func() error { return w.Close() },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrDown) || !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "zone-b") {
			t.Errorf("%s while down = %v", name, err)
		}
	}
	// Down fails a call before any rule sees it: the hour of latency was
	// never drawn, let alone slept.
	if st := s.Stats()[OpStat]; st != (OpStats{Calls: 1, Failures: 1}) {
		t.Errorf("Stats = %+v, want 1 call failed and no delay", st)
	}
	if exists(t, mem, "new") || !exists(t, mem, "k") {
		t.Error("the store changed while down")
	}

	s.SetDown(false)
	s.Reset()
	put(t, s, "new", "after")
	if read(t, s, "new") != "after" {
		t.Error("store did not come back up")
	}
}

func TestCommitAndDeleteSemantics(t *testing.T) {
	tests := []struct {
		name        string
		after       bool
		op          Op
		wantVisible bool
	}{
		{"commit fails before", false, OpCommit, false},
		{"commit fails after", true, OpCommit, true},
		{"delete fails before", false, OpDelete, true},
		{"delete fails after", true, OpDelete, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMem()
			s := Wrap(mem, Options{})
			if tt.op == OpDelete {
				put(t, s, "obj", "data")
			}
			if tt.after {
				s.FailNthAfter(tt.op, 1, nil)
			} else {
				s.FailNth(tt.op, 1, nil)
			}
			var err error
			if tt.op == OpCommit {
				err = blob.Put(t.Context(), s, "obj", []byte("data"), nil)
			} else {
				err = s.Delete(t.Context(), "obj", nil)
			}
			var be *blob.Error
			if !errors.Is(err, ErrInjected) || !errors.As(err, &be) || be.Op != tt.op.String() || be.Key != "obj" {
				t.Fatalf("err = %v", err)
			}
			if got := exists(t, mem, "obj"); got != tt.wantVisible {
				t.Errorf("visible in the inner store = %v, want %v", got, tt.wantVisible)
			}
			if st := s.Stats()[tt.op]; st.Failures != 1 {
				t.Errorf("Stats = %+v", st)
			}
		})
	}
}

// An ambiguous commit must not be reported when the inner commit itself failed:
// the caller then sees the real error.
func TestFailAfterKeepsInnerError(t *testing.T) {
	mem := newMem()
	put(t, mem, "obj", "old")
	s := Wrap(mem, Options{})
	s.FailNthAfter(OpCommit, 1, nil)
	err := blob.Put(t.Context(), s, "obj", []byte("new"), &blob.WriterOptions{If: blob.IfNotExist()})
	if !errors.Is(err, blob.ErrExists) || errors.Is(err, ErrInjected) {
		t.Errorf("err = %v", err)
	}
	if st := s.Stats()[OpCommit]; st.Failures != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestWriteDataFailureCommitsNothing(t *testing.T) {
	for _, after := range []bool{false, true} {
		mem := newMem()
		s := Wrap(mem, Options{})
		s.Add(Rule{Op: OpWriteData, Skip: 1, Count: 1, Effect: map[bool]Effect{false: FailBefore, true: FailAfter}[after]})
		w, err := s.NewWriter(t.Context(), "obj", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("a")); err != nil {
			t.Fatal(err)
		}
		_, err1 := w.Write([]byte("b"))
		_, err2 := w.Write([]byte("c"))
		err3 := w.Close()
		for i, err := range []error{err1, err2, err3} {
			if !errors.Is(err, ErrInjected) {
				t.Errorf("after=%v: call %d after the failure = %v", after, i, err)
			}
		}
		if exists(t, mem, "obj") {
			t.Errorf("after=%v: a writer whose Write failed committed", after)
		}
	}
}

func TestReadDataMidStream(t *testing.T) {
	mem := newMem()
	put(t, mem, "k", "0123456789")
	s := Wrap(mem, Options{})
	s.FailNth(OpReadData, 2, errors.New("connection reset"))
	r, err := s.NewRangeReader(t.Context(), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := make([]byte, 4)
	if n, err := r.Read(p); n != 4 || err != nil {
		t.Fatalf("first Read = %d, %v", n, err)
	}
	_, err = r.Read(p)
	if !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("second Read = %v", err)
	}
	// The stream stays broken, though the rule is spent.
	if _, err3 := r.Read(p); !errors.Is(err3, ErrInjected) {
		t.Errorf("third Read = %v", err3)
	}
}

func TestNativeReaderAtFaults(t *testing.T) {
	mem := newFullMem()
	put(t, mem, "k", "0123456789")
	s := Wrap(mem, Options{})
	ra, err := blob.OpenReaderAt(t.Context(), s, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	s.FailNth(OpReadData, 1, nil)
	p := make([]byte, 2)
	if _, err := ra.ReadAt(p, 0); !errors.Is(err, ErrInjected) {
		t.Errorf("first ReadAt = %v", err)
	}
	if n, err := ra.ReadAt(p, 4); err != nil || string(p[:n]) != "45" {
		t.Errorf("second ReadAt = %q, %v", p[:n], err)
	}
}

func TestInjectedErrors(t *testing.T) {
	custom := errors.New("throttled")
	tests := []struct {
		name  string
		err   error
		extra error
	}{
		{"default", nil, ErrInjected},
		{"custom", custom, custom},
		{"sentinel", blob.ErrNotFound, blob.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Wrap(newMem(), Options{})
			s.FailNth(OpWrite, 1, tt.err)
			_, err := s.NewWriter(t.Context(), "some/key", nil)
			if !errors.Is(err, ErrInjected) || !errors.Is(err, tt.extra) {
				t.Errorf("err = %v, want it to wrap ErrInjected and %v", err, tt.extra)
			}
			if msg := err.Error(); !strings.Contains(msg, `write "some/key"`) || !strings.Contains(msg, "injected") {
				t.Errorf("message %q does not name op and key", msg)
			}
		})
	}
}

// FailAfter on an operation that returns a handle must close the handle; for
// writers that means aborting, so nothing is committed.
func TestFailAfterOnOpen(t *testing.T) {
	mem := newMem()
	put(t, mem, "k", "v")
	s := Wrap(mem, Options{})
	for _, op := range []Op{OpRead, OpWrite, OpPrewarm, OpCreate, OpReaderAt} {
		s.FailNthAfter(op, 1, nil)
	}
	ctx := t.Context()
	if _, err := s.NewRangeReader(ctx, "k", 0, -1); !errors.Is(err, ErrInjected) {
		t.Errorf("read: %v", err)
	}
	if _, err := s.NewWriter(ctx, "w", nil); !errors.Is(err, ErrInjected) {
		t.Errorf("write: %v", err)
	}
	if _, err := blob.Prewarm(ctx, s, "p", nil); !errors.Is(err, ErrInjected) {
		t.Errorf("prewarm: %v", err)
	}
	if _, _, err := blob.Create(ctx, s, "c/", nil); !errors.Is(err, ErrInjected) {
		t.Errorf("create: %v", err)
	}
	if _, err := blob.OpenReaderAt(ctx, s, "k"); !errors.Is(err, ErrInjected) {
		t.Errorf("reader-at: %v", err)
	}
	p, err := mem.List(ctx, nil)
	if err != nil || len(p.Objects) != 1 {
		t.Errorf("inner store holds %+v, %v; want only k", p, err)
	}
}

func TestConcurrentUse(t *testing.T) {
	mem := newMem()
	s := Wrap(mem, Options{Seed: 9})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				key := string(rune('a'+g)) + "/" + string(rune('a'+i%26))
				blob.Put(context.Background(), s, key, bytes.Repeat([]byte{'x'}, i), nil)
				blob.ReadAll(context.Background(), s, key)
				s.List(context.Background(), &blob.ListOptions{Prefix: key[:1]})
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			id := s.FailRandom(Op(i%int(numOps)), 0.3, nil)
			s.SetDown(i%10 == 0)
			s.Stats()
			s.Remove(id)
		}
		s.Reset()
	})
	wg.Wait()
	st := s.Stats()
	if st[OpWrite].Calls != 200 || st[OpCommit].Calls == 0 {
		t.Errorf("Stats = %+v", st)
	}
}
