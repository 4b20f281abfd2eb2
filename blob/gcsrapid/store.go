package gcsrapid

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/api/option"
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
	// PoolSize is the capacity of each Create pool; negative turns pooling off.
	PoolSize int
	// PoolMinIdle spares are kept ready when nothing drains the pool.
	PoolMinIdle int
	// LoadConcurrency bounds background creates per pool.
	LoadConcurrency int
	// MaxItemAge: pooled objects older than this are deleted, never used.
	MaxItemAge time.Duration
	// WriteTimeout bounds the time from handing out a writer to its Close.
	WriteTimeout time.Duration
	// GraceWindow is the orphan reconciler's grace window; MaxItemAge +
	// WriteTimeout must be below it.
	GraceWindow time.Duration
	// Retries is the number of attempts per operation (1: no retry).
	Retries int
	// MaxBuffer is how many bytes a writer buffers before it streams.
	MaxBuffer int
	// MaxPools bounds the number of distinct Create prefixes that get a pool;
	// Creates under further prefixes create inline.
	MaxPools int
	// MeterProvider receives the Store's OpenTelemetry metrics (pool hits,
	// misses, loads, discards by reason, ready objects, write latency);
	// nil means otel's global provider.
	MeterProvider metric.MeterProvider
}

// Defaults.
const (
	DefaultPoolSize        = 64
	DefaultPoolMinIdle     = 2
	DefaultLoadConcurrency = 16
	DefaultMaxItemAge      = time.Minute
	DefaultWriteTimeout    = 30 * time.Second
	DefaultGraceWindow     = 10 * time.Minute
	DefaultMaxBuffer       = 16 << 20
	DefaultMaxPools        = 16
)

func (o *Options) setDefaults() {
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.PoolMinIdle == 0 {
		o.PoolMinIdle = min(DefaultPoolMinIdle, max(o.PoolSize, 1))
	}
	if o.LoadConcurrency == 0 {
		o.LoadConcurrency = DefaultLoadConcurrency
	}
	if o.MaxItemAge == 0 {
		o.MaxItemAge = DefaultMaxItemAge
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.GraceWindow == 0 {
		o.GraceWindow = DefaultGraceWindow
	}
	if o.Retries == 0 {
		o.Retries = 1
	}
	if o.MaxBuffer == 0 {
		o.MaxBuffer = DefaultMaxBuffer
	}
	if o.MaxPools == 0 {
		o.MaxPools = DefaultMaxPools
	}
}

// Validate reports a configuration that is malformed or could lose data.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return blob.Errorf("open", "", blob.ErrInvalidArgument, "gcsrapid: "+format, args...)
	}
	switch {
	case o.MaxItemAge < 0 || o.WriteTimeout < 0 || o.GraceWindow < 0:
		return bad("durations must not be negative")
	case o.PoolSize > 0 && o.PoolMinIdle > o.PoolSize:
		return bad("pool_min_idle %d exceeds pool_size %d", o.PoolMinIdle, o.PoolSize)
	case o.LoadConcurrency < 0 || o.Retries < 0 || o.MaxBuffer < 0 || o.MaxPools < 0:
		return bad("counts must not be negative")
	case o.MaxItemAge+o.WriteTimeout >= o.GraceWindow:
		return bad("max_item_age (%v) + write_timeout (%v) must be below grace_window (%v): "+
			"a pooled object could be reclaimed as an orphan between its write and its commit", o.MaxItemAge, o.WriteTimeout, o.GraceWindow)
	}
	return nil
}

