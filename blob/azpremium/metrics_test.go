package azpremium_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
)

// Each Blob service operation is counted by operation and outcome and
// timed; with a TracerProvider it is a client span.
func TestRequestMetrics(t *testing.T) {
	ctx := context.Background()
	srv := azurite(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	o := storeOptions(srv)
	o.WarmConns, o.MeterProvider, o.TracerProvider = -1, mp, tp
	s, err := azpremium.New(ctx, newContainer(t, srv), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b"} {
		if err := blob.Put(ctx, s, k, []byte("data"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := blob.ReadAll(ctx, s, "a"); err != nil || string(b) != "data" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat of a missing key: %v", err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	type key struct{ metric, op, outcome string }
	got := map[key]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			str := func(set attribute.Set, k attribute.Key) string { v, _ := set.Value(k); return v.AsString() }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[key{m.Name, str(p.Attributes, "operation"), str(p.Attributes, "outcome")}] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[key{m.Name, str(p.Attributes, "operation"), ""}] += int64(p.Count)
				}
			}
		}
	}
	for k, want := range map[key]int64{
		{"zonalblob.azpremium.requests", "PutBlob", "ok"}:                  2,
		{"zonalblob.azpremium.requests", "GetBlobProperties", "not_found"}: 1,
		{"zonalblob.azpremium.request.duration", "PutBlob", ""}:            2,
		{"zonalblob.azpremium.retries", "PutBlob", ""}:                     0,
	} {
		if got[k] != want {
			t.Errorf("%v = %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
	if got[key{"zonalblob.azpremium.requests", "GetBlob", "ok"}] < 1 {
		t.Errorf("no GetBlob counted: %v", got)
	}
	spans := map[string]int{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()]++
	}
	if spans["azpremium.PutBlob"] != 2 || spans["azpremium.GetBlobProperties"] != 1 {
		t.Errorf("client spans %v", spans)
	}
}
