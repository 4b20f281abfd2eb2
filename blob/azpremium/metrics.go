package azpremium

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
)

// instrumentationName names the meter and tracer of a Store.
const instrumentationName = "github.com/zonalblob/zonalblob/blob/azpremium"

// requestMetrics records every Blob service operation a Store sends (one
// SDK call, all its attempts): a per-call policy of the SDK's pipeline
// times the operation and a per-retry policy counts its attempts.
type requestMetrics struct {
	requests  metric.Int64Counter
	duration  metric.Float64Histogram
	retries   metric.Int64Counter
	tracer    trace.Tracer // nil: no spans
	logger    *slog.Logger
	container attribute.KeyValue
}

func newRequestMetrics(container string, o Options) (*requestMetrics, error) {
	mp := o.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	rm := &requestMetrics{logger: o.Logger, container: attribute.String("container", container)}
	if rm.logger == nil {
		rm.logger = slog.Default()
	}
	if o.TracerProvider != nil {
		rm.tracer = o.TracerProvider.Tracer(instrumentationName)
	}
	var err error
	if rm.requests, err = m.Int64Counter("zonalblob.azpremium.requests",
		metric.WithDescription("Blob service operations sent (each with all its attempts), by operation and outcome (ok or the blob error kind).")); err != nil {
		return nil, err
	}
	if rm.duration, err = m.Float64Histogram("zonalblob.azpremium.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of one Blob service operation, retries included, to its response's headers."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)); err != nil {
		return nil, err
	}
	if rm.retries, err = m.Int64Counter("zonalblob.azpremium.retries",
		metric.WithDescription("Attempts the SDK made beyond the first of each operation.")); err != nil {
		return nil, err
	}
	return rm, nil
}

type attemptsKey struct{}

// perCall is the policy around one operation, ahead of the SDK's retries.
func (m *requestMetrics) perCall(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	op := operation(raw)
	ctx := raw.Context()
	var span trace.Span
	if m.tracer != nil {
		ctx, span = m.tracer.Start(ctx, "azpremium."+op, trace.WithSpanKind(trace.SpanKindClient))
	}
	var attempts atomic.Int32
	ctx = context.WithValue(ctx, attemptsKey{}, &attempts)
	start := time.Now()
	resp, err := req.WithContext(ctx).Next()
	d := time.Since(start)
	outcome := "ok"
	switch {
	case err != nil:
		// The transport's error (the pipeline passes service errors as
		// responses): a context's end or "other".
		outcome = blob.ErrorKind(err)
	case resp.StatusCode >= 400:
		// The SDK makes this response a *azcore.ResponseError after the
		// pipeline; classify it as the Store will.
		outcome = "other"
		if k := classify(&azcore.ResponseError{ErrorCode: resp.Header.Get("x-ms-error-code"), StatusCode: resp.StatusCode}); k != nil {
			outcome = blob.ErrorKind(k)
		}
	}
	opAttr := attribute.String("operation", op)
	m.requests.Add(ctx, 1, metric.WithAttributes(m.container, opAttr, attribute.String("outcome", outcome)))
	m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(m.container, opAttr))
	n := int(attempts.Load())
	if n > 1 {
		m.retries.Add(ctx, int64(n-1), metric.WithAttributes(m.container, opAttr))
		m.logger.Debug("azpremium: operation retried", "operation", op, "attempts", n, "outcome", outcome)
	}
	if span != nil {
		span.SetAttributes(attribute.String("http.request.method", raw.Method), attribute.String("rpc.method", op), attribute.Int("zonalblob.attempts", max(n, 1)))
		if resp != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		}
		if outcome != "ok" {
			span.SetAttributes(attribute.String("error.type", outcome))
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
	return resp, err
}

// perRetry counts one attempt of the operation perCall is timing.
func (m *requestMetrics) perRetry(req *policy.Request) (*http.Response, error) {
	if n, ok := req.Raw().Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
	return req.Next()
}

// operation names the Blob service REST operation of r, from its method,
// its comp and restype parameters and the copy header: a small fixed set,
// fit to label a metric.
func operation(r *http.Request) string {
	q := r.URL.Query()
	comp, container := q.Get("comp"), q.Get("restype") == "container"
	switch r.Method {
	case http.MethodHead:
		if container {
			return "GetContainerProperties"
		}
		return "GetBlobProperties"
	case http.MethodGet:
		switch {
		case comp == "list":
			return "ListBlobs"
		case comp == "blocklist":
			return "GetBlockList"
		case container:
			return "GetContainerProperties"
		}
		return "GetBlob"
	case http.MethodPut:
		switch {
		case comp == "block":
			return "PutBlock"
		case comp == "blocklist":
			return "PutBlockList"
		case comp == "appendblock":
			return "AppendBlock"
		case comp == "metadata":
			return "SetBlobMetadata"
		case comp == "properties":
			return "SetBlobProperties"
		case comp == "lease":
			return "LeaseBlob"
		case container:
			return "CreateContainer"
		case r.Header.Get("x-ms-copy-source") != "":
			return "CopyBlob"
		}
		return "PutBlob"
	case http.MethodDelete:
		if container {
			return "DeleteContainer"
		}
		return "DeleteBlob"
	}
	return r.Method
}

// policyFunc makes a function a pipeline policy.
type policyFunc func(*policy.Request) (*http.Response, error)

func (f policyFunc) Do(req *policy.Request) (*http.Response, error) { return f(req) }