// Store is a GCS Rapid bucket as a blob.Store.
type Store struct {
	client     *storage.Client
	ownsClient bool
	bucket     *storage.BucketHandle
	name       string
	opts       Options

	closed atomic.Bool
	bg     sync.WaitGroup // asynchronous closes and deletes
	bgCtx  context.Context
	stop   context.CancelFunc

	creator *pool.Creator // nil when pooling is off

	stats   statsRecorder
	metrics *metrics
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
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "gcsrapid: scheme %q, want %q", u.Scheme, Scheme)
	}
	if u.Host == "" || u.Path != "" && u.Path != "/" {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "gcsrapid: URL must be gcsrapid://BUCKET, got %s", blob.Redact(u.String()))
	}
	q := driver.NewQuery(u)
	opts := Options{
		PoolSize:        q.Int("pool_size", 0),
		PoolMinIdle:     q.Int("pool_min_idle", 0),
		LoadConcurrency: q.Int("load_concurrency", 0),
		MaxItemAge:      q.Duration("max_item_age", 0),
		WriteTimeout:    q.Duration("write_timeout", 0),
		GraceWindow:     q.Duration("grace_window", 0),
		Retries:         q.Int("retries", 0),
		MaxBuffer:       q.Int("max_buffer", 0),
	}
	if q.Has("pool_size") && opts.PoolSize == 0 {
		opts.PoolSize = -1 // pool_size=0 asks for no pool
	}
	endpoint := q.String("endpoint", "")
	connPool := q.Int("grpc_conn_pool", 0)
	if err := q.Err(); err != nil {
		return nil, err
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
	if connPool > 0 {
		copts = append(copts, option.WithGRPCConnectionPool(connPool))
	}
	client, err := storage.NewGRPCClient(ctx, copts...)
	if err != nil {
		return nil, &blob.Error{Op: "open", Err: fmt.Errorf("gcsrapid: %w", err)}
	}
	s, err := New(client, u.Host, opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.ownsClient = true
	return s, nil
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
// Store does not close client.
func New(client *storage.Client, bucket string, opts Options) (*Store, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if bucket == "" {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "gcsrapid: empty bucket name")
	}
	ctx, stop := context.WithCancel(context.Background())
	b := client.Bucket(bucket)
	if opts.Retries <= 1 {
		b = b.Retryer(storage.WithPolicy(storage.RetryNever))
	} else {
		b = b.Retryer(storage.WithPolicy(storage.RetryAlways), storage.WithMaxAttempts(opts.Retries))
	}
	s := &Store{
		client: client, bucket: b, name: bucket, opts: opts,
		bgCtx: ctx, stop: stop,
	}
	if opts.PoolSize > 0 {
		c, err := newCreator(s)
		if err != nil {
			stop()
			return nil, err
		}
		s.creator = c
	}
	m, err := newMetrics(s, opts.MeterProvider)
	if err != nil {
		stop()
		return nil, &blob.Error{Op: "open", Err: fmt.Errorf("gcsrapid: metrics: %w", err)}
	}
	s.metrics = m
	return s, nil
}

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.name }

func (s *Store) check(op, key string) error {
	if s.closed.Load() {
		return &blob.Error{Op: op, Key: key, Kind: blob.ErrClosed}
	}
	return validateKey(op, key)
}

// validateKey adds GCS's own naming rules to the common ones.
func validateKey(op, key string) error {
	if err := blob.ValidateKey(op, key); err != nil {
		return err
	}
	if key == "." || key == ".." {
		return blob.Errorf(op, key, blob.ErrInvalidKey, `GCS object names cannot be "." or ".."`)
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
	if err := s.check("stat", key); err != nil {
		return nil, err
	}
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return nil, driver.WrapError("stat", key, err, classify)
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
	if len(a.Metadata) > 0 {
		out.Metadata = a.Metadata
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
	if err := s.check("delete", key); err != nil {
		return err
	}
	o := s.bucket.Object(key)
	if opts != nil && opts.IfGenerationMatch != "" {
		g, err := parseGeneration("delete", key, opts.IfGenerationMatch)
		if err != nil {
			return err
		}
		o = o.If(storage.Conditions{GenerationMatch: g})
	}
	return driver.WrapError("delete", key, o.Delete(ctx), classify)
}

// Finalize seals key: no more appends, and the object becomes an ordinary
// finalized object. Finalizing an already final object is not an error.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check("finalize", key); err != nil {
		return err
	}
	a, err := s.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return driver.WrapError("finalize", key, err, classify)
	}
	if !a.Finalized.IsZero() {
		return nil
	}
	w, _, err := s.bucket.Object(key).Generation(a.Generation).NewWriterFromAppendableObject(ctx, &storage.AppendableWriterOpts{FinalizeOnClose: true})
	if err != nil {
		return driver.WrapError("finalize", key, err, classify)
	}
	return driver.WrapError("finalize", key, w.Close(), classify)
}

// Close implements blob.Store: it discards every pooled object (deleting it),
// waits for background closes and deletes, and closes the client if the Store
// opened it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return &blob.Error{Op: "close", Kind: blob.ErrClosed}
	}
	if s.creator != nil {
		// Discards every pooled object (deleting it) and waits for that.
		s.creator.Close()
	}
	s.bg.Wait()
	s.stop()
	s.metrics.close()
	if s.ownsClient {
		return s.client.Close()
	}
	return nil
}

// background runs f after the caller has its answer (asynchronous closes and
// deletes); Close waits for it.
func (s *Store) background(f func(ctx context.Context)) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(s.bgCtx, time.Minute)
		defer cancel()
		f(ctx)
	}()
}
