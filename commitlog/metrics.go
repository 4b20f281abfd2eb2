package commitlog

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentationName = "github.com/zonalblob/zonalblob/commitlog"

// writerMetrics publishes a writer's Stats as OpenTelemetry instruments
// (observed when the SDK collects) and records the size of each frame and
// the time of each append to a zone as they happen.
type writerMetrics struct {
	frameRecords metric.Int64Histogram
	flush        metric.Float64Histogram
	attrs        metric.MeasurementOption
	zoneAttrs    []metric.RecordOption // one per zone, built once: recordFlush runs on every append
	reg          metric.Registration
}

func meterOf(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	return mp.Meter(instrumentationName)
}

func newWriterMetrics(l *Log) (*writerMetrics, error) {
	m := meterOf(l.opts.MeterProvider)
	wm := &writerMetrics{attrs: metric.WithAttributes(attribute.String("log", l.name))}
	for i := range l.zones {
		wm.zoneAttrs = append(wm.zoneAttrs, metric.WithAttributes(attribute.Int("zone", i)))
	}
	var err error
	if wm.frameRecords, err = m.Int64Histogram("zonalblob.commitlog.frame.records",
		metric.WithDescription("Records per frame: how many appends shared one flush."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)); err != nil {
		return nil, err
	}
	if wm.flush, err = m.Float64Histogram("zonalblob.commitlog.flush.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of one append (of one or more frames) to one zone."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1)); err != nil {
		return nil, err
	}
	records, err := m.Int64ObservableCounter("zonalblob.commitlog.records", metric.WithDescription("Records acknowledged (on W zones)."))
	if err != nil {
		return nil, err
	}
	frames, err := m.Int64ObservableCounter("zonalblob.commitlog.frames", metric.WithDescription("Frames cut, records and LAC-only ones."))
	if err != nil {
		return nil, err
	}
	zoneErrors, err := m.Int64ObservableCounter("zonalblob.commitlog.zone_errors", metric.WithDescription("Appends or creates that failed on a zone."))
	if err != nil {
		return nil, err
	}
	segments, err := m.Int64ObservableCounter("zonalblob.commitlog.segments", metric.WithDescription("Segments started."))
	if err != nil {
		return nil, err
	}
	rollWaits, err := m.Int64ObservableCounter("zonalblob.commitlog.roll_waits", metric.WithDescription("Rolls that waited for the next segment, created ahead, to exist."))
	if err != nil {
		return nil, err
	}
	cutShort, err := m.Int64ObservableCounter("zonalblob.commitlog.segments_cut_short", metric.WithDescription("Segments ended early because the stores refused more appends."))
	if err != nil {
		return nil, err
	}
	moved, err := m.Int64ObservableCounter("zonalblob.commitlog.segments_moved", metric.WithDescription("Sealed segments moved to the regional store."))
	if err != nil {
		return nil, err
	}
	fenced, err := m.Int64ObservableGauge("zonalblob.commitlog.fenced", metric.WithDescription("1 once a newer writer has fenced this one."))
	if err != nil {
		return nil, err
	}
	lac, err := m.Int64ObservableGauge("zonalblob.commitlog.lac", metric.WithDescription("Last-add-confirmed offset."))
	if err != nil {
		return nil, err
	}
	wm.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := l.Stats()
		o.ObserveInt64(records, st.Records, wm.attrs)
		o.ObserveInt64(frames, st.Frames, wm.attrs)
		o.ObserveInt64(zoneErrors, st.ZoneErrors, wm.attrs)
		o.ObserveInt64(segments, st.Segments, wm.attrs)
		o.ObserveInt64(rollWaits, st.RollWaits, wm.attrs)
		o.ObserveInt64(cutShort, st.CutShort, wm.attrs)
		o.ObserveInt64(moved, l.MoveStats().Moved, wm.attrs)
		f := int64(0)
		if st.Fenced {
			f = 1
		}
		o.ObserveInt64(fenced, f, wm.attrs)
		o.ObserveInt64(lac, l.Committed(), wm.attrs)
		return nil
	}, records, frames, zoneErrors, segments, rollWaits, cutShort, moved, fenced, lac)
	return wm, err
}

func (wm *writerMetrics) recordFrame(records int) {
	wm.frameRecords.Record(context.Background(), int64(records), wm.attrs)
}

func (wm *writerMetrics) recordFlush(zone int, d time.Duration) {
	wm.flush.Record(context.Background(), d.Seconds(), wm.zoneAttrs[zone])
}

func (wm *writerMetrics) close() {
	if wm.reg != nil {
		wm.reg.Unregister()
	}
}

// readerMetrics records how far behind the LAC a reader is when it takes a
// record: its lag in records.
type readerMetrics struct {
	behind metric.Int64Histogram
}

func newReaderMetrics(mp metric.MeterProvider) (*readerMetrics, error) {
	behind, err := meterOf(mp).Int64Histogram("zonalblob.commitlog.reader.behind",
		metric.WithDescription("Committed records not yet returned when a reader returns one: its lag in records."),
		metric.WithExplicitBucketBoundaries(0, 1, 10, 100, 1000, 10000, 100000))
	if err != nil {
		return nil, err
	}
	return &readerMetrics{behind: behind}, nil
}
