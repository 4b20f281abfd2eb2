package blob

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the spans of TracedStore.
const tracerName = "github.com/zonalblob/zonalblob/blob"

// Span attribute keys of TracedStore.
const (
	AttrStore     = attribute.Key("zonalblob.store")      // the scheme of the store traced: "mem", "quorum", ...
	AttrOperation = attribute.Key("zonalblob.operation")  // the method: "Stat", "NewWriter", ...
	AttrKeyLength = attribute.Key("zonalblob.key.length") // bytes of the key (the prefix for List and Create)
	AttrKey       = attribute.Key("zonalblob.key")        // the key or prefix, only with RecordKeys
	AttrSize      = attribute.Key("zonalblob.size")       // the object's size (Stat, readers)
	AttrBytes     = attribute.Key("zonalblob.bytes")      // bytes read or written through the handle
	AttrObjects   = attribute.Key("zonalblob.objects")    // entries of a List page
	AttrCondition = attribute.Key("zonalblob.condition")  // the precondition of a write, delete, append or copy: "if_not_exist", "if_generation_match"
	AttrErrorType = attribute.Key("error.type")           // ErrorKind of the error, on failed spans
)

// TracingOptions configure NewTracedStore.
type TracingOptions struct {
	// TracerProvider makes the spans (nil: otel's global provider).
	TracerProvider trace.TracerProvider
	// Scheme names the store traced ("mem", "quorum", ...): spans are named
	// SCHEME.METHOD ("quorum.NewWriter") and carry it as zonalblob.store.
	// Empty means "store".
	Scheme string
	// RecordKeys adds keys and prefixes to spans as zonalblob.key. Keys are
	// user data (names of customers, paths), so by default spans carry
	// only their length.
	RecordKeys bool
}

// TracedStore is a Store that records an OpenTelemetry span for every call
// it passes to the store it wraps: each Store method, each optional one
// (Prewarm, Create, NewAppender, Copy, OpenReaderAt, Finalize, the append
// streams' opens and each Append), and each List page. The span of a call
// that returns a Reader, Writer or ReaderAt lasts until that handle's Close,
// and records the bytes it moved. The context the wrapped store gets
// carries the span, so a composite's spans (tiered, quorum) are parents of
// the spans of its traced inner stores: Open with WithTracerProvider gives
// the nesting tiered -> quorum -> replica for every call.
//
// A failed call's span has status Error and the attribute error.type, the
// ErrorKind of its error ("not_found" for a Stat of a missing key); its
// message is not recorded, as it quotes the key.
//
// Like fault.Store, TracedStore implements every optional interface of this
// package, serving each natively when the wrapped store does and otherwise
// with the blob helper's fallback run through the wrapper (so the fallback's
// calls are traced as children); Capabilities and ServesAppendStreams report
// the wrapped store's. It is an ObservingStore: it changes no result, and
// composites look behind it with Unobserved for capabilities of their own.
//
// With a no-op TracerProvider a call costs what the provider's Start costs
// and no more: attributes are built only for recording spans, and handles are
// returned unwrapped when their span does not record.
type TracedStore struct {
	inner  Store
	tracer trace.Tracer
	keys   bool
	store  attribute.KeyValue
	names  [numTracedOps]string
	plain  tracedPlain
}

var (
	_ Store                = (*TracedStore)(nil)
	_ ObservingStore       = (*TracedStore)(nil)
	_ Prewarmer            = (*TracedStore)(nil)
	_ Creator              = (*TracedStore)(nil)
	_ Appender             = (*TracedStore)(nil)
	_ Copier               = (*TracedStore)(nil)
	_ ReaderAtOpener       = (*TracedStore)(nil)
	_ Finalizer            = (*TracedStore)(nil)
	_ CapabilityReporter   = (*TracedStore)(nil)
	_ AppendStreamer       = (*TracedStore)(nil)
	_ AppendStreamReporter = (*TracedStore)(nil)
)

type tracedOp int

const (
	opNewRangeReader tracedOp = iota
	opNewWriter
	opStat
	opList
	opDelete
	opPrewarm
	opCreate
	opNewAppender
	opCopy
	opOpenReaderAt
	opFinalize
	opCreateAppendStream
	opTakeOverAppendStream
	opAppend
	opSurvey
	opReadHeld
	opRetire
	numTracedOps
)

var tracedOpNames = [numTracedOps]string{
	"NewRangeReader", "NewWriter", "Stat", "List", "Delete", "Prewarm", "Create",
	"NewAppender", "Copy", "OpenReaderAt", "Finalize", "CreateAppendStream",
	"TakeOverAppendStream", "Append", "Survey", "ReadHeld", "Retire",
}

