package s3express

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Scheme is the URL scheme of this driver.
const Scheme = "s3express"

func init() {
	blob.RegisterWithGocloud(Scheme, func(ctx context.Context, u *url.URL) (blob.Store, error) {
		return OpenURL(ctx, u)
	})
}

// Defaults.
const (
	// DefaultMultipartThreshold: writes up to this size are one PutObject.
	DefaultMultipartThreshold = 16 << 20
	// DefaultPartSize is the part size of larger writes (S3's minimum is 5 MiB).
	DefaultPartSize = 8 << 20
	// DefaultWarmConns connections are opened when a Store is opened.
	DefaultWarmConns = 4
	// DefaultRetries is how many times a conditional write that S3 answers
	// with 409 ConditionalRequestConflict is sent again after the first
	// attempt.
	DefaultRetries = 2
	// MaxIdleConnsPerHost sizes the shared transport's idle pool: Go's
	// default of 2 would close and redial connections under any concurrency.
	MaxIdleConnsPerHost = 64
	// MaxDeleteKeys is S3's limit of keys per DeleteObjects request.
	MaxDeleteKeys = 1000
)

// Options configure a Store. The zero value of each field means its default;
// for WarmConns and Retries a negative value means none (in a URL, 0 does).
type Options struct {
	// MultipartThreshold: a write of up to this many bytes is one PutObject;
	// a larger one is a multipart upload.
	MultipartThreshold int
	// PartSize is the size of each part of a multipart upload.
	PartSize int
	// WarmConns is how many connections are opened in the background at
	// New, once the session is created (default DefaultWarmConns; negative:
	// none, though the session is still created in the background).
	WarmConns int
	// Retries is how many times a conditional write that meets 409
	// ConditionalRequestConflict (a concurrent conditional write) is sent
	// again after the first attempt (default DefaultRetries; negative:
	// none).
	Retries int
	// ListSnapshotTTL is how long continuation pages of a listing are served
	// from its first page's snapshot; negative: every page lists anew.
	ListSnapshotTTL time.Duration
	// ConnectTimeout bounds the warm-up's first request, which creates the
	// session (default DefaultConnectTimeout): an endpoint that does not
	// answer within it fails OpenURL, or New's first call, with an error
	// naming the endpoint instead of waiting on the caller's context.
	ConnectTimeout time.Duration
	// MeterProvider receives the Store's OpenTelemetry metrics: the S3
	// operations it sends by operation and outcome, their latency and the
	// SDK's retries (nil: otel's global provider).
	MeterProvider metric.MeterProvider
	// TracerProvider, if set, receives a client span for each S3 operation
	// (nil: none; blob.TracedStore traces the Store's own calls).
	TracerProvider trace.TracerProvider
	// Logger receives a debug line for each operation the SDK retried
	// (nil: slog.Default()).
	Logger *slog.Logger
}

// DefaultConnectTimeout bounds the warm-up's first request.
const DefaultConnectTimeout = 10 * time.Second

