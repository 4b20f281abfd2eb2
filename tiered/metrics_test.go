package tiered_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/tiered"
)

// collectMetrics returns the value of each metric, summed over its data
// points (a histogram's count).
func collectMetrics(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			}
		}
	}
	return got
}

// A pass's moves, bytes and packs reach the MeterProvider.
func TestMetrics(t *testing.T) {
	ctx := ctxT(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	hot, cold := memPair(t)
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: 10, MeterProvider: mp})
	model := map[string]string{"a": "1", "b": "22", "c": "333"}
	for k, v := range model {
		mustPut(t, s, k, v)
	}
	got := collectMetrics(t, reader)
	if got["zonalblob.tiered.moves"] != 0 || got["zonalblob.tiered.passes"] != 0 {
		t.Errorf("before any pass: %v", got)
	}
	if _, ok := got["zonalblob.tiered.last_pass.age"]; ok {
		t.Error("time since the last pass exported before the first pass")
	}
	if res := s.CompactOnce(ctx); res.Moved != 3 || res.Failed != 0 {
		t.Fatalf("pass: %+v (%s)", res, s.Stats().LastError)
	}
	checkModel(t, s, model, nil)
	got = collectMetrics(t, reader)
	st := s.Stats()
	for name, want := range map[string]float64{
		"zonalblob.tiered.passes":      1,
		"zonalblob.tiered.moves":       3,
		"zonalblob.tiered.moved_bytes": 6,
		"zonalblob.tiered.move_errors": 0,
		"zonalblob.tiered.packs":       float64(st.Packs),
		"zonalblob.tiered.index_loads": float64(st.IndexLoads),
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	if st.Packs < 1 {
		t.Errorf("no pack written: %+v", st)
	}
	for _, name := range []string{
		"zonalblob.tiered.lag", "zonalblob.tiered.last_pass.age", "zonalblob.tiered.last_pass.duration",
		"zonalblob.tiered.conflicts", "zonalblob.tiered.busy", "zonalblob.tiered.recovered",
		"zonalblob.tiered.pack_rewrites", "zonalblob.tiered.tombstones", "zonalblob.tiered.retired",
		"zonalblob.tiered.unretired", "zonalblob.tiered.stale_hot", "zonalblob.tiered.graves",
		"zonalblob.tiered.graves_retired", "zonalblob.tiered.misses_checked",
		"zonalblob.tiered.index_cache.bytes", "zonalblob.tiered.index_cache.indexes",
	} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not exported", name)
		}
	}
	// Closed, the Store stops reporting.
	s.Close()
	if got := collectMetrics(t, reader); len(got) != 0 {
		t.Errorf("a closed store still reports %v", got)
	}
}

func quorumOverMem(n int) string {
	q := url.Values{"w": {"2"}}
	for range n {
		q.Add("replica", "mem://")
	}
	return "quorum://?" + q.Encode()
}

