package commitlog

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/internal/testkit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	stores := testkit.Mems(t, 3)
	opts := &Options{MeterProvider: mp}
	l := mustOpen(t, stores, "m", opts)
	for range 5 {
		if _, err := l.Append(ctx, []byte("x"), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewReader(stores, "m", 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readN(t, ctx, r, 10)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
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
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			}
		}
	}
	st := l.Stats()
	want := map[string]int64{
		"zonalblob.commitlog.records":            10,
		"zonalblob.commitlog.lac":                9,
		"zonalblob.commitlog.segments":           1,
		"zonalblob.commitlog.fenced":             0,
		"zonalblob.commitlog.frames":             st.Frames,
		"zonalblob.commitlog.frame.records":      st.Frames,
		"zonalblob.commitlog.reader.behind":      10,
		"zonalblob.commitlog.roll_waits":         st.RollWaits,
		"zonalblob.commitlog.segments_cut_short": 0,
		"zonalblob.commitlog.segments_moved":     0,
	}
	if _, ok := got["zonalblob.commitlog.segments_moved"]; !ok {
		t.Error("no zonalblob.commitlog.segments_moved observed")
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %d, want %d", name, got[name], v)
		}
	}
	if got["zonalblob.commitlog.flush.duration"] < st.Frames {
		t.Errorf("%d flushes recorded for %d frames", got["zonalblob.commitlog.flush.duration"], st.Frames)
	}
}
