package gcsrapid_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// blob.Open's MeterProvider and Logger reach a store opened by URL.
func TestOpenOptions(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	var logs bytes.Buffer
	srv := newServer(t, gcsrapidtest.Zero())
	if err := srv.CreateBucket("opts", true); err != nil {
		t.Fatal(err)
	}
	s, err := blob.Open(ctx, "gcsrapid://opts?pool_size=2&endpoint="+srv.Endpoint(),
		blob.WithMeterProvider(mp), blob.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := blob.CreateBytes(ctx, s, "m/", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == "zonalblob.gcsrapid.write.duration"
		}
	}
	if !found {
		t.Error("the store's metrics did not reach the MeterProvider given to Open")
	}
	if !strings.Contains(logs.String(), "gcsrapid") {
		t.Errorf("the store logged nothing to the Logger given to Open: %q", logs.String())
	}
}
