package blob

import (
	"context"
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// OpenOptions are what Open hands every store it opens, nested ones
// included (the replicas of a quorum:// URL, the tiers of a tiered:// one):
// where their metrics, spans and log lines go. A driver's opener reads them
// with OpenOptionsFrom and fills the fields of its own Options that the URL
// cannot carry. The zero value means otel's global providers, no spans from
// Open itself, and slog.Default().
type OpenOptions struct {
	// MeterProvider receives the stores' metrics (nil: otel's global).
	MeterProvider metric.MeterProvider
	// TracerProvider, when set, makes Open wrap every store it opens in a
	// TracedStore, and drivers that trace their requests use it. Nil means
	// no wrapper at all (not otel's global provider): Open then returns
	// the driver's own *Store, as callers that assert on it expect.
	TracerProvider trace.TracerProvider
	// Logger receives the stores' log lines (nil: slog.Default()).
	Logger *slog.Logger
	// KeysInSpans adds keys and prefixes to spans (see TracingOptions.RecordKeys).
	KeysInSpans bool
}

// OpenOption is an option of Open: WithMeterProvider, WithTracerProvider,
// WithLogger, WithKeysInSpans, or an OpenOptions value (its set fields).
type OpenOption interface {
	applyOpen(*OpenOptions)
}

func (o OpenOptions) applyOpen(dst *OpenOptions) {
	if o.MeterProvider != nil {
		dst.MeterProvider = o.MeterProvider
	}
	if o.TracerProvider != nil {
		dst.TracerProvider = o.TracerProvider
	}
	if o.Logger != nil {
		dst.Logger = o.Logger
	}
	if o.KeysInSpans {
		dst.KeysInSpans = true
	}
}

type openOptionFunc func(*OpenOptions)

func (f openOptionFunc) applyOpen(o *OpenOptions) { f(o) }

// WithMeterProvider sends the metrics of the stores Open opens to mp.
func WithMeterProvider(mp metric.MeterProvider) OpenOption {
	return openOptionFunc(func(o *OpenOptions) { o.MeterProvider = mp })
}

// WithTracerProvider traces every store Open opens, nested ones included,
// with spans from tp (see TracedStore). Pass otel.GetTracerProvider() to
// trace to the global provider.
func WithTracerProvider(tp trace.TracerProvider) OpenOption {
	return openOptionFunc(func(o *OpenOptions) { o.TracerProvider = tp })
}

// WithLogger sends the log lines of the stores Open opens to l.
func WithLogger(l *slog.Logger) OpenOption {
	return openOptionFunc(func(o *OpenOptions) { o.Logger = l })
}

// WithKeysInSpans records keys and prefixes in spans. Keys are user data,
// so by default spans carry only their length.
func WithKeysInSpans() OpenOption {
	return openOptionFunc(func(o *OpenOptions) { o.KeysInSpans = true })
}

type openOptionsKey struct{}

// OpenOptionsFrom returns the options of the Open that ctx comes from: an
// opener calls it to configure its store, and the opens it makes with ctx
// (of nested URLs) inherit them.
func OpenOptionsFrom(ctx context.Context) OpenOptions {
	o, _ := ctx.Value(openOptionsKey{}).(OpenOptions)
	return o
}

func withOpenOptions(ctx context.Context, opts []OpenOption) (context.Context, OpenOptions) {
	o := OpenOptionsFrom(ctx)
	if len(opts) == 0 {
		return ctx, o
	}
	for _, opt := range opts {
		if opt != nil {
			opt.applyOpen(&o)
		}
	}
	return context.WithValue(ctx, openOptionsKey{}, o), o
}

// ErrorKind names the sentinel err wraps, for metrics and spans (OpenTelemetry's
// error.type): "not_found", "exists", "precondition", "closed",
// "invalid_key", "invalid_argument", "unsupported", "bucket_not_found",
// "permission", "corrupt", "canceled", "deadline_exceeded", or "other". It
// is "" for nil. The set is small and fixed, so it can label a metric.
func ErrorKind(err error) string {
	if err == nil {
		return ""
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "other"
}

// errorKinds is checked in order: the first that err wraps names it.
var errorKinds = []struct {
	err  error
	name string
}{
	{ErrNotFound, "not_found"},
	{ErrExists, "exists"},
	{ErrPrecondition, "precondition"},
	{ErrClosed, "closed"},
	{ErrInvalidKey, "invalid_key"},
	{ErrInvalidArgument, "invalid_argument"},
	{ErrUnsupported, "unsupported"},
	{ErrBucketNotFound, "bucket_not_found"},
	{ErrPermission, "permission"},
	{ErrCorrupt, "corrupt"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// ObservingStore is a wrapper that only observes the calls it passes on
// (TracedStore): it changes no argument, result or error, so calling the
// store it wraps directly differs only in what is recorded.
type ObservingStore interface {
	Store
	// Observed returns the store whose calls this one observes.
	Observed() Store
}

// Unobserved returns s without the ObservingStore wrappers around it. A
// composite that needs a capability of its own from a store it was given
// (a method this package does not declare, which no wrapper can forward)
// asserts it on Unobserved(s), so that tracing does not change what the
// composite does.
func Unobserved(s Store) Store {
	for {
		o, ok := s.(ObservingStore)
		if !ok {
			return s
		}
		s = o.Observed()
	}
}