// NewTracedStore returns s with a span for every call (see TracedStore).
func NewTracedStore(s Store, o TracingOptions) *TracedStore {
	tp := o.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	scheme := o.Scheme
	if scheme == "" {
		scheme = "store"
	}
	t := &TracedStore{inner: s, tracer: tp.Tracer(tracerName), keys: o.RecordKeys, store: AttrStore.String(scheme)}
	for i, n := range tracedOpNames {
		t.names[i] = scheme + "." + n
	}
	t.plain = tracedPlain{t}
	return t
}

// Observed implements ObservingStore: it returns the wrapped store.
func (s *TracedStore) Observed() Store { return s.inner }

// start opens the span of op on key. Attributes are set only on a span that
// records, so a no-op provider allocates nothing here.
func (s *TracedStore) start(ctx context.Context, op tracedOp, key string) (context.Context, trace.Span) {
	ctx, span := s.tracer.Start(ctx, s.names[op])
	if span.IsRecording() {
		span.SetAttributes(s.store, AttrOperation.String(tracedOpNames[op]), AttrKeyLength.Int(len(key)))
		if s.keys {
			span.SetAttributes(AttrKey.String(key))
		}
	}
	return ctx, span
}

// end ends span, marking it failed with err's kind.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		kind := ErrorKind(err)
		span.SetAttributes(AttrErrorType.String(kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}

func (s *TracedStore) setKey(span trace.Span, key string) {
	if span.IsRecording() {
		span.SetAttributes(AttrKeyLength.Int(len(key)))
		if s.keys {
			span.SetAttributes(AttrKey.String(key))
		}
	}
}

func setCondition(span trace.Span, c Condition) {
	if c.IsZero() || !span.IsRecording() {
		return
	}
	if c.NotExist() {
		span.SetAttributes(AttrCondition.String("if_not_exist"))
	} else {
		span.SetAttributes(AttrCondition.String("if_generation_match"))
	}
}

// NewRangeReader implements Store. Its span lasts until the reader's Close.
func (s *TracedStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (Reader, error) {
	ctx, span := s.start(ctx, opNewRangeReader, key)
	r, err := s.inner.NewRangeReader(ctx, key, offset, length)
	return traceReader(span, r, err)
}

func traceReader(span trace.Span, r Reader, err error) (Reader, error) {
	if err != nil {
		end(span, err)
		return nil, err
	}
	if !span.IsRecording() {
		span.End()
		return r, nil
	}
	if a := r.Attributes(); a != nil {
		span.SetAttributes(AttrSize.Int64(a.Size))
	}
	return &tracedReader{Reader: r, span: span}, nil
}

// NewWriter implements Store. Its span lasts until the writer's Close.
func (s *TracedStore) NewWriter(ctx context.Context, key string, opts *WriterOptions) (Writer, error) {
	ctx, span := s.start(ctx, opNewWriter, key)
	if opts != nil {
		setCondition(span, opts.If)
	}
	w, err := s.inner.NewWriter(ctx, key, opts)
	return traceWriter(span, w, err)
}

func traceWriter(span trace.Span, w Writer, err error) (Writer, error) {
	if err != nil {
		end(span, err)
		return nil, err
	}
	if !span.IsRecording() {
		span.End()
		return w, nil
	}
	return &tracedWriter{w: w, span: span}, nil
}

// Stat implements Store.
func (s *TracedStore) Stat(ctx context.Context, key string) (*Attributes, error) {
	ctx, span := s.start(ctx, opStat, key)
	a, err := s.inner.Stat(ctx, key)
	if err == nil && a != nil && span.IsRecording() {
		span.SetAttributes(AttrSize.Int64(a.Size))
	}
	end(span, err)
	return a, err
}

// List implements Store: one span per page.
func (s *TracedStore) List(ctx context.Context, opts *ListOptions) (*ListPage, error) {
	var prefix string
	if opts != nil {
		prefix = opts.Prefix
	}
	ctx, span := s.start(ctx, opList, prefix)
	p, err := s.inner.List(ctx, opts)
	if err == nil && p != nil && span.IsRecording() {
		span.SetAttributes(AttrObjects.Int(len(p.Objects)))
	}
	end(span, err)
	return p, err
}

// Delete implements Store. Options CheckDelete refuses are refused here,
// in the span, without a call to the wrapped store.
func (s *TracedStore) Delete(ctx context.Context, key string, opts *DeleteOptions) error {
	ctx, span := s.start(ctx, opDelete, key)
	cond, err := CheckDelete(key, opts)
	if err == nil {
		setCondition(span, cond)
		err = s.inner.Delete(ctx, key, opts)
	}
	end(span, err)
	return err
}

// Close closes the wrapped store; it makes no span.
func (s *TracedStore) Close() error { return s.inner.Close() }

// Prewarm implements Prewarmer: natively over a Prewarmer, otherwise as
// blob.Prewarm falls back (an IfNotExist writer through this wrapper). Its
// span lasts until the writer's Close.
func (s *TracedStore) Prewarm(ctx context.Context, key string, opts *WriterOptions) (Writer, error) {
	ctx, span := s.start(ctx, opPrewarm, key)
	var w Writer
	var err error
	if p, ok := s.inner.(Prewarmer); ok {
		w, err = p.Prewarm(ctx, key, opts)
	} else {
		w, err = Prewarm(ctx, s.plain, key, opts)
	}
	return traceWriter(span, w, err)
}

// Create implements Creator: natively over a Creator, otherwise as
// blob.Create falls back (a new name and an IfNotExist writer through this
// wrapper). The span's key is the prefix, then the key chosen; it lasts
// until the writer's Close.
func (s *TracedStore) Create(ctx context.Context, prefix string, opts *WriterOptions) (string, Writer, error) {
	ctx, span := s.start(ctx, opCreate, prefix)
	var key string
	var w Writer
	var err error
	if c, ok := s.inner.(Creator); ok {
		key, w, err = c.Create(ctx, prefix, opts)
	} else {
		key, w, err = CreateInline(ctx, s.plain, prefix, opts)
	}
	if err == nil {
		s.setKey(span, key)
	}
	w, err = traceWriter(span, w, err)
	if err != nil {
		return "", nil, err
	}
	return key, w, nil
}

// NewAppender implements Appender: natively over an Appender, otherwise it
// fails with an error wrapping ErrUnsupported, as blob.Append does. Options
// CheckAppend refuses are refused first, as blob.Append refuses them.
func (s *TracedStore) NewAppender(ctx context.Context, key string, opts *AppendOptions) (Writer, error) {
	ctx, span := s.start(ctx, opNewAppender, key)
	o, err := CheckAppend(key, opts)
	if err != nil {
		end(span, err)
		return nil, err
	}
	setCondition(span, o.If)
	a, ok := s.inner.(Appender)
	if !ok {
		err = &Error{Op: "append", Key: key, Kind: ErrUnsupported, Err: fmt.Errorf("%T cannot append", s.inner)}
		end(span, err)
		return nil, err
	}
	w, err := a.NewAppender(ctx, key, opts)
	return traceWriter(span, w, err)
}

// Copy implements Copier: natively over a Copier, otherwise by streaming
// through this wrapper as blob.Copy does. The span's key is dstKey.
// IfGenerationMatch passes CheckCopy here: a Copier below refuses it if it
// cannot enforce it, and the streaming copy's write is conditional.
func (s *TracedStore) Copy(ctx context.Context, dstKey, srcKey string, opts *CopyOptions) error {
	ctx, span := s.start(ctx, opCopy, dstKey)
	cond, err := CheckCopy(dstKey, opts, true)
	if err != nil {
		end(span, err)
		return err
	}
	setCondition(span, cond)
	if c, ok := s.inner.(Copier); ok {
		err = c.Copy(ctx, dstKey, srcKey, opts)
	} else {
		err = CopyBetween(ctx, s.plain, dstKey, s.plain, srcKey, opts)
	}
	end(span, err)
	return err
}

// OpenReaderAt implements ReaderAtOpener: natively over a ReaderAtOpener,
// otherwise as blob.OpenReaderAt falls back (a Stat and a range read per
// ReadAt, through this wrapper). The span lasts until the ReaderAt's Close.
func (s *TracedStore) OpenReaderAt(ctx context.Context, key string) (ReaderAt, error) {
	ctx, span := s.start(ctx, opOpenReaderAt, key)
	var ra ReaderAt
	var err error
	if o, ok := s.inner.(ReaderAtOpener); ok {
		ra, err = o.OpenReaderAt(ctx, key)
	} else {
		ra, err = OpenReaderAt(ctx, s.plain, key)
	}
	if err != nil {
		end(span, err)
		return nil, err
	}
	if !span.IsRecording() {
		span.End()
		return ra, nil
	}
	span.SetAttributes(AttrSize.Int64(ra.Size()))
	return &tracedReaderAt{ra: ra, span: span}, nil
}

// Finalize implements Finalizer: natively over a Finalizer, otherwise as
// blob.Finalize falls back (a Stat through this wrapper).
func (s *TracedStore) Finalize(ctx context.Context, key string) error {
	ctx, span := s.start(ctx, opFinalize, key)
	var err error
	if f, ok := s.inner.(Finalizer); ok {
		err = f.Finalize(ctx, key)
	} else {
		err = Finalize(ctx, s.plain, key)
	}
	end(span, err)
	return err
}

// Capabilities implements CapabilityReporter: the wrapped store's.
func (s *TracedStore) Capabilities() Capabilities { return CapabilitiesOf(s.inner) }

// retirer returns the wrapped store as a Retirer, or an error wrapping
// ErrUnsupported (a retirement has no fallback).
func (s *TracedStore) retirer(op, key string) (Retirer, error) {
	if r, ok := s.inner.(Retirer); ok && CapabilitiesOf(s.inner).Retire {
		return r, nil
	}
	return nil, &Error{Op: op, Key: key, Kind: ErrUnsupported, Err: fmt.Errorf("%T cannot retire versions", s.inner)}
}

// Survey implements Retirer over a Retirer (an error wrapping
// ErrUnsupported otherwise), with a span.
func (s *TracedStore) Survey(ctx context.Context, key string) (Holding, error) {
	ctx, span := s.start(ctx, opSurvey, key)
	r, err := s.retirer("survey", key)
	var h Holding
	if err == nil {
		h, err = r.Survey(ctx, key)
	}
	end(span, err)
	return h, err
}

// ReadHeld implements Retirer over a Retirer, with a span.
func (s *TracedStore) ReadHeld(ctx context.Context, h Holding) ([]byte, error) {
	ctx, span := s.start(ctx, opReadHeld, "")
	r, err := s.retirer("read", "")
	var b []byte
	if err == nil {
		b, err = r.ReadHeld(ctx, h)
	}
	end(span, err)
	return b, err
}

// Retire implements Retirer over a Retirer, with a span.
func (s *TracedStore) Retire(ctx context.Context, h Holding, version string) (Retired, error) {
	ctx, span := s.start(ctx, opRetire, "")
	r, err := s.retirer("delete", "")
	var out Retired
	if err == nil {
		out, err = r.Retire(ctx, h, version)
	}
	end(span, err)
	return out, err
}

// InFlightBound implements Retirer: the wrapped Retirer's (zero otherwise).
func (s *TracedStore) InFlightBound() time.Duration {
	if r, err := s.retirer("", ""); err == nil {
		return r.InFlightBound()
	}
	return 0
}

// GenerationTime implements Retirer: the wrapped Retirer's.
func (s *TracedStore) GenerationTime(gen string) (time.Time, bool) {
	if r, err := s.retirer("", ""); err == nil {
		return r.GenerationTime(gen)
	}
	return time.Time{}, false
}

// ServesAppendStreams implements AppendStreamReporter: the wrapped store's.
func (s *TracedStore) ServesAppendStreams() bool { return ServesAppendStreams(s.inner) }

// CreateAppendStream implements AppendStreamer over an AppendStreamer (an
// error wrapping ErrUnsupported otherwise). The open has a span; so does
// each Append on the stream, a child of the context given to Append.
func (s *TracedStore) CreateAppendStream(ctx context.Context, key string, data []byte) (AppendStream, error) {
	ctx, span := s.start(ctx, opCreateAppendStream, key)
	as, ok := s.inner.(AppendStreamer)
	if !ok {
		err := &Error{Op: "write", Key: key, Kind: ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.inner)}
		end(span, err)
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(AttrBytes.Int(len(data)))
	}
	st, err := as.CreateAppendStream(ctx, key, data)
	end(span, err)
	if err != nil {
		return nil, err
	}
	return traceStream(s, key, st), nil
}

// TakeOverAppendStream implements AppendStreamer over an AppendStreamer.
func (s *TracedStore) TakeOverAppendStream(ctx context.Context, key string) (AppendStream, error) {
	ctx, span := s.start(ctx, opTakeOverAppendStream, key)
	as, ok := s.inner.(AppendStreamer)
	if !ok {
		err := &Error{Op: "append", Key: key, Kind: ErrUnsupported, Err: fmt.Errorf("%T has no append streams", s.inner)}
		end(span, err)
		return nil, err
	}
	st, err := as.TakeOverAppendStream(ctx, key)
	if err == nil && span.IsRecording() {
		span.SetAttributes(AttrSize.Int64(st.Size()))
	}
	end(span, err)
	if err != nil {
		return nil, err
	}
	return traceStream(s, key, st), nil
}

// tracedPlain is the wrapper without its optional methods, so that the blob
// helpers' fallbacks run through its traced core operations instead of
// coming back to the optional methods that called them.
type tracedPlain struct{ s *TracedStore }

func (p tracedPlain) NewRangeReader(ctx context.Context, key string, offset, length int64) (Reader, error) {
	return p.s.NewRangeReader(ctx, key, offset, length)
}

func (p tracedPlain) NewWriter(ctx context.Context, key string, opts *WriterOptions) (Writer, error) {
	return p.s.NewWriter(ctx, key, opts)
}

func (p tracedPlain) Stat(ctx context.Context, key string) (*Attributes, error) {
	return p.s.Stat(ctx, key)
}

func (p tracedPlain) List(ctx context.Context, opts *ListOptions) (*ListPage, error) {
	return p.s.List(ctx, opts)
}

func (p tracedPlain) Delete(ctx context.Context, key string, opts *DeleteOptions) error {
	return p.s.Delete(ctx, key, opts)
}

func (p tracedPlain) Close() error { return p.s.Close() }

// tracedReader ends its span at Close with the bytes read and the first
// read error other than io.EOF.
type tracedReader struct {
	Reader
	span  trace.Span
	n     int64
	err   error
	ended bool
}

func (r *tracedReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.n += int64(n)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

func (r *tracedReader) Close() error {
	err := r.Reader.Close()
	if !r.ended {
		r.ended = true
		r.span.SetAttributes(AttrBytes.Int64(r.n))
		outcome := err
		if r.err != nil {
			outcome = r.err
		}
		end(r.span, outcome)
	}
	return err
}

// tracedWriter ends its span at Close with the bytes written and Close's
// error: the commit is the write's outcome.
type tracedWriter struct {
	w     Writer
	span  trace.Span
	n     int64
	ended bool
}

func (w *tracedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

func (w *tracedWriter) Close() error {
	err := w.w.Close()
	if !w.ended {
		w.ended = true
		w.span.SetAttributes(AttrBytes.Int64(w.n))
		end(w.span, err)
	}
	return err
}

// tracedReaderAt ends its span at Close with the bytes read; ReadAt is
// concurrent, so the count is atomic.
type tracedReaderAt struct {
	ra    ReaderAt
	span  trace.Span
	n     atomic.Int64
	ended atomic.Bool
}

func (r *tracedReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.ra.ReadAt(p, off)
	r.n.Add(int64(n))
	return n, err
}

func (r *tracedReaderAt) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := r.ra.ReadAtContext(ctx, p, off)
	r.n.Add(int64(n))
	return n, err
}

func (r *tracedReaderAt) Size() int64 { return r.ra.Size() }

func (r *tracedReaderAt) Close() error {
	err := r.ra.Close()
	if r.ended.CompareAndSwap(false, true) {
		r.span.SetAttributes(AttrBytes.Int64(r.n.Load()))
		end(r.span, err)
	}
	return err
}

// tracedStream makes a span of each Append.
type tracedStream struct {
	s   *TracedStore
	key string
	st  AppendStream
}

func (t *tracedStream) Append(ctx context.Context, p []byte) error {
	ctx, span := t.s.start(ctx, opAppend, t.key)
	if span.IsRecording() {
		span.SetAttributes(AttrBytes.Int(len(p)))
	}
	err := t.st.Append(ctx, p)
	end(span, err)
	return err
}

func (t *tracedStream) Size() int64  { return t.st.Size() }
func (t *tracedStream) Close() error { return t.st.Close() }

// traceStream traces st's appends; a pipelined stream stays pipelined.
func traceStream(s *TracedStore, key string, st AppendStream) AppendStream {
	t := &tracedStream{s: s, key: key, st: st}
	if p, ok := st.(PipelinedAppendStream); ok {
		return &tracedPipe{tracedStream: t, p: p}
	}
	return t
}

// tracedPipe gives each Send a span from the Send to its acknowledgement.
type tracedPipe struct {
	*tracedStream
	p PipelinedAppendStream
}

func (t *tracedPipe) Send(ctx context.Context, p []byte, done func(error)) error {
	ctx, span := t.s.start(ctx, opAppend, t.key)
	if span.IsRecording() {
		span.SetAttributes(AttrBytes.Int(len(p)))
	}
	err := t.p.Send(ctx, p, func(err error) {
		end(span, err)
		done(err)
	})
	if err != nil {
		end(span, err)
	}
	return err
}

// WrittenGeneration implements GenerationReporter: the inner writer's.
func (w *tracedWriter) WrittenGeneration() (string, bool) { return WrittenGeneration(w.w) }