func (o *Options) setDefaults() {
	if o.MultipartThreshold == 0 {
		o.MultipartThreshold = DefaultMultipartThreshold
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.WarmConns == 0 {
		o.WarmConns = DefaultWarmConns
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	}
	o.Retries = max(o.Retries, 0)
	if o.ListSnapshotTTL == 0 {
		o.ListSnapshotTTL = time.Minute
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
}

func (o Options) validate() error {
	switch {
	case o.ConnectTimeout < 0:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: connect_timeout must not be negative")
	case o.MultipartThreshold < 0 || o.PartSize < 0:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: sizes must not be negative")
	case o.PartSize < 5<<20:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: part_size %d is below S3's minimum part size of 5 MiB", o.PartSize)
	case o.MultipartThreshold > 5<<30:
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: multipart_threshold %d is above S3's 5 GiB limit for one PutObject", o.MultipartThreshold)
	}
	return nil
}

// directoryBucket is NAME--AZID--x-s3: a lower-case base name, an
// availability zone ID such as use1-az4 (or a Local Zone ID such as
// usw2-lax1-az1), and the fixed suffix.
var directoryBucket = regexp.MustCompile(`^[a-z0-9](?:-?[a-z0-9])*--[a-z0-9]+(?:-[a-z0-9]+)*-az[0-9]+--x-s3$`)

// ValidateBucket reports whether name is a directory bucket name.
func ValidateBucket(name string) error {
	if len(name) < 3 || len(name) > 63 || !directoryBucket.MatchString(name) {
		return blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument,
			"s3express: %q is not a directory bucket name (BASE--AZID--x-s3, for example logs--use1-az4--x-s3)", name)
	}
	return nil
}

// Store is an S3 Express One Zone directory bucket as a blob.Store.
type Store struct {
	// sessions is the session provider every call shares; it remembers
	// why the last CreateSession failed, which the SDK passes on as text.
	sessions *sessions
	client   *s3.Client
	bucket   string
	opts     Options
	session  func(*s3.Options) // per-operation option: the shared session provider

	life driver.Lifecycle

	// warm is closed when the warm-up's CreateSession has returned; warmErr
	// holds its error until one call has reported it.
	warm    chan struct{}
	warmErr atomic.Pointer[error]
	stop    context.CancelFunc
	bg      driver.Tasks // the warm-up and abandoned uploads' aborts, which Close waits for

	snapshots snapshotCache
}

var (
	_ blob.Store    = (*Store)(nil)
	_ blob.Appender = (*Store)(nil)
	_ blob.Copier   = (*Store)(nil)
)

// sharedTransport is the one HTTP client of every Store this process opens
// by URL: one idle pool, sized for concurrency, reused across stores.
var sharedTransport = sync.OnceValue(func() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 0 // no global bound; the per-host bound is the pool size
		t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
		t.IdleConnTimeout = 90 * time.Second
	})
})

// HTTPClient returns the process-wide HTTP client that OpenURL gives the
// SDK, for callers who build their own s3.Client for New.
func HTTPClient() aws.HTTPClient { return sharedTransport() }

