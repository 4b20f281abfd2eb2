package quorum_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/quorum"
)

// collect returns the sum over data points of each metric (the count of a
// histogram), and the data points of each per-replica metric by replica.
func collect(t *testing.T, r *sdkmetric.ManualReader) (map[string]float64, map[string]map[string]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	byReplica := map[string]map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Value)
					if rep, ok := p.Attributes.Value("replica"); ok {
						if byReplica[m.Name] == nil {
							byReplica[m.Name] = map[string]float64{}
						}
						byReplica[m.Name][rep.AsString()] = float64(p.Value)
					}
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
	return got, byReplica
}

// syncBuffer is a log destination safe for the Store's goroutines.
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

// The Store's counters reach a MeterProvider (acknowledged writes, rounds,
// an uncertain outcome, a replica marked down and back, repairs), its
// background repairs a TracerProvider, and the health changes its Logger.
func TestMetricsAndBackgroundSpans(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var logs syncBuffer
	reps, fs := faulted(t, 3, 21)
	opts := testOptions()
	opts.W = 2
	opts.FailureThreshold = 2
	opts.MeterProvider, opts.TracerProvider = mp, tp
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	q := newQuorum(t, reps, opts)
	defer q.Close()

	for i := range 3 {
		if err := blob.Put(ctx, q, fmt.Sprintf("k%d", i), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := blob.Put(ctx, q, "k0", []byte("w"), &blob.WriterOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("IfNotExist over an existing key: %v", err)
	}

	// A store-chosen name is written in one round to each replica; when
	// two of three commits land but report failure, the write may have
	// taken effect: uncertain.
	var rules []fault.RuleID
	for _, f := range fs[1:] {
		rules = append(rules, f.Add(fault.Rule{Op: fault.OpCommit, Effect: fault.FailAfter}))
	}
	w, err := blob.Prewarm(ctx, q, blob.NewName("u/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if err := w.Close(); !errors.Is(err, quorum.ErrUncertain) {
		t.Fatalf("write acknowledged by one replica, landed on three: %v, want ErrUncertain", err)
	}
	for i, f := range fs[1:] {
		f.Remove(rules[i])
	}

	// A replica down for some writes is marked down, comes back, and is
	// repaired.
	fs[1].SetDown(true)
	for i := range 6 {
		if err := blob.Put(ctx, q, fmt.Sprintf("d%d", i), []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	fs[1].SetDown(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := q.Stats()
		if st.Repairs > 0 && st.CameBack > 0 && strings.Contains(logs.String(), "answers again") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica 1 was not brought back and repaired: %+v\nlog:\n%s", st, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}

	st := q.Stats()
	got, byReplica := collect(t, reader)
	for name, want := range map[string]int64{
		"zonalblob.quorum.writes":    st.Writes,
		"zonalblob.quorum.uncertain": 1,
		"zonalblob.quorum.rounds":    st.Rounds,
	} {
		if got[name] != float64(want) {
			t.Errorf("%s = %v, want %d (stats %+v)", name, got[name], want, st)
		}
	}
	if st.Writes != 9 {
		t.Errorf("%d writes acknowledged, want 9", st.Writes)
	}
	for _, name := range []string{"zonalblob.quorum.rounds", "zonalblob.quorum.repairs", "zonalblob.quorum.marked_down", "zonalblob.quorum.came_back"} {
		if got[name] < 1 {
			t.Errorf("%s = %v, want at least 1", name, got[name])
		}
	}
	for _, name := range []string{
		"zonalblob.quorum.failed_writes", "zonalblob.quorum.contended", "zonalblob.quorum.hedges",
		"zonalblob.quorum.read_repairs", "zonalblob.quorum.damaged", "zonalblob.quorum.rewritten",
		"zonalblob.quorum.collected", "zonalblob.quorum.retired", "zonalblob.quorum.anti_entropy_passes",
		"zonalblob.quorum.repair_pending", "zonalblob.quorum.tracked_keys", "zonalblob.quorum.replica.down",
		"zonalblob.quorum.replica.latency.p50", "zonalblob.quorum.replica.latency.p95",
	} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s not exported", name)
		}
	}
	if len(byReplica["zonalblob.quorum.replica.ops"]) != 3 || byReplica["zonalblob.quorum.replica.errors"]["1"] < 1 {
		t.Errorf("per-replica calls %v, errors %v", byReplica["zonalblob.quorum.replica.ops"], byReplica["zonalblob.quorum.replica.errors"])
	}
	if !strings.Contains(logs.String(), "replica marked down") {
		t.Errorf("no log line for the replica marked down:\n%s", logs.String())
	}
	repairs := 0
	for _, s := range rec.Ended() {
		if s.Name() == "quorum.repair" {
			repairs++
		}
	}
	if repairs == 0 {
		t.Error("no quorum.repair span")
	}
}

// The contract holds through tracing at both levels: a quorum:// URL
// opened with a TracerProvider is a TracedStore over a quorum of
// TracedStores, every span recording.
func TestConformanceTracedThroughOpen(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	q := url.Values{"w": {"2"}, "replica": {"mem://", "mem://", "mem://"}, "anti_entropy_interval": {"-1s"},
		"repair_grace": {"1ms"}, "probe_interval": {"20ms"}}
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, "quorum://?"+q.Encode(), blob.WithTracerProvider(tp))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	parents := map[trace.SpanID]string{}
	for _, sp := range rec.Ended() {
		parents[sp.SpanContext().SpanID()] = sp.Name()
	}
	nested := 0
	for _, sp := range rec.Ended() {
		if strings.HasPrefix(sp.Name(), "mem.") && strings.HasPrefix(parents[sp.Parent().SpanID()], "quorum.") {
			nested++
		}
	}
	if nested == 0 {
		t.Error("no replica span is the child of a quorum span")
	}
}
