package blob_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

func recorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// The wrapper is invisible to the contract: the whole suite passes through
// it with a recording provider (so readers and writers are wrapped), and
// every span the suite started has ended.
func TestConformanceMemThroughTracing(t *testing.T) {
	rec, tp := recorder()
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return blob.NewTracedStore(testkit.Mem(t), blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	if len(rec.Ended()) == 0 {
		t.Fatal("no spans recorded")
	}
	if n, e := len(rec.Started()), len(rec.Ended()); n != e {
		t.Errorf("%d spans started, %d ended: a handle's span outlived its Close", n, e)
	}
}

func TestGocloudDrivertestThroughTracing(t *testing.T) {
	_, tp := recorder()
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return blob.NewTracedStore(testkit.Mem(t), blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}

// Deletes, appends and copies carry their condition as writes do, and a
// condition CheckDelete refuses is refused in the span, without a call to
// the store below.
func TestTracedConditions(t *testing.T) {
	ctx := context.Background()
	rec, tp := recorder()
	inner := testkit.Mem(t)
	s := blob.NewTracedStore(inner, blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
	defer s.Close()
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	a, err := inner.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := blob.Copy(ctx, s, "c", "k", &blob.CopyOptions{If: blob.IfNotExist()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", &blob.DeleteOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("Delete with IfNotExist: %v, want ErrInvalidArgument", err)
	}
	if _, err := inner.Stat(ctx, "k"); err != nil {
		t.Fatalf("after the refused Delete: %v", err)
	}
	if err := s.Delete(ctx, "k", &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)}); err != nil {
		t.Fatal(err)
	}
	if c := spansNamed(rec, "mem.Copy"); len(c) != 1 {
		t.Errorf("%d Copy spans, want 1", len(c))
	} else if got, _ := attrOf(c[0], blob.AttrCondition); got.AsString() != "if_not_exist" {
		t.Errorf("Copy span's condition %q, want if_not_exist", got.Emit())
	}
	d := spansNamed(rec, "mem.Delete")
	if len(d) != 2 {
		t.Fatalf("%d Delete spans, want 2", len(d))
	}
	if got, _ := attrOf(d[0], blob.AttrErrorType); got.AsString() != "invalid_argument" {
		t.Errorf("refused Delete span's error.type %q, want invalid_argument", got.Emit())
	}
	if got, _ := attrOf(d[1], blob.AttrCondition); got.AsString() != "if_generation_match" {
		t.Errorf("conditional Delete span's condition %q, want if_generation_match", got.Emit())
	}
}

func TestTracedSpans(t *testing.T) {
	ctx := context.Background()
	rec, tp := recorder()
	s := blob.NewTracedStore(testkit.Mem(t), blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
	defer s.Close()
	if err := blob.Put(ctx, s, "secret/key", []byte("hello"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		t.Fatal(err)
	}
	if b, err := blob.ReadAll(ctx, s, "secret/key"); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat of a missing key: %v", err)
	}
	if _, err := s.List(ctx, &blob.ListOptions{Prefix: "secret/"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "secret/key", nil); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name  string
		attrs map[attribute.Key]attribute.Value
	}{
		{"mem.NewWriter", map[attribute.Key]attribute.Value{
			blob.AttrStore: attribute.StringValue("mem"), blob.AttrOperation: attribute.StringValue("NewWriter"),
			blob.AttrKeyLength: attribute.IntValue(10), blob.AttrBytes: attribute.Int64Value(5),
			blob.AttrCondition: attribute.StringValue("if_not_exist"),
		}},
		{"mem.NewRangeReader", map[attribute.Key]attribute.Value{
			blob.AttrSize: attribute.Int64Value(5), blob.AttrBytes: attribute.Int64Value(5),
		}},
		{"mem.Stat", map[attribute.Key]attribute.Value{
			blob.AttrErrorType: attribute.StringValue("not_found"), blob.AttrKeyLength: attribute.IntValue(7),
		}},
		{"mem.List", map[attribute.Key]attribute.Value{blob.AttrObjects: attribute.IntValue(1)}},
		{"mem.Delete", map[attribute.Key]attribute.Value{blob.AttrOperation: attribute.StringValue("Delete")}},
	} {
		spans := spansNamed(rec, c.name)
		if len(spans) != 1 {
			t.Errorf("%d spans named %s, want 1", len(spans), c.name)
			continue
		}
		for k, want := range c.attrs {
			if got, ok := attrOf(spans[0], k); !ok || got != want {
				t.Errorf("%s: %s = %v, want %v", c.name, k, got.Emit(), want.Emit())
			}
		}
	}
	if st := spansNamed(rec, "mem.Stat"); len(st) == 1 && st[0].Status().Code != codes.Error {
		t.Errorf("failed Stat has status %v", st[0].Status())
	}
	if w := spansNamed(rec, "mem.NewWriter"); len(w) == 1 && w[0].Status().Code == codes.Error {
		t.Errorf("committed write has status %v", w[0].Status())
	}
	for _, sp := range rec.Ended() {
		if _, ok := attrOf(sp, blob.AttrKey); ok {
			t.Errorf("%s records the key without RecordKeys", sp.Name())
		}
		if strings.Contains(sp.Status().Description, "secret") {
			t.Errorf("%s quotes the key in its status: %q", sp.Name(), sp.Status().Description)
		}
	}
	if n, e := len(rec.Started()), len(rec.Ended()); n != e {
		t.Errorf("%d spans started, %d ended", n, e)
	}
}

func TestTracedRecordKeys(t *testing.T) {
	ctx := context.Background()
	rec, tp := recorder()
	s := blob.NewTracedStore(testkit.Mem(t), blob.TracingOptions{TracerProvider: tp, Scheme: "mem", RecordKeys: true})
	defer s.Close()
	s.Stat(ctx, "a/b")
	sp := spansNamed(rec, "mem.Stat")
	if len(sp) != 1 {
		t.Fatalf("%d Stat spans", len(sp))
	}
	if v, ok := attrOf(sp[0], blob.AttrKey); !ok || v.AsString() != "a/b" {
		t.Errorf("key attribute %v, want a/b", v.Emit())
	}
}

// full serves every optional interface natively over a mem:// store and
// counts the native calls, so a test can tell native from fallback.
type full struct {
	blob.Store
	mu    sync.Mutex
	calls map[string]int
}

func (f *full) note(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
}

func (f *full) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	f.note("Prewarm")
	o := blob.WriterOptions{}
	if opts != nil {
		o = *opts
	}
	o.If = blob.IfNotExist()
	return f.Store.NewWriter(ctx, key, &o)
}

func (f *full) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	f.note("Create")
	return blob.CreateInline(ctx, f.Store, prefix, opts)
}

func (f *full) NewAppender(ctx context.Context, key string, opts *blob.AppendOptions) (blob.Writer, error) {
	f.note("NewAppender")
	old, err := blob.ReadAll(ctx, f.Store, key)
	if err != nil {
		return nil, err
	}
	w, err := f.Store.NewWriter(ctx, key, nil)
	if err != nil {
		return nil, err
	}
	w.Write(old)
	return w, nil
}

func (f *full) Copy(ctx context.Context, dst, src string, opts *blob.CopyOptions) error {
	f.note("Copy")
	return blob.CopyBetween(ctx, f.Store, dst, f.Store, src, opts)
}

func (f *full) OpenReaderAt(ctx context.Context, key string) (blob.ReaderAt, error) {
	f.note("OpenReaderAt")
	return blob.OpenReaderAt(ctx, f.Store, key)
}

func (f *full) Finalize(ctx context.Context, key string) error {
	f.note("Finalize")
	_, err := f.Store.Stat(ctx, key)
	return err
}

type stream struct {
	f    *full
	key  string
	size int64
}

func (s *stream) Append(ctx context.Context, p []byte) error {
	s.f.note("Append")
	old, err := blob.ReadAll(ctx, s.f.Store, s.key)
	if err != nil {
		return err
	}
	s.size += int64(len(p))
	return blob.Put(ctx, s.f.Store, s.key, append(old, p...), nil)
}
func (s *stream) Size() int64  { return s.size }
func (s *stream) Close() error { return nil }

func (f *full) CreateAppendStream(ctx context.Context, key string, data []byte) (blob.AppendStream, error) {
	f.note("CreateAppendStream")
	if err := blob.Put(ctx, f.Store, key, data, &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		return nil, err
	}
	return &stream{f: f, key: key, size: int64(len(data))}, nil
}

func (f *full) TakeOverAppendStream(ctx context.Context, key string) (blob.AppendStream, error) {
	f.note("TakeOverAppendStream")
	a, err := f.Store.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return &stream{f: f, key: key, size: a.Size}, nil
}

// exercise calls every optional operation through s.
func exercise(ctx context.Context, t *testing.T, s blob.Store, streams bool) {
	t.Helper()
	w, err := blob.Prewarm(ctx, s, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("pp"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.CreateBytes(ctx, s, "c/", []byte("cc"), nil); err != nil {
		t.Fatal(err)
	}
	if err := blob.Copy(ctx, s, "q", "p", nil); err != nil {
		t.Fatal(err)
	}
	ra, err := blob.OpenReaderAt(ctx, s, "q")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := ra.ReadAt(buf, 0); err != nil && err != io.EOF || string(buf) != "pp" {
		t.Fatalf("ReadAt: %q, %v", buf, err)
	}
	ra.Close()
	if err := blob.Finalize(ctx, s, "q"); err != nil {
		t.Fatal(err)
	}
	if !streams {
		return
	}
	if w, err := blob.Append(ctx, s, "q", nil); err != nil {
		t.Fatal(err)
	} else {
		w.Write([]byte("+"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	as := s.(blob.AppendStreamer)
	st, err := as.CreateAppendStream(ctx, "log", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = as.TakeOverAppendStream(ctx, "log")
	if err != nil || st.Size() != 2 {
		t.Fatalf("take over: size %v, %v", st, err)
	}
	st.Close()
}

// The wrapper forwards every capability natively where the wrapped store
// has it (each native method is reached once per call), and over a store
// without them falls back through its own traced core operations, which
// appear as children of the optional operation's span.
func TestTracedCapabilities(t *testing.T) {
	ctx := context.Background()
	t.Run("native", func(t *testing.T) {
		rec, tp := recorder()
		f := &full{Store: testkit.Mem(t), calls: map[string]int{}}
		s := blob.NewTracedStore(f, blob.TracingOptions{TracerProvider: tp, Scheme: "full"})
		defer s.Close()
		if got, want := blob.CapabilitiesOf(s), blob.CapabilitiesOf(f); got != want {
			t.Errorf("capabilities %+v, want %+v", got, want)
		}
		if !blob.ServesAppendStreams(s) {
			t.Error("append streams lost")
		}
		exercise(ctx, t, s, true)
		for _, op := range []string{"Prewarm", "Create", "Copy", "OpenReaderAt", "Finalize", "NewAppender", "CreateAppendStream", "Append", "TakeOverAppendStream"} {
			if f.calls[op] != 1 {
				t.Errorf("%s reached the wrapped store %d times, want 1", op, f.calls[op])
			}
			if len(spansNamed(rec, "full."+op)) != 1 {
				t.Errorf("%d spans full.%s, want 1", len(spansNamed(rec, "full."+op)), op)
			}
		}
	})
	t.Run("fallback", func(t *testing.T) {
		rec, tp := recorder()
		m := testkit.Mem(t)
		s := blob.NewTracedStore(m, blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
		defer s.Close()
		if got, want := blob.CapabilitiesOf(s), blob.CapabilitiesOf(m); got != want {
			t.Errorf("capabilities %+v, want %+v", got, want)
		}
		if blob.ServesAppendStreams(s) {
			t.Error("append streams invented")
		}
		exercise(ctx, t, s, false)
		if _, err := blob.Append(ctx, s, "q", nil); !errors.Is(err, blob.ErrUnsupported) {
			t.Errorf("Append: %v, want ErrUnsupported", err)
		}
		if _, err := s.CreateAppendStream(ctx, "log", nil); !errors.Is(err, blob.ErrUnsupported) {
			t.Errorf("CreateAppendStream: %v, want ErrUnsupported", err)
		}
		// mem:// copies natively; Create and OpenReaderAt fall back.
		for parentName, want := range map[string][]string{
			"mem.Create":       {"mem.NewWriter"},
			"mem.OpenReaderAt": {"mem.Stat", "mem.NewRangeReader"},
		} {
			parent := spansNamed(rec, parentName)
			if len(parent) != 1 {
				t.Fatalf("%d %s spans", len(parent), parentName)
			}
			children := map[string]bool{}
			for _, sp := range rec.Ended() {
				if sp.Parent().SpanID() == parent[0].SpanContext().SpanID() {
					children[sp.Name()] = true
				}
			}
			for _, w := range want {
				if !children[w] {
					t.Errorf("fallback %s has no child %s (children %v)", parentName, w, children)
				}
			}
		}
	})
}

func TestUnobserved(t *testing.T) {
	m := testkit.Mem(t)
	defer m.Close()
	s := blob.NewTracedStore(blob.NewTracedStore(m, blob.TracingOptions{}), blob.TracingOptions{})
	if blob.Unobserved(s) != m {
		t.Error("Unobserved did not reach the store below two tracing wrappers")
	}
	if blob.Unobserved(m) != m {
		t.Error("Unobserved changed a store that is not wrapped")
	}
}

// nested is a composite opened by URL: it opens its inner store with Open
// and the ctx it was given, as quorum and tiered do.
type nested struct {
	blob.Store
	opts blob.OpenOptions
}

var registerNested = sync.OnceFunc(func() {
	blob.Register("telemetrytest", func(ctx context.Context, u *url.URL) (blob.Store, error) {
		inner, err := blob.Open(ctx, u.Query().Get("inner"))
		if err != nil {
			return nil, err
		}
		return &nested{Store: inner, opts: blob.OpenOptionsFrom(ctx)}, nil
	})
})

// Open's options reach the openers of nested URLs, and with a
// TracerProvider every level is traced: the outer store's spans are parents
// of the inner's.
func TestOpenOptionsReachNestedOpens(t *testing.T) {
	registerNested()
	ctx := context.Background()
	rec, tp := recorder()
	s, err := blob.Open(ctx, "telemetrytest://?inner=mem://", blob.WithTracerProvider(tp), blob.WithKeysInSpans())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	outer, ok := s.(*blob.TracedStore)
	if !ok {
		t.Fatalf("Open with a TracerProvider returned %T", s)
	}
	n, ok := outer.Observed().(*nested)
	if !ok {
		t.Fatalf("traced store wraps %T", outer.Observed())
	}
	if n.opts.TracerProvider != tp || !n.opts.KeysInSpans {
		t.Errorf("opener saw options %+v", n.opts)
	}
	if _, ok := n.Store.(*blob.TracedStore); !ok {
		t.Errorf("nested open returned %T, want a TracedStore", n.Store)
	}
	if _, err := s.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatal(err)
	}
	o, i := spansNamed(rec, "telemetrytest.Stat"), spansNamed(rec, "mem.Stat")
	if len(o) != 1 || len(i) != 1 {
		t.Fatalf("%d outer and %d inner Stat spans", len(o), len(i))
	}
	if i[0].Parent().SpanID() != o[0].SpanContext().SpanID() {
		t.Error("the inner Stat span is not a child of the outer one")
	}
	if len(spansNamed(rec, "telemetrytest.Open")) != 1 || len(spansNamed(rec, "mem.Open")) != 1 {
		t.Error("no spans of the opens")
	}

	// Without a TracerProvider, Open returns the driver's store itself.
	plain, err := blob.Open(ctx, "telemetrytest://?inner=mem://", blob.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, ok := plain.(*nested); !ok {
		t.Errorf("Open without a TracerProvider returned %T", plain)
	}
}

// With a no-op provider the wrapper allocates nothing beyond what the
// provider's Start does. The untraced call runs under a context holding the
// same no-op span the wrapper passes on: the inner store's own tracing looks
// at the span in its context, and what it allocates for it is not the
// wrapper's.
func TestTracingNoopAllocations(t *testing.T) {
	ctx := context.Background()
	mem := testkit.Mem(t)
	defer mem.Close()
	if err := blob.Put(ctx, mem, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	// gocloud's error path under mem:// allocates 51 or 52 times a call,
	// from one round to the next; a miss that allocates nothing leaves only
	// the wrapper's allocations to count.
	m := fixedMiss{mem, fmt.Errorf("missing: %w", blob.ErrNotFound)}
	tp := noop.NewTracerProvider()
	s := blob.NewTracedStore(m, blob.TracingOptions{TracerProvider: tp, Scheme: "mem"})
	tr := tp.Tracer("x")
	for _, c := range []struct {
		name string
		call func(context.Context, blob.Store)
	}{
		{"Stat", func(ctx context.Context, s blob.Store) { s.Stat(ctx, "k") }},
		{"NewRangeReader", func(ctx context.Context, s blob.Store) {
			r, err := s.NewRangeReader(ctx, "k", 0, -1)
			if err == nil {
				r.Close()
			}
		}},
		{"Stat of a missing key", func(ctx context.Context, s blob.Store) { s.Stat(ctx, "missing") }},
		{"List", func(ctx context.Context, s blob.Store) { s.List(ctx, nil) }},
	} {
		// The fewest of a few runs: AllocsPerRun counts the whole
		// process's allocations, background goroutines' included.
		base := minAllocs(func() {
			sctx, sp := tr.Start(ctx, "x")
			c.call(sctx, m)
			sp.End()
		})
		traced := minAllocs(func() { c.call(ctx, s) })
		t.Logf("%s: %v traced, %v untraced with a span started", c.name, traced, base)
		if traced > base {
			t.Errorf("%s: %v allocations traced, %v untraced with a no-op span started", c.name, traced, base)
		}
	}
}

// fixedMiss answers a Stat of "missing" with one error made in advance.
type fixedMiss struct {
	blob.Store
	err error
}

func (f fixedMiss) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if key == "missing" {
		return nil, f.err
	}
	return f.Store.Stat(ctx, key)
}

// minAllocs is the fewest allocations per call of f over ten rounds, each
// after a collection (which runs the finalizers of earlier tests' leftovers
// first): what other goroutines allocate meanwhile counts too, and on a busy
// machine one round of five was seen two allocations high.
func minAllocs(f func()) float64 {
	least := math.Inf(1)
	for range 10 {
		runtime.GC()
		least = min(least, testing.AllocsPerRun(100, f))
	}
	return least
}
