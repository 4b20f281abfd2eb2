package gcsrapid_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

func TestOpenTelemetryMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4, MinIdle: 2}, MeterProvider: mp})
	defer s.Close()
	for range 3 {
		if _, err := blob.CreateBytes(ctx, s, "m/", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var writes uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					writes += p.Count
				}
			}
		}
	}
	st := s.Stats().Pools["m/"]
	if got["zonalblob.gcsrapid.pool.hits"]+got["zonalblob.gcsrapid.pool.misses"] != 3 {
		t.Errorf("hits+misses = %d+%d, want 3 creates (stats %+v)", got["zonalblob.gcsrapid.pool.hits"], got["zonalblob.gcsrapid.pool.misses"], st)
	}
	if got["zonalblob.gcsrapid.pool.loads"] < 1 {
		t.Errorf("no pool loads exported: %v", got)
	}
	if writes != 3 {
		t.Errorf("write duration histogram counted %d writes, want 3", writes)
	}
}