// OpenURL opens an s3express:// URL (see the package doc). It validates the
// URL and loads the SDK's configuration (environment, shared files; no
// request), then warms the session in the background.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	if u.Scheme != Scheme {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: scheme %q, want %q", u.Scheme, Scheme)
	}
	if u.User != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: credentials do not belong in the URL; use the SDK's credential chain")
	}
	if u.Host == "" || u.Path != "" && u.Path != "/" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: URL must be s3express://BUCKET?region=REGION, got %s", blob.Redact(u.String()))
	}
	q := driver.NewQuery(u)
	region := q.String("region", "")
	endpoint := q.String("endpoint", "")
	opts := Options{
		MultipartThreshold: int(q.Size("multipart_threshold", 0)),
		PartSize:           int(q.Size("part_size", 0)),
		WarmConns:          q.Int("warm_conns", 0),
		Retries:            q.Int("retries", 0),
		ConnectTimeout:     q.Duration("connect_timeout", 0),
	}
	oo := blob.OpenOptionsFrom(ctx)
	opts.MeterProvider, opts.TracerProvider, opts.Logger = oo.MeterProvider, oo.TracerProvider, oo.Logger
	// In a URL 0 means none; in Options it means the default.
	if q.Has("warm_conns") && opts.WarmConns == 0 {
		opts.WarmConns = -1
	}
	if q.Has("retries") && opts.Retries == 0 {
		opts.Retries = -1
	}
	if err := q.Err(); err != nil {
		return nil, err
	}
	if err := ValidateBucket(u.Host); err != nil {
		return nil, err
	}
	if region == "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: parameter region is required (the bucket's region, for example us-east-1)")
	}
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: endpoint must be an http(s) URL, got %q", blob.Redact(endpoint))
		}
		if e.User != nil || e.RawQuery != "" {
			return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: endpoint %q must not carry credentials or a query; the SDK's credential chain supplies them", blob.Redact(endpoint))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region), config.WithHTTPClient(sharedTransport()))
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("s3express: loading AWS configuration: %w", err)}
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
	})
	s, err := New(ctx, client, u.Host, opts)
	if err != nil {
		return nil, err
	}
	// A URL opens like the other network drivers: an endpoint that does
	// not answer, or a bucket that does not exist, fails here, naming it.
	if err := s.opened(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// opened waits for the warm-up's session and fails for what makes every
// later call fail: an endpoint that did not answer within ConnectTimeout, or
// a missing bucket. A refusal is left to the calls, which report
// ErrPermission for the operations it applies to.
func (s *Store) opened(ctx context.Context) error {
	select {
	case <-s.warm:
	case <-ctx.Done():
		return &blob.Error{Op: driver.OpOpen, Err: ctx.Err()}
	}
	p := s.warmErr.Load()
	if p == nil {
		return nil
	}
	if kind := s.classifyStrict(*p); kind == blob.ErrPermission {
		return nil
	} else if kind == blob.ErrBucketNotFound {
		return blob.Errorf(driver.OpOpen, "", kind, "s3express: bucket %q does not exist at %s: %w", s.bucket, s.where(), *p)
	}
	return &blob.Error{Op: driver.OpOpen, Err: *p}
}

// where names the endpoint for errors (never carrying credentials: an
// endpoint with user information or a query is refused at OpenURL).
func (s *Store) where() string {
	if e := s.client.Options().BaseEndpoint; e != nil && *e != "" {
		return *e
	}
	return "the default endpoint of " + s.client.Options().Region
}

// New returns a Store over the directory bucket, using client, and starts
// warming its session and connections. The client's own S3 Express session
// provider is kept (its cache and refresh), shared by every operation of the
// Store so that concurrent calls wait for one CreateSession. New makes no
// request itself; ctx gives the warm-up its values, and its end does not stop
// the warm-up (Close does).
func New(ctx context.Context, client *s3.Client, bucket string, opts Options) (*Store, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := ValidateBucket(bucket); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "s3express: nil client")
	}
	m, err := newRequestMetrics(bucket, opts)
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("s3express: metrics: %w", err)}
	}
	shared := &sessions{sdk: client.Options().ExpressCredentials}
	// Every call takes this option: the shared sessions, and the request
	// metrics' middleware.
	session := func(o *s3.Options) {
		o.ExpressCredentials = shared
		o.APIOptions = append(o.APIOptions, m.install)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Store{
		client:   client,
		bucket:   bucket,
		opts:     opts,
		sessions: shared,
		session:  session,
		warm:     make(chan struct{}),
		stop:     stop,
	}
	s.bg.Go(func() { s.warmUp(ctx) })
	return s, nil
}

// sessions hands every operation of a Store the SDK's client-level session
// provider. The SDK clones that provider per operation with a fresh
// singleflight group, so concurrent first calls would each start a
// CreateSession; called through this wrapper they share the client's group
// and its cache, and a caller giving up (ctx) does not fail the others.
type sessions struct {
	sdk s3.ExpressCredentialsProvider
	// failed is the kind (ErrBucketNotFound, ErrPermission) of the last
	// CreateSession's failure, nil once one succeeds: the SDK wraps a
	// session's error as text, so the calls that fail for want of a
	// session cannot be classified from their own errors.
	failed atomic.Pointer[error]
}

// classify is the package's classify, and for an error it cannot place,
// the kind of the session failure behind it, if any.
func (s *Store) classify(err error) error {
	if kind := classify(err); kind != nil {
		return kind
	}
	if k := s.sessions.failed.Load(); k != nil && err != nil {
		return *k
	}
	return nil
}

func (p *sessions) Retrieve(ctx context.Context, bucket string) (aws.Credentials, error) {
	type result struct {
		creds aws.Credentials
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, err := p.sdk.Retrieve(context.WithoutCancel(ctx), bucket)
		if kind := classify(err); kind == blob.ErrBucketNotFound || kind == blob.ErrPermission {
			p.failed.Store(&kind)
		} else if err == nil {
			p.failed.Store(nil)
		}
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.creds, r.err
	case <-ctx.Done():
		return aws.Credentials{}, ctx.Err()
	}
}