func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func childrenOf(rec *tracetest.SpanRecorder, parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ended(rec, name) {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// Opened by URL with a TracerProvider, every level is traced and the spans
// nest: a Put is a tiered span, whose child is the quorum's, whose children
// are its replicas'. A Stat of a missing key fails with the error kind at
// every level.
func TestSpansNestThroughOpen(t *testing.T) {
	ctx := ctxT(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	u := "tiered://?" + url.Values{"hot": {quorumOverMem(3)}, "cold": {"mem://"}, "manual": {"true"}}.Encode()
	s, err := blob.Open(ctx, u, blob.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts, ok := s.(*blob.TracedStore)
	if !ok {
		t.Fatalf("Open returned %T", s)
	}
	if _, ok := ts.Observed().(*tiered.Store); !ok {
		t.Fatalf("the traced store is %T", ts.Observed())
	}
	if err := blob.Put(ctx, s, "k", []byte("value"), nil); err != nil {
		t.Fatal(err)
	}
	top := ended(rec, "tiered.NewWriter")
	if len(top) != 1 {
		t.Fatalf("%d tiered.NewWriter spans", len(top))
	}
	if top[0].Parent().IsValid() {
		t.Error("the tiered span has a parent")
	}
	if attr(top[0], blob.AttrBytes) != "5" {
		t.Errorf("tiered.NewWriter bytes = %q, want 5", attr(top[0], blob.AttrBytes))
	}
	mid := childrenOf(rec, top[0], "quorum.NewWriter")
	if len(mid) != 1 {
		t.Fatalf("%d quorum.NewWriter children of tiered.NewWriter", len(mid))
	}
	var leaves []string
	for _, sp := range rec.Ended() {
		if sp.Parent().SpanID() == mid[0].SpanContext().SpanID() {
			if !strings.HasPrefix(sp.Name(), "mem.") {
				t.Errorf("child %s of the quorum's span", sp.Name())
			}
			leaves = append(leaves, sp.Name())
		}
	}
	if len(childrenOf(rec, mid[0], "mem.NewWriter")) < 2 {
		t.Errorf("the quorum's write has replica spans %v, want at least 2 writes", leaves)
	}

	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat of a missing key: %v", err)
	}
	stat := ended(rec, "tiered.Stat")
	if len(stat) != 1 {
		t.Fatalf("%d tiered.Stat spans", len(stat))
	}
	for _, sp := range append(stat, childrenOf(rec, stat[0], "quorum.Stat")...) {
		if attr(sp, blob.AttrErrorType) != "not_found" || sp.Status().Code != codes.Error {
			t.Errorf("%s: error.type %q, status %v", sp.Name(), attr(sp, blob.AttrErrorType), sp.Status())
		}
	}
	if len(childrenOf(rec, stat[0], "quorum.Stat")) == 0 {
		t.Error("no quorum.Stat under tiered.Stat")
	}

	// The opens nest too.
	open := ended(rec, "tiered.Open")
	if len(open) != 1 || len(childrenOf(rec, open[0], "quorum.Open")) != 1 {
		t.Fatalf("open spans: %d tiered.Open", len(open))
	}
	if n := len(childrenOf(rec, childrenOf(rec, open[0], "quorum.Open")[0], "mem.Open")); n != 3 {
		t.Errorf("%d replica opens under quorum.Open, want 3", n)
	}
}

// The background compactor's passes are spans, parents of the calls they
// make to traced tiers.
func TestCompactionPassSpan(t *testing.T) {
	ctx := ctxT(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hot, cold := memPair(t)
	th := blob.NewTracedStore(hot, blob.TracingOptions{TracerProvider: tp, Scheme: "hot"})
	s, err := tiered.New(nopClose{th}, nopClose{cold}, bound(tiered.Options{After: time.Nanosecond, Interval: 10 * time.Millisecond, PackMaxObjects: alone, TracerProvider: tp}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, "k", "v")
	var pass sdktrace.ReadOnlySpan
	for pass == nil {
		for _, sp := range ended(rec, "tiered.compact") {
			if attr(sp, "zonalblob.tiered.moved") == "1" {
				pass = sp
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no pass moved the object: %+v", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(childrenOf(rec, pass, "hot.List")) == 0 {
		t.Error("the pass's listing of hot is not its child")
	}
}

// The contract holds through tracing at every level: tiered over a quorum
// of mem:// replicas, opened by URL with a TracerProvider (so every level
// is a TracedStore with recording spans), compacting as the suite runs.
func TestConformanceTracedThroughOpen(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	u := "tiered://?" + url.Values{"hot": {quorumOverMem(3)}, "cold": {"mem://"}, "after": {"0"}, "interval": {"1ms"}}.Encode()
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, u, blob.WithTracerProvider(tp))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	if len(ended(rec, "tiered.compact")) == 0 || len(ended(rec, "quorum.NewWriter")) == 0 {
		t.Error("the suite ran without compaction passes or traced quorum writes")
	}
}

// blob.Open's MeterProvider reaches the tiered store and the quorum it
// opens as its hot tier.
func TestOpenOptionsReachTiers(t *testing.T) {
	ctx := ctxT(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	u := "tiered://?" + url.Values{"hot": {quorumOverMem(3)}, "cold": {"mem://"}, "manual": {"true"}}.Encode()
	s, err := blob.Open(ctx, u, blob.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustPut(t, s, "k", "v")
	got := collectMetrics(t, reader)
	if got["zonalblob.quorum.writes"] != 1 {
		t.Errorf("quorum writes = %v, want 1", got["zonalblob.quorum.writes"])
	}
	if _, ok := got["zonalblob.tiered.moves"]; !ok {
		t.Error("no tiered metrics")
	}
}
