package s3express_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// Each S3 operation is counted by operation and outcome, timed, and its
// SDK retries counted; with a TracerProvider it is a client span.
func TestRequestMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	srv := newServer(t, s3expresstest.Options{Profile: s3expresstest.MustProfile("zero")})
	s := newStore(t, srv, s3express.Options{MeterProvider: mp, TracerProvider: tp, WarmConns: -1}, func(o *s3.Options) {
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), time.Millisecond)
	})
	defer s.Close()
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := blob.Put(ctx, s, k, []byte("data"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The read's first attempt fails with a 500, which the SDK retries.
	srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpGetObject, Nth: srv.Stats().GetObject + 1, Status: http.StatusInternalServerError, Code: "InternalError"})
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
		{"zonalblob.s3express.requests", "PutObject", "ok"}:          2,
		{"zonalblob.s3express.requests", "GetObject", "ok"}:          1,
		{"zonalblob.s3express.requests", "HeadObject", "not_found"}:  1,
		{"zonalblob.s3express.request.duration", "PutObject", ""}:    2,
		{"zonalblob.s3express.request.duration", "GetObject", ""}:    1,
		{"zonalblob.s3express.retries", "GetObject", ""}:             1,
		{"zonalblob.s3express.requests", "HeadObject", "other"}:      0,
		{"zonalblob.s3express.retries", "PutObject", ""}:             0,
		{"zonalblob.s3express.request.duration", "DeleteObject", ""}: 0,
	} {
		if got[k] != want {
			t.Errorf("%v = %d, want %d (all: %v)", k, got[k], want, got)
		}
	}

	spans := map[string]int{}
	for _, sp := range rec.Ended() {
		spans[sp.Name()]++
		if sp.Name() == "s3express.GetObject" {
			for _, kv := range sp.Attributes() {
				if kv.Key == "zonalblob.attempts" && kv.Value.AsInt64() != 2 {
					t.Errorf("GetObject span: %d attempts, want 2", kv.Value.AsInt64())
				}
			}
		}
	}
	if spans["s3express.PutObject"] != 2 || spans["s3express.GetObject"] != 1 || spans["s3express.HeadObject"] != 1 {
		t.Errorf("client spans %v", spans)
	}
}