// warmUp creates the session (one HeadBucket, which needs it) and then opens
// WarmConns connections with concurrent HeadBuckets, so the first write pays
// neither CreateSession nor a dial.
func (s *Store) warmUp(ctx context.Context) {
	first, cancelFirst := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	_, err := s.client.HeadBucket(first, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)}, s.session)
	timedOut := first.Err() != nil
	cancelFirst()
	switch {
	case err == nil, ctx.Err() != nil:
		// Closed: nobody is left to tell.
	case timedOut:
		werr := fmt.Errorf("s3express: %s did not answer within connect_timeout %v (bucket %q): %v", s.where(), s.opts.ConnectTimeout, s.bucket, err)
		s.warmErr.Store(&werr)
	default:
		werr := fmt.Errorf("s3express: warming the session of %s at %s: %w", s.bucket, s.where(), err)
		s.warmErr.Store(&werr)
	}
	close(s.warm)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for range s.opts.WarmConns {
		wg.Go(func() {
			s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)}, s.session)
		})
	}
	wg.Wait()
}

// Ready waits until the warm-up has created the session and returns its
// error, if any. Calls need not wait for it: they do by themselves.
func (s *Store) Ready(ctx context.Context) error {
	select {
	case <-s.warm:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p := s.warmErr.Load(); p != nil {
		return &blob.Error{Op: driver.OpOpen, Err: *p}
	}
	return nil
}

// begin checks the Store and key, and waits for the warm-up's session so
// that a burst of first calls shares it. The warm-up's error is returned by
// the first call only; later calls start their own session.
func (s *Store) begin(ctx context.Context, op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	return s.waitWarm(ctx, op, key)
}

func (s *Store) waitWarm(ctx context.Context, op, key string) error {
	select {
	case <-s.warm:
	default:
		select {
		case <-s.warm:
		case <-ctx.Done():
			return driver.WrapError(op, key, ctx.Err(), nil)
		}
	}
	if s.warmErr.Load() != nil {
		// Unclassified on purpose: a missing bucket must not read as a
		// missing key (Exists would say false).
		if p := s.warmErr.Swap(nil); p != nil {
			return &blob.Error{Op: op, Key: key, Kind: s.classifyStrict(*p), Err: *p}
		}
	}
	return nil
}

// classifyStrict classifies the warm-up's error only as a missing bucket or
// a refusal, which no object's absence can be taken for.
func (s *Store) classifyStrict(err error) error {
	if kind := s.classify(err); kind == blob.ErrBucketNotFound || kind == blob.ErrPermission {
		return kind
	}
	return nil
}

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// Client returns the SDK client, for what the Store does not cover.
func (s *Store) Client() *s3.Client { return s.client }

// Stat implements blob.Store with one HeadObject.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.begin(ctx, driver.OpStat, key); err != nil {
		return nil, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}, s.session)
	if err != nil {
		return nil, driver.WrapError(driver.OpStat, key, err, s.classify)
	}
	return &blob.Attributes{
		Key:                key,
		Size:               aws.ToInt64(out.ContentLength),
		ContentType:        aws.ToString(out.ContentType),
		CacheControl:       aws.ToString(out.CacheControl),
		ContentDisposition: aws.ToString(out.ContentDisposition),
		ContentEncoding:    aws.ToString(out.ContentEncoding),
		ContentLanguage:    aws.ToString(out.ContentLanguage),
		Metadata:           unescapeMetadata(out.Metadata),
		ETag:               aws.ToString(out.ETag),
		Generation:         aws.ToString(out.ETag),
		ModTime:            aws.ToTime(out.LastModified),
	}, nil
}

// Delete implements blob.Store. S3 answers a DeleteObject of a missing key
// with success, so a HeadObject first decides ErrNotFound: two round trips.
// With IfGenerationMatch the delete itself is conditional (If-Match), so a
// concurrent overwrite between the two is never deleted.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.life.Check(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	if err := s.waitWarm(ctx, driver.OpDelete, key); err != nil {
		return err
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}, s.session)
	if err != nil {
		return driver.WrapError(driver.OpDelete, key, err, s.classify)
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if gen, ok := cond.Generation(); ok {
		if !etagEqual(aws.ToString(head.ETag), gen) {
			return blob.Errorf(driver.OpDelete, key, blob.ErrPrecondition, "generation %s, not %s", aws.ToString(head.ETag), gen)
		}
		in.IfMatch = aws.String(gen)
	}
	_, err = s.client.DeleteObject(ctx, in, s.session)
	return driver.WrapError(driver.OpDelete, key, err, s.classify)
}

