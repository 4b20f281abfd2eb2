package gcsrapid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/api/option"
	gtransport "google.golang.org/api/transport/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// Scheme is the URL scheme of this driver.
const Scheme = "gcsrapid"

func init() {
	blob.RegisterWithGocloud(Scheme, func(ctx context.Context, u *url.URL) (blob.Store, error) {
		return OpenURL(ctx, u)
	})
}

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	// CreatorOptions configure the Create pools, with pool's names and
	// defaults: Capacity of each prefix's pool (URL pool_size; negative
	// turns pooling off), MinIdle (pool_min_idle), LoadConcurrency,
	// MaxItemAge, WriteTimeout, GraceWindow (the orphan reconciler's:
	// MaxItemAge + WriteTimeout + ClockSkew must be below it), ClockSkew
	// (between the processes that pool under the same prefixes and the
	// service) and MaxPools.
	pool.CreatorOptions
	// SweepInterval is how often the Store sweeps its pooled prefixes for
	// prewarmed objects that crashed processes left unwritten (deleting those
	// older than MaxItemAge + WriteTimeout + ClockSkew); SweepRate bounds
	// the deletes per second. A negative SweepInterval turns the sweep off.
	SweepInterval time.Duration
	SweepRate     int
	// Retries is how many times an idempotent call (reads, stats, listings,
	// deletes, conditional writes such as a pool's prewarms) is retried
	// after its first attempt, with jittered exponential backoff (default
	// DefaultRetries; negative: none). A write that could be applied twice
	// (an unconditional Put) is never retried.
	Retries int
	// MaxStreamsPerConn is the front end's cap on concurrent streams per
	// gRPC connection. A pooled writer holds a stream open, so OpenURL opens
	// enough connections for Capacity x MaxPools writers (see Connections),
	// or refuses a grpc_conn_pool too small for them.
	MaxStreamsPerConn int
	// Hierarchical applies the naming rules of a bucket with hierarchical
	// namespace (as Rapid buckets have) to keys, before any I/O: no empty
	// segment (leading or double slash), no "." or ".." segment, folder
	// names of at most MaxFolderNameLen bytes.
	Hierarchical bool
	// Logger receives the line that says, at open, whether the client uses
	// direct connectivity (nil: slog.Default()).
	Logger *slog.Logger
	// MaxBuffer is how many bytes a writer buffers before it streams.
	MaxBuffer int
	// ConnectTimeout bounds OpenURL's first call (the bucket's metadata),
	// which proves that the endpoint answers and the bucket exists before
	// the Store is handed out; default 10s.
	ConnectTimeout time.Duration
	// LeftoverAge is how long after its creation a write of more than one
	// message may still commit (default DefaultLeftoverAge). An object
	// older than this that no write committed (its writer died or gave
	// up) is a leftover: a conditional create of its key removes it and
	// goes on, instead of failing with ErrExists for an object no reader
	// sees. The removal is conditional on the object's metageneration, which
	// a commit changes, so it can fail a write slower than this but never
	// lose one that committed.
	LeftoverAge time.Duration
	// StreamDial, if set, dials the connections on which append streams
	// (blob.AppendStreamer) are driven directly, pipelined: several appends
	// in flight on one stream, each acknowledged by the service's persisted
	// size as its reply arrives (see blob.PipelinedAppendStream). The Store
	// dials another connection whenever those it has hold
	// MaxStreamsPerConn streams, and closes them at Close. OpenURL sets it
	// unless the URL says pipeline=false. Nil: append streams are the
	// client library's Writer, one flush at a time.
	StreamDial func() (*grpc.ClientConn, error)
	// MeterProvider receives the Store's OpenTelemetry metrics (pool hits,
	// misses, loads, discards by reason, ready objects, write latency);
	// nil means otel's global provider.
	MeterProvider metric.MeterProvider
}

