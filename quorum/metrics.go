package quorum

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
)

// instrumentationName names the meter and tracer of a Store.
const instrumentationName = "github.com/zonalblob/zonalblob/quorum"

// metrics publishes Stats as OpenTelemetry instruments, observed from a
// snapshot when the SDK collects: the operations themselves only count.
type metrics struct {
	reg metric.Registration
}

func newMetrics(s *Store, mp metric.MeterProvider) (*metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	type counter struct {
		name, desc string
		value      func(*Stats) int64
		inst       metric.Int64ObservableCounter
	}
	counters := []*counter{
		{name: "zonalblob.quorum.writes", desc: "Writes acknowledged by W replicas.", value: func(st *Stats) int64 { return st.Writes }},
		{name: "zonalblob.quorum.failed_writes", desc: "Writes that did not reach W replicas.", value: func(st *Stats) int64 { return st.FailedWrites }},
		{name: "zonalblob.quorum.uncertain", desc: "Operations that failed with ErrUncertain: they may yet take effect.", value: func(st *Stats) int64 { return st.Uncertain }},
		{name: "zonalblob.quorum.rounds", desc: "Consensus rounds run (conditional operations, settling reads).", value: func(st *Stats) int64 { return st.Rounds }},
		{name: "zonalblob.quorum.contended", desc: "Consensus rounds lost to a concurrent one (outbid) and retried.", value: func(st *Stats) int64 { return st.Contended }},
		{name: "zonalblob.quorum.hedges", desc: "Reads that asked a second replica after the hedge delay.", value: func(st *Stats) int64 { return st.Hedges }},
		{name: "zonalblob.quorum.read_repairs", desc: "Reads that found the newest version on fewer than a majority.", value: func(st *Stats) int64 { return st.ReadRepairs }},
		{name: "zonalblob.quorum.repairs", desc: "Replica copies written or removed by repair.", value: func(st *Stats) int64 { return st.Repairs }},
		{name: "zonalblob.quorum.damaged", desc: "Replica objects found damaged (checksum or state that does not verify).", value: func(st *Stats) int64 { return st.Damaged }},
		{name: "zonalblob.quorum.rewritten", desc: "Damaged replica objects rewritten by repair.", value: func(st *Stats) int64 { return st.Rewritten }},
		{name: "zonalblob.quorum.collected", desc: "Tombstones and placeholders collected.", value: func(st *Stats) int64 { return st.Collected }},
		{name: "zonalblob.quorum.retired", desc: "Replica objects deleted by Retire.", value: func(st *Stats) int64 { return st.Retired }},
		{name: "zonalblob.quorum.anti_entropy_passes", desc: "Completed anti-entropy passes.", value: func(st *Stats) int64 { return st.AntiEntropy }},
		{name: "zonalblob.quorum.marked_down", desc: "Times a replica was marked down.", value: func(st *Stats) int64 { return st.MarkedDown }},
		{name: "zonalblob.quorum.came_back", desc: "Times a down replica answered again.", value: func(st *Stats) int64 { return st.CameBack }},
	}
	insts := make([]metric.Observable, 0, len(counters)+7)
	for _, c := range counters {
		inst, err := m.Int64ObservableCounter(c.name, metric.WithDescription(c.desc))
		if err != nil {
			return nil, err
		}
		c.inst = inst
		insts = append(insts, inst)
	}
	pending, err := m.Int64ObservableGauge("zonalblob.quorum.repair_pending", metric.WithDescription("Keys queued for repair."))
	if err != nil {
		return nil, err
	}
	tracked, err := m.Int64ObservableGauge("zonalblob.quorum.tracked_keys", metric.WithDescription("Keys this process wrote that some replica may still lack."))
	if err != nil {
		return nil, err
	}
	down, err := m.Int64ObservableGauge("zonalblob.quorum.replica.down", metric.WithDescription("1 while the replica is marked down."))
	if err != nil {
		return nil, err
	}
	ops, err := m.Int64ObservableCounter("zonalblob.quorum.replica.ops", metric.WithDescription("Calls made to the replica."))
	if err != nil {
		return nil, err
	}
	errs, err := m.Int64ObservableCounter("zonalblob.quorum.replica.errors", metric.WithDescription("Calls to the replica that failed (other than NotFound, refused preconditions and cancellations)."))
	if err != nil {
		return nil, err
	}
	p50, err := m.Float64ObservableGauge("zonalblob.quorum.replica.latency.p50", metric.WithUnit("s"), metric.WithDescription("Median latency of the replica's recent calls."))
	if err != nil {
		return nil, err
	}
	p95, err := m.Float64ObservableGauge("zonalblob.quorum.replica.latency.p95", metric.WithUnit("s"), metric.WithDescription("95th percentile latency of the replica's recent calls (the adaptive hedge delay)."))
	if err != nil {
		return nil, err
	}
	insts = append(insts, pending, tracked, down, ops, errs, p50, p95)
	replicaAttrs := make([]metric.ObserveOption, len(s.reps))
	for i := range s.reps {
		replicaAttrs[i] = metric.WithAttributes(attribute.String("replica", strconv.Itoa(i)))
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		for _, c := range counters {
			o.ObserveInt64(c.inst, c.value(&st))
		}
		o.ObserveInt64(pending, int64(st.RepairPending))
		o.ObserveInt64(tracked, int64(st.TrackedKeys))
		for i, r := range st.Replicas {
			a := replicaAttrs[i]
			d := int64(0)
			if r.Down {
				d = 1
			}
			o.ObserveInt64(down, d, a)
			o.ObserveInt64(ops, r.Ops, a)
			o.ObserveInt64(errs, r.Errors, a)
			o.ObserveFloat64(p50, r.P50.Seconds(), a)
			o.ObserveFloat64(p95, r.P95.Seconds(), a)
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

// noteUncertain counts err if it is an uncertain outcome.
func (s *Store) noteUncertain(err error) {
	if err != nil && errors.Is(err, ErrUncertain) {
		s.stats.uncertain.Add(1)
	}
}

// newTracer makes the spans of the Store's background work (repairs and
// anti-entropy passes), which no caller's span covers: the calls they make
// to traced replicas become their children instead of traces of their own.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(instrumentationName)
}

// traceRepair runs the repair of one key under a span, failed if the
// repair could not finish (it is retried).
func (s *Store) traceRepair(ctx context.Context, key string) bool {
	ctx, span := s.tracer.Start(ctx, "quorum.repair")
	ok := s.repairKey(ctx, key)
	if !ok {
		span.SetStatus(codes.Error, "repair incomplete")
	}
	span.End()
	return ok
}

// traceAntiEntropy runs one anti-entropy pass under a span that records
// the keys it queued for repair.
func (s *Store) traceAntiEntropy(ctx context.Context) {
	ctx, span := s.tracer.Start(ctx, "quorum.anti_entropy")
	n, err := s.antiEntropyPass(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("zonalblob.quorum.queued", n))
		if err != nil {
			span.SetAttributes(attribute.String("error.type", blob.ErrorKind(err)))
			span.SetStatus(codes.Error, blob.ErrorKind(err))
		}
	}
	span.End()
}