func etagEqual(a, b string) bool { return strings.Trim(a, `"`) == strings.Trim(b, `"`) }

// DeleteMany deletes keys with DeleteObjects, MaxDeleteKeys per request, one
// request after another. Missing keys are not errors (S3 does not report
// them). The error joins one *blob.Error per key that failed.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if err := s.life.CheckOpen(driver.OpDelete, ""); err != nil {
		return err
	}
	for _, k := range keys {
		if err := blob.ValidateKey(driver.OpDelete, k); err != nil {
			return err
		}
	}
	if err := s.waitWarm(ctx, driver.OpDelete, ""); err != nil {
		return err
	}
	var errs []error
	for len(keys) > 0 {
		batch := keys[:min(len(keys), MaxDeleteKeys)]
		keys = keys[len(batch):]
		objs := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket:            aws.String(s.bucket),
			Delete:            &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		}, s.session)
		if err != nil {
			return errors.Join(append(errs, driver.WrapError(driver.OpDelete, batch[0], err, s.classify))...)
		}
		for _, e := range out.Errors {
			errs = append(errs, &blob.Error{Op: driver.OpDelete, Key: aws.ToString(e.Key),
				Err: fmt.Errorf("s3express: %s: %s", aws.ToString(e.Code), aws.ToString(e.Message))})
		}
	}
	return errors.Join(errs...)
}

// Copy implements blob.Copier with CopyObject (which the SDK signs with the
// caller's own credentials, not the session). Its conditions on dstKey are
// the request's own, as a write's are: IfNotExist is If-None-Match: *,
// IfGenerationMatch is If-Match on the destination's ETag.
func (s *Store) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	if err := s.life.Check(driver.OpCopy, dstKey); err != nil {
		return err
	}
	if err := blob.ValidateKey(driver.OpCopy, srcKey); err != nil {
		return err
	}
	cond, err := blob.CheckCopy(dstKey, opts, true)
	if err != nil {
		return err
	}
	if err := s.waitWarm(ctx, driver.OpCopy, dstKey); err != nil {
		return err
	}
	in := &s3.CopyObjectInput{
		Bucket:     aws.String(s.bucket),
		Key:        aws.String(dstKey),
		CopySource: aws.String(s.bucket + "/" + escapePath(srcKey)),
	}
	if cond.NotExist() {
		in.IfNoneMatch = aws.String("*")
	}
	if gen, ok := cond.Generation(); ok {
		in.IfMatch = aws.String(gen)
	}
	// A conditional copy is a conditional write, and meets S3's 409s as
	// one does.
	err = s.retryConflicts(ctx, func() error {
		_, err := s.client.CopyObject(ctx, in, s.session)
		return err
	})
	if _, ok := cond.Generation(); ok && err != nil && s.classify(err) == blob.ErrNotFound {
		// S3 answers NoSuchKey both for a missing source and, under
		// If-Match, for a missing destination; the source says which. The
		// copy took no effect either way.
		_, herr := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(srcKey)}, s.session)
		if herr == nil {
			return blob.Errorf(driver.OpCopy, dstKey, blob.ErrPrecondition, "the destination does not exist: %w", err)
		}
		return driver.WrapError(driver.OpCopy, dstKey, err, s.classify)
	}
	return driver.WrapError(driver.OpCopy, dstKey, err, driver.ClassifyWrite(s.classify, cond))
}

// escapePath escapes a key for x-amz-copy-source, keeping its slashes.
func escapePath(key string) string {
	// Every byte but the unreserved ones and "/" is percent-encoded ("+"
	// too, which a decoder may read as a space, and a space as %20), so the
	// source decodes to the key under query and path unescaping alike.
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(url.QueryEscape(p), "+", "%20")
	}
	return strings.Join(parts, "/")
}

// Close implements blob.Store. It stops the warm-up; the SDK client is left
// to the caller (it holds no resources of its own beyond idle connections).
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	s.stop()
	s.bg.Wait()
	return nil
}
