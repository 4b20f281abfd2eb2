package gcsrapid

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instrumentationName names the meter the Store's metrics come from.
const instrumentationName = "github.com/zonalblob/zonalblob/blob/gcsrapid"

// metrics publishes Stats as OpenTelemetry instruments: pool counters are
// observed from the pools when the SDK collects; write latency is recorded
// as it happens.
type metrics struct {
	writes metric.Float64Histogram
	reg    metric.Registration
}

func newMetrics(s *Store, mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	writes, err := m.Float64Histogram("zonalblob.gcsrapid.write.duration",
		metric.WithUnit("s"), metric.WithDescription("Time from NewWriter (or a pooled hand-out) to the end of a committed Close."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2))
	if err != nil {
		return nil, err
	}
	hits, err := m.Int64ObservableCounter("zonalblob.gcsrapid.pool.hits", metric.WithDescription("Creates served by a ready pooled object."))
	if err != nil {
		return nil, err
	}
	misses, err := m.Int64ObservableCounter("zonalblob.gcsrapid.pool.misses", metric.WithDescription("Creates that found no ready pooled object and waited for a load."))
	if err != nil {
		return nil, err
	}
	loads, err := m.Int64ObservableCounter("zonalblob.gcsrapid.pool.loads", metric.WithDescription("Objects created and flushed for the pool."))
	if err != nil {
		return nil, err
	}
	loadErrors, err := m.Int64ObservableCounter("zonalblob.gcsrapid.pool.load_errors", metric.WithDescription("Pool creates that failed."))
	if err != nil {
		return nil, err
	}
	discards, err := m.Int64ObservableCounter("zonalblob.gcsrapid.pool.discards", metric.WithDescription("Pooled objects deleted unused, by reason."))
	if err != nil {
		return nil, err
	}
	ready, err := m.Int64ObservableGauge("zonalblob.gcsrapid.pool.ready", metric.WithDescription("Pooled objects ready to hand out."))
	if err != nil {
		return nil, err
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for prefix, st := range s.Stats().Pools {
			attrs := metric.WithAttributes(attribute.String("bucket", s.name), attribute.String("prefix", prefix))
			o.ObserveInt64(hits, st.Hits, attrs)
			o.ObserveInt64(misses, st.Misses, attrs)
			o.ObserveInt64(loads, st.Loads, attrs)
			o.ObserveInt64(loadErrors, st.LoadErrors, attrs)
			o.ObserveInt64(ready, int64(st.Ready), attrs)
			for reason, n := range st.Discards {
				o.ObserveInt64(discards, n, metric.WithAttributes(attribute.String("bucket", s.name),
					attribute.String("prefix", prefix), attribute.String("reason", string(reason))))
			}
		}
		return nil
	}, hits, misses, loads, loadErrors, discards, ready)
	if err != nil {
		return nil, err
	}
	return &metrics{writes: writes, reg: reg}, nil
}

func (m *metrics) recordWrite(s *Store, d time.Duration) {
	if m != nil {
		m.writes.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("bucket", s.name)))
	}
}

func (m *metrics) close() {
	if m != nil {
		m.reg.Unregister()
	}
}
