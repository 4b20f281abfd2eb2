package tiered

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
)

// instrumentationName names the meter and tracer of a Store.
const instrumentationName = "github.com/zonalblob/zonalblob/tiered"

// metrics publishes Stats as OpenTelemetry instruments, observed from a
// snapshot when the SDK collects.
type metrics struct {
	reg metric.Registration
}

func newMetrics(s *Store, mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	type counter struct {
		name, desc, unit string
		value            func(*Stats) int64
		inst             metric.Int64ObservableCounter
	}
	counters := []*counter{
		{name: "zonalblob.tiered.passes", desc: "Compaction passes completed.", value: func(st *Stats) int64 { return st.Passes }},
		{name: "zonalblob.tiered.moves", desc: "Objects moved to cold and deleted from hot.", value: func(st *Stats) int64 { return st.MovedObjects }},
		{name: "zonalblob.tiered.moved_bytes", unit: "By", desc: "Bytes of the objects moved to cold.", value: func(st *Stats) int64 { return st.MovedBytes }},
		{name: "zonalblob.tiered.move_errors", desc: "Moves that failed; the object stays in hot for the next pass.", value: func(st *Stats) int64 { return st.Errors }},
		{name: "zonalblob.tiered.conflicts", desc: "Moves abandoned because the object was overwritten or deleted meanwhile.", value: func(st *Stats) int64 { return st.Conflicts }},
		{name: "zonalblob.tiered.busy", desc: "Objects skipped because a conditional operation held them.", value: func(st *Stats) int64 { return st.Busy }},
		{name: "zonalblob.tiered.recovered", desc: "Move markers of failed or crashed moves examined by recovery.", value: func(st *Stats) int64 { return st.Recovered }},
		{name: "zonalblob.tiered.packs", desc: "Packs written (by moves and rewrites).", value: func(st *Stats) int64 { return st.Packs }},
		{name: "zonalblob.tiered.pack_rewrites", desc: "Packs rewritten without their dead entries.", value: func(st *Stats) int64 { return st.Rewrites }},
		{name: "zonalblob.tiered.tombstones", desc: "Tombstones written in the pack log.", value: func(st *Stats) int64 { return st.Tombstones }},
		{name: "zonalblob.tiered.retired", desc: "Hot replica copies deleted by pack moves.", value: func(st *Stats) int64 { return st.Retired }},
		{name: "zonalblob.tiered.unretired", desc: "Retirements left for recovery (a replica did not answer).", value: func(st *Stats) int64 { return st.Unretired }},
		{name: "zonalblob.tiered.stale_hot", desc: "Answers of hot set aside as older than the pack log's.", value: func(st *Stats) int64 { return st.StaleHot }},
		{name: "zonalblob.tiered.graves", desc: "Graves written in hot by Deletes over versions a move may have been taking.", value: func(st *Stats) int64 { return st.Graves }},
		{name: "zonalblob.tiered.graves_retired", desc: "Graves the compactor removed with what they shadowed.", value: func(st *Stats) int64 { return st.GravesRetired }},
		{name: "zonalblob.tiered.misses_checked", desc: "Reads and Stats that missed in both tiers and asked both again.", value: func(st *Stats) int64 { return st.MissesChecked }},
		{name: "zonalblob.tiered.index_loads", desc: "Pack indexes read from cold.", value: func(st *Stats) int64 { return st.IndexLoads }},
	}
	// The lease's, one data point per shard (attribute
	// zonalblob.tiered.shard).
	type shardCounter struct {
		name, desc string
		value      func(*ShardLease) int64
		inst       metric.Int64ObservableCounter
	}
	shardCounters := []*shardCounter{
		{name: "zonalblob.tiered.lease.acquired", desc: "Epochs of the compactor lease this Store began.", value: func(l *ShardLease) int64 { return l.Acquired }},
		{name: "zonalblob.tiered.lease.lost", desc: "Epochs of the compactor lease this Store lost before it released them.", value: func(l *ShardLease) int64 { return l.Lost }},
		{name: "zonalblob.tiered.passes_skipped", desc: "Passes not run because another process held the compactor lease.", value: func(l *ShardLease) int64 { return l.Skipped }},
	}
	insts := make([]metric.Observable, 0, len(counters)+len(shardCounters)+8)
	for _, c := range counters {
		opts := []metric.Int64ObservableCounterOption{metric.WithDescription(c.desc)}
		if c.unit != "" {
			opts = append(opts, metric.WithUnit(c.unit))
		}
		inst, err := m.Int64ObservableCounter(c.name, opts...)
		if err != nil {
			return nil, err
		}
		c.inst = inst
		insts = append(insts, inst)
	}
	for _, c := range shardCounters {
		inst, err := m.Int64ObservableCounter(c.name, metric.WithDescription(c.desc))
		if err != nil {
			return nil, err
		}
		c.inst = inst
		insts = append(insts, inst)
	}
	lag, err := m.Float64ObservableGauge("zonalblob.tiered.lag", metric.WithUnit("s"),
		metric.WithDescription("How much older than After the oldest object the last pass failed to move (or found busy) was: how far compaction is behind."))
	if err != nil {
		return nil, err
	}
	sinceLast, err := m.Float64ObservableGauge("zonalblob.tiered.last_pass.age", metric.WithUnit("s"),
		metric.WithDescription("Time since the last compaction pass ended (absent before the first)."))
	if err != nil {
		return nil, err
	}
	took, err := m.Float64ObservableGauge("zonalblob.tiered.last_pass.duration", metric.WithUnit("s"),
		metric.WithDescription("How long the last compaction pass took."))
	if err != nil {
		return nil, err
	}
	cacheBytes, err := m.Int64ObservableGauge("zonalblob.tiered.index_cache.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of pack indexes held in memory."))
	if err != nil {
		return nil, err
	}
	cached, err := m.Int64ObservableGauge("zonalblob.tiered.index_cache.indexes",
		metric.WithDescription("Pack indexes held in memory."))
	if err != nil {
		return nil, err
	}
	held, err := m.Int64ObservableGauge("zonalblob.tiered.lease.held",
		metric.WithDescription("1 while this Store holds the compactor lease of the shard (runs its passes), else 0."))
	if err != nil {
		return nil, err
	}
	epoch, err := m.Int64ObservableGauge("zonalblob.tiered.lease.epoch",
		metric.WithDescription("The epoch of the shard's compactor lease as this Store last saw it (one more for each new holder); attribute zonalblob.tiered.lease.holder names its holder."))
	if err != nil {
		return nil, err
	}
	age, err := m.Float64ObservableGauge("zonalblob.tiered.lease.age", metric.WithUnit("s"),
		metric.WithDescription("Time since the epoch of the shard's compactor lease began, as this Store last saw it (absent before any); attribute zonalblob.tiered.lease.holder names its holder."))
	if err != nil {
		return nil, err
	}
	insts = append(insts, lag, sinceLast, took, cacheBytes, cached, held, epoch, age)
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		for _, c := range counters {
			o.ObserveInt64(c.inst, c.value(&st))
		}
		o.ObserveFloat64(lag, st.Lag.Seconds())
		if !st.LastPass.IsZero() {
			o.ObserveFloat64(sinceLast, max(time.Now().Sub(st.LastPass).Seconds(), 0))
			o.ObserveFloat64(took, st.LastPassTook.Seconds())
		}
		o.ObserveInt64(cacheBytes, st.IndexCacheBytes)
		o.ObserveInt64(cached, int64(st.IndexesCached))
		for _, l := range st.Lease.Shards {
			shard := metric.WithAttributes(attribute.Int("zonalblob.tiered.shard", l.Shard))
			for _, c := range shardCounters {
				o.ObserveInt64(c.inst, c.value(&l), shard)
			}
			h := int64(0)
			if l.Held {
				h = 1
			}
			o.ObserveInt64(held, h, shard)
			holder := metric.WithAttributes(attribute.Int("zonalblob.tiered.shard", l.Shard), attribute.String("zonalblob.tiered.lease.holder", l.Holder))
			o.ObserveInt64(epoch, int64(l.Epoch), holder)
			if !l.Since.IsZero() {
				o.ObserveFloat64(age, max(time.Since(l.Since).Seconds(), 0), holder)
			}
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, err
	}
	return &metrics{reg: reg}, nil
}

func (m *metrics) close() {
	if m != nil {
		m.reg.Unregister()
	}
}

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

// tracePass runs one background compaction pass under a span, the parent
// of the spans of the calls it makes to traced tiers, recording what it did.
func (s *Store) tracePass(ctx context.Context) {
	ctx, span := s.tracer.Start(ctx, "tiered.compact")
	res := s.CompactOnce(ctx)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.Int("zonalblob.tiered.moved", res.Moved),
			attribute.Int("zonalblob.tiered.moved_bytes", res.Bytes),
			attribute.Int("zonalblob.tiered.conflicts", res.Conflicts),
			attribute.Int("zonalblob.tiered.busy", res.Busy),
			attribute.Int("zonalblob.tiered.failed", res.Failed))
		if res.Err != nil {
			kind := blob.ErrorKind(res.Err)
			span.SetAttributes(attribute.String("error.type", kind))
			span.SetStatus(codes.Error, kind)
		}
	}
	span.End()
}