// Defaults (the pools' are pool's: pool.DefaultCapacity and the others).
const (
	DefaultMaxBuffer = 16 << 20
	DefaultClockSkew = pool.DefaultClockSkew
	DefaultSweepRate = 50
	// DefaultRetries: an idempotent call is tried up to three times.
	DefaultRetries = 2
	// DefaultMaxStreamsPerConn is a typical front end's HTTP/2 cap.
	DefaultMaxStreamsPerConn = 100
	// DefaultConnectTimeout bounds OpenURL's first call.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultLeftoverAge: a write of more than one message commits within
	// an hour of creating its object, or its object is a leftover.
	DefaultLeftoverAge = time.Hour
	// MaxFolderNameLen bounds one folder name in a hierarchical namespace.
	MaxFolderNameLen = 64
)

// Connections is how many gRPC connections a client needs so that the
// Store's pooled writers (Capacity x MaxPools streams held open), its loads
// and other calls fit under MaxStreamsPerConn, with room for the uneven
// spread of round-robin assignment.
func Connections(o Options) int {
	o.setDefaults()
	streams := 100 // reads, listings, commits and loads in flight
	if o.Capacity > 0 {
		streams += o.Capacity * o.MaxPools
	}
	return max(1, (streams*3/2+o.MaxStreamsPerConn-1)/o.MaxStreamsPerConn)
}

