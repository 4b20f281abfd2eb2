package s3express

import (
	"context"
	"log/slog"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
)

// instrumentationName names the meter and tracer of a Store.
const instrumentationName = "github.com/zonalblob/zonalblob/blob/s3express"

// requestMetrics records every S3 operation a Store sends (one SDK call,
// all its attempts): a middleware at the front of the SDK's stack, added to
// each call by the per-operation option the Store passes anyway.
type requestMetrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
	retries  metric.Int64Counter
	tracer   trace.Tracer // nil: no spans
	logger   *slog.Logger
	bucket   attribute.KeyValue
}

func newRequestMetrics(bucket string, opts Options) (*requestMetrics, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	rm := &requestMetrics{logger: opts.Logger, bucket: attribute.String("bucket", bucket)}
	if rm.logger == nil {
		rm.logger = slog.Default()
	}
	if opts.TracerProvider != nil {
		rm.tracer = opts.TracerProvider.Tracer(instrumentationName)
	}
	var err error
	if rm.requests, err = m.Int64Counter("zonalblob.s3express.requests",
		metric.WithDescription("S3 operations sent (each with all its attempts), by operation and outcome (ok or the blob error kind).")); err != nil {
		return nil, err
	}
	if rm.duration, err = m.Float64Histogram("zonalblob.s3express.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of one S3 operation, retries included, to its response's headers."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)); err != nil {
		return nil, err
	}
	if rm.retries, err = m.Int64Counter("zonalblob.s3express.retries",
		metric.WithDescription("Attempts the SDK made beyond the first of each operation.")); err != nil {
		return nil, err
	}
	return rm, nil
}

// install adds the middleware to one operation's stack (an APIOptions entry).
func (m *requestMetrics) install(st *middleware.Stack) error {
	return st.Initialize.Add(m, middleware.Before)
}

// ID implements middleware.InitializeMiddleware.
func (m *requestMetrics) ID() string { return "zonalblob.s3express.metrics" }

// HandleInitialize implements middleware.InitializeMiddleware.
func (m *requestMetrics) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	out middleware.InitializeOutput, md middleware.Metadata, err error,
) {
	op := awsmiddleware.GetOperationName(ctx)
	var span trace.Span
	if m.tracer != nil {
		ctx, span = m.tracer.Start(ctx, "s3express."+op, trace.WithSpanKind(trace.SpanKindClient))
	}
	start := time.Now()
	out, md, err = next.HandleInitialize(ctx, in)
	d := time.Since(start)
	attempts := 1
	if r, ok := retry.GetAttemptResults(md); ok && len(r.Results) > 0 {
		attempts = len(r.Results)
	}
	outcome := "ok"
	if err != nil {
		outcome = "other"
		if k := classify(err); k != nil {
			outcome = blob.ErrorKind(k)
		} else if k := blob.ErrorKind(err); k != "" {
			outcome = k
		}
	}
	opAttr := attribute.String("operation", op)
	m.requests.Add(ctx, 1, metric.WithAttributes(m.bucket, opAttr, attribute.String("outcome", outcome)))
	m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(m.bucket, opAttr))
	if attempts > 1 {
		m.retries.Add(ctx, int64(attempts-1), metric.WithAttributes(m.bucket, opAttr))
		m.logger.Debug("s3express: operation retried", "operation", op, "attempts", attempts, "outcome", outcome)
	}
	if span != nil {
		span.SetAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.method", op), attribute.Int("zonalblob.attempts", attempts))
		if err != nil {
			span.SetAttributes(attribute.String("error.type", outcome))
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
	return out, md, err
}