func (o *Options) setDefaults() {
	o.CreatorOptions = o.CreatorOptions.WithDefaults() // a negative Capacity stays: no pooling
	if o.SweepInterval == 0 {
		// Often enough that residue lives at most about 1.5 windows.
		o.SweepInterval = min(max(o.InFlightAge()/2, 10*time.Millisecond), time.Minute)
	}
	if o.SweepRate == 0 {
		o.SweepRate = DefaultSweepRate
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	if o.MaxStreamsPerConn == 0 {
		o.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBuffer == 0 {
		o.MaxBuffer = DefaultMaxBuffer
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.LeftoverAge == 0 {
		o.LeftoverAge = DefaultLeftoverAge
	}
}

// Validate reports a configuration that is malformed or could lose data.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gcsrapid: "+format, args...)
	}
	switch {
	case o.MaxItemAge < 0 || o.WriteTimeout < 0 || o.GraceWindow < 0 || o.ClockSkew < 0 || o.LeftoverAge < 0 || o.ConnectTimeout < 0:
		return bad("durations must not be negative")
	case o.SweepRate < 0:
		return bad("sweep_rate must not be negative")
	case o.Capacity > 0 && o.MinIdle > o.Capacity:
		return bad("pool_min_idle %d exceeds pool_size %d", o.MinIdle, o.Capacity)
	case o.MinIdle < 0 || o.LoadConcurrency < 0 || o.MaxBuffer < 0 || o.MaxPools < 0 || o.MaxStreamsPerConn < 0:
		return bad("counts must not be negative")
	}
	if err := pool.CheckGrace(o.MaxItemAge, o.WriteTimeout, o.ClockSkew, o.GraceWindow); err != nil {
		return bad("%v", err)
	}
	return nil
}

// Store is a GCS Rapid bucket as a blob.Store.
type Store struct {
	client     *storage.Client
	ownsClient bool
	// streamConns are the connections of pipelined append streams.
	streamConns connPool
	bucket      *storage.BucketHandle
	name        string
	opts        Options

	life  driver.Lifecycle
	bg    driver.Tasks // asynchronous closes and deletes, which Close waits for
	bgCtx context.Context
	stop  context.CancelFunc

	creator *pool.Creator // nil when pooling is off
	sweeper *sweeper      // nil when pooling or the sweep is off

	stats   statsRecorder
	metrics *metrics

	connectivity string // what reportConnectivity found; see Stats
}

var (
	_ blob.Store          = (*Store)(nil)
	_ blob.Prewarmer      = (*Store)(nil)
	_ blob.Creator        = (*Store)(nil)
	_ blob.ReaderAtOpener = (*Store)(nil)
)

// OpenURL opens a gcsrapid:// URL (see the package doc for its parameters).
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	if u.Scheme != Scheme {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gcsrapid: scheme %q, want %q", u.Scheme, Scheme)
	}
	if u.Host == "" || u.Path != "" && u.Path != "/" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gcsrapid: URL must be gcsrapid://BUCKET, got %s", blob.Redact(u.String()))
	}
	q := driver.NewQuery(u)
	opts := Options{
		CreatorOptions:    pool.OptionsFromQuery(q),
		SweepInterval:     q.Duration("sweep_interval", 0),
		SweepRate:         q.Int("sweep_rate", 0),
		Retries:           q.Int("retries", 0),
		MaxBuffer:         int(q.Size("max_buffer", 0)),
		MaxStreamsPerConn: q.Int("max_streams_per_conn", 0),
		Hierarchical:      q.Bool("hierarchical", false),
		ConnectTimeout:    q.Duration("connect_timeout", 0),
		LeftoverAge:       q.Duration("leftover_age", 0),
	}
	oo := blob.OpenOptionsFrom(ctx)
	opts.MeterProvider, opts.Logger = oo.MeterProvider, oo.Logger
	// In a URL 0 means none; in Options it means the default.
	if q.Has("pool_size") && opts.Capacity == 0 {
		opts.Capacity = -1
	}
	if q.Has("retries") && opts.Retries == 0 {
		opts.Retries = -1
	}
	endpoint := q.String("endpoint", "")
	connPool := q.Int("grpc_conn_pool", 0)
	pipeline := q.Bool("pipeline", true)
	if err := q.Err(); err != nil {
		return nil, err
	}
	if err := checkEndpoint(endpoint); err != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gcsrapid: endpoint: %v", err)
	}
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	copts := []option.ClientOption{storage.WithAppendableUploads(), storage.WithGRPCBidiReads()}
	if endpoint != "" {
		// Client metrics export to Cloud Monitoring, which an emulator
		// endpoint has no project for.
		copts = append(copts, storage.WithDisabledClientMetrics())
	}
	if endpoint != "" {
		copts = append(copts, EmulatorOptions(endpoint)...)
	}
	need := Connections(opts)
	if connPool > 0 && connPool < need {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument,
			"gcsrapid: grpc_conn_pool=%d holds %d streams at %d per connection, but pool_size=%d x max_pools=%d pooled writers and other calls need %d connections: raise grpc_conn_pool or lower pool_size",
			connPool, connPool*opts.MaxStreamsPerConn, opts.MaxStreamsPerConn, opts.Capacity, opts.MaxPools, need)
	}
	tr := &targetRecorder{}
	copts = append(copts, option.WithGRPCConnectionPool(max(connPool, need)),
		option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(tr.unary)),
		option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(tr.stream)))
	client, err := storage.NewGRPCClient(ctx, copts...)
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("gcsrapid: %w", err)}
	}
	if pipeline {
		opts.StreamDial = func() (*grpc.ClientConn, error) { return dialStreams(endpoint) }
	}
	s, err := New(ctx, client, u.Host, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.ownsClient = true
	if err := s.openProbe(ctx, tr, endpoint); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// checkEndpoint refuses an endpoint that is not host:port, before any dial:
// the plaintext emulator connection takes no credentials, and gRPC would
// quote anything else, user information included, in its dial errors. The
// refusal never quotes the value.
func checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	if strings.Contains(endpoint, "@") || strings.Contains(endpoint, "/") {
		return errors.New("must be HOST:PORT of an emulator, without a scheme, path or credentials")
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return errors.New("must be HOST:PORT of an emulator")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("port must be a number from 1 to 65535")
	}
	return nil
}

// dialStreams dials the connection of pipelined append streams: plaintext
// to an emulator's endpoint, else the service's, authenticated by the
// application default credentials as the client is.
func dialStreams(endpoint string) (*grpc.ClientConn, error) {
	if endpoint != "" {
		return EmulatorStreamDial(endpoint)()
	}
	return gtransport.Dial(context.Background(), option.WithEndpoint("storage.googleapis.com:443"), option.WithScopes(storage.ScopeFullControl))
}

// EmulatorStreamDial is the Options.StreamDial of a plaintext,
// unauthenticated endpoint such as gcsrapidtest's.
func EmulatorStreamDial(endpoint string) func() (*grpc.ClientConn, error) {
	return func() (*grpc.ClientConn, error) {
		return grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
}

// EmulatorOptions are the client options for a plaintext, unauthenticated
// endpoint such as gcsrapidtest's.
func EmulatorOptions(endpoint string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
	}
}

// New returns a Store over bucket, using client (a gRPC client made with
// storage.WithAppendableUploads and storage.WithGRPCBidiReads). Closing the
// Store does not close client. ctx is used only while New runs; the Store's
// background work (pools, sweeps) lives until Close.
func New(ctx context.Context, client *storage.Client, bucket string, opts Options) (*Store, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if bucket == "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "gcsrapid: empty bucket name")
	}
	if err := ctx.Err(); err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: err}
	}
	bgCtx, stop := context.WithCancel(context.Background())
	b := client.Bucket(bucket)
	if opts.Retries <= 0 {
		b = b.Retryer(storage.WithPolicy(storage.RetryNever))
	} else {
		// The client's policy retries only idempotent calls.
		b = b.Retryer(storage.WithPolicy(storage.RetryIdempotent), storage.WithMaxAttempts(1+opts.Retries),
			storage.WithBackoff(backoff()))
	}
	s := &Store{
		client: client, bucket: b, name: bucket, opts: opts,
		bgCtx: bgCtx, stop: stop, connectivity: ConnectivityUnknown,
		streamConns: connPool{dial: opts.StreamDial, per: opts.MaxStreamsPerConn},
	}
	if opts.Capacity > 0 {
		c, err := newCreator(s)
		if err != nil {
			stop()
			return nil, err
		}
		s.creator = c
		if opts.SweepInterval > 0 {
			s.startSweeper()
		}
	}
	m, err := newMetrics(s, opts.MeterProvider)
	if err != nil {
		if s.sweeper != nil {
			s.sweeper.close()
		}
		stop()
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("gcsrapid: metrics: %w", err)}
	}
	s.metrics = m
	return s, nil
}

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.name }

func (s *Store) check(op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	if err := validateGCSKey(op, key); err != nil {
		return err
	}
	if s.opts.Hierarchical {
		return validateHierarchical(op, key)
	}
	return nil
}

// validateKey checks the common naming rules and GCS's own.
func validateKey(op, key string) error {
	if err := blob.ValidateKey(op, key); err != nil {
		return err
	}
	return validateGCSKey(op, key)
}

// validateGCSKey checks GCS's naming rules beyond the common ones.
func validateGCSKey(op, key string) error {
	if key == "." || key == ".." {
		return blob.Errorf(op, key, blob.ErrInvalidKey, `GCS object names cannot be "." or ".."`)
	}
	return nil
}

// validateHierarchical adds the naming rules of a hierarchical namespace.
func validateHierarchical(op, key string) error {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "" && !last:
			return blob.Errorf(op, key, blob.ErrInvalidKey, "a bucket with hierarchical namespace allows no empty folder name (leading or double slash)")
		case seg == "." || seg == "..":
			return blob.Errorf(op, key, blob.ErrInvalidKey, "a bucket with hierarchical namespace allows no %q segment", seg)
		case !last && len(seg) > MaxFolderNameLen:
			return blob.Errorf(op, key, blob.ErrInvalidKey, "a folder name of %d bytes; a bucket with hierarchical namespace allows %d", len(seg), MaxFolderNameLen)
		}
	}
	return nil
}

func parseGeneration(op, key, gen string) (int64, error) {
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || g <= 0 {
		return 0, blob.Errorf(op, key, blob.ErrPrecondition, "generation %q is not a GCS generation", gen)
	}
	return g, nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return nil, driver.WrapError(driver.OpStat, key, err, classify)
	}
	switch hidden, err := s.unwritten(ctx, a); {
	case err != nil:
		return nil, driver.WrapError(driver.OpStat, key, err, classify)
	case hidden:
		return nil, notFoundUnwritten(driver.OpStat, key)
	}
	return attributes(a), nil
}

func attributes(a *storage.ObjectAttrs) *blob.Attributes {
	out := &blob.Attributes{
		Key:                a.Name,
		Size:               a.Size,
		ContentType:        a.ContentType,
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		MD5:                a.MD5,
		ETag:               a.Etag,
		Generation:         strconv.FormatInt(a.Generation, 10),
		CreateTime:         a.Created,
		ModTime:            a.Updated,
	}
	if md := withoutMark(a.Metadata); len(md) > 0 {
		out.Metadata = md
	}
	if out.ModTime.IsZero() {
		out.ModTime = a.Created
	}
	if out.ETag == "" {
		// An ETag names a version; the generation does exactly that.
		out.ETag = `"` + out.Generation + `"`
	}
	return out
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	return s.delete(ctx, key, cond)
}

// delete is Delete without the closed check: Close uses it to undo what its
// pools made. cond has passed blob.CheckDelete.
func (s *Store) delete(ctx context.Context, key string, cond blob.Condition) error {
	o := s.bucket.Object(key)
	if gen, ok := cond.Generation(); ok {
		g, err := parseGeneration(driver.OpDelete, key, gen)
		if err != nil {
			return err
		}
		o = o.If(storage.Conditions{GenerationMatch: g})
	}
	return driver.WrapError(driver.OpDelete, key, o.Delete(ctx), classify)
}

// Finalize seals key: no more appends, and the object becomes an ordinary
// finalized object. Finalizing an already final object is not an error.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check(driver.OpFinalize, key); err != nil {
		return err
	}
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return driver.WrapError(driver.OpFinalize, key, err, classify)
	}
	if !a.Finalized.IsZero() {
		return nil
	}
	switch hidden, err := s.unwritten(ctx, a); {
	case err != nil:
		return driver.WrapError(driver.OpFinalize, key, err, classify)
	case hidden: // sealing it empty would make it visible
		return notFoundUnwritten(driver.OpFinalize, key)
	}
	return driver.WrapError(driver.OpFinalize, key, s.takeOverAndSeal(ctx, key, a.Generation), classify)
}

// takeOverAndSeal finalizes generation gen of key by taking its appendable
// stream over and closing it. A takeover abandoned because ctx ended still
// closes, so still seals: sealing twice is harmless.
func (s *Store) takeOverAndSeal(ctx context.Context, key string, gen int64) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	w, _, err := s.takeOver(ctx, sctx, cancel, key, gen, &storage.AppendableWriterOpts{FinalizeOnClose: true})
	if err != nil {
		return err
	}
	return untilDone(ctx, cancel, w.Close)
}

// takeOver opens generation gen of key's appendable stream under sctx,
// waiting at most until ctx ends. The storage client (v1.70.0) reads the
// writer's error without its lock during NewWriterFromAppendableObject while
// its context watcher may write it, which happens only if sctx ends then; so
// sctx is cancelled only after the takeover returned. On an error takeOver
// cancels sctx itself; a takeover abandoned because ctx ended is closed, then
// cancelled, once it returns.
func (s *Store) takeOver(ctx, sctx context.Context, cancel context.CancelFunc, key string, gen int64, opts *storage.AppendableWriterOpts) (*storage.Writer, int64, error) {
	type opened struct {
		w    *storage.Writer
		size int64
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		w, size, err := s.bucket.Object(key).Generation(gen).NewWriterFromAppendableObject(sctx, opts)
		done <- opened{w, size, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			cancel()
		}
		return o.w, o.size, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.err == nil {
				o.w.Close()
			}
			cancel()
		}()
		return nil, 0, ctx.Err()
	}
}

// Close implements blob.Store: it discards every pooled object (deleting it),
// waits for background closes and deletes, and closes the client if the Store
// opened it.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	if s.sweeper != nil {
		s.sweeper.close()
	}
	if s.creator != nil {
		// Discards every pooled object (deleting it) and waits for that.
		s.creator.Close()
	}
	s.bg.Wait()
	s.stop()
	s.metrics.close()
	s.streamConns.close()
	if s.ownsClient {
		return s.client.Close()
	}
	return nil
}

// background runs f after the caller has its answer (asynchronous closes and
// deletes); Close waits for it.
func (s *Store) background(f func(ctx context.Context)) {
	if s.bg.Go(func() {
		ctx, cancel := context.WithTimeout(s.bgCtx, time.Minute)
		defer cancel()
		f(ctx)
	}) {
		return
	}
	// Close has waited already: do it now, on the caller's time.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.bgCtx), time.Minute)
	defer cancel()
	f(ctx)
}
