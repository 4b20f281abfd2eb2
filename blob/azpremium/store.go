package azpremium

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Scheme is the URL scheme of this driver.
const Scheme = "azpremium"

func init() {
	blob.RegisterWithGocloud(Scheme, func(ctx context.Context, u *url.URL) (blob.Store, error) {
		return OpenURL(ctx, u)
	})
}

// Limits of the Blob REST API and the defaults chosen within them.
const (
	// DefaultMultipartThreshold is the largest write sent as one Put Blob;
	// it is where azblob's own uploader switches to staged blocks.
	DefaultMultipartThreshold = 256 << 20
	// MaxMultipartThreshold is the largest single Put Blob the service
	// accepts.
	MaxMultipartThreshold = 5000 << 20
	// DefaultPartSize is the size of a staged block above the threshold.
	DefaultPartSize = 8 << 20
	// MaxPartSize is the largest block the service accepts.
	MaxPartSize = 4000 << 20
	// DefaultConcurrency is the number of blocks a writer stages at once.
	DefaultConcurrency = 4
	// DefaultWarmConns connections are opened in the background at New.
	DefaultWarmConns = 1
	// DefaultConnectTimeout bounds the warm-up's first request.
	DefaultConnectTimeout = 10 * time.Second
	// maxAppendBlock is the largest Append Block every service version accepts.
	maxAppendBlock = 4 << 20
)

// Options configure New. Credentials are tried in this order: ConnectionString,
// AccountKey, SASToken, Credential, then azidentity's default credential.
type Options struct {
	// Account is the storage account name. Required unless ConnectionString
	// names it.
	Account string
	// Endpoint is the blob service URL, by default
	// https://ACCOUNT.blob.core.windows.net. Emulators put the account in
	// the path: http://127.0.0.1:10000/devstoreaccount1.
	Endpoint string

	ConnectionString Secret
	AccountKey       Secret
	SASToken         Secret
	Credential       azcore.TokenCredential

	// MultipartThreshold is the largest write sent as a single Put Blob
	// (default DefaultMultipartThreshold, at most MaxMultipartThreshold).
	// Larger writes stage blocks of PartSize (default DefaultPartSize, at
	// most MaxPartSize), Concurrency at a time (default DefaultConcurrency),
	// and commit them at Close.
	MultipartThreshold int64
	PartSize           int64
	Concurrency        int

	// WarmConns is how many connections are opened in the background at
	// New; the first of them also proves the credentials and the container
	// (default DefaultWarmConns; negative: none, and no request at all).
	WarmConns int

	// ConnectTimeout bounds the warm-up's first request (default
	// DefaultConnectTimeout): an endpoint that does not answer within it
	// fails OpenURL, or New's first call, with an error naming the
	// endpoint instead of waiting on the caller's context.
	ConnectTimeout time.Duration

	// Retry tunes the SDK's retries (zero: azcore's defaults). Its
	// MaxRetries counts retries after the first attempt, as the URL's
	// retries parameter does: zero means azcore's default of 3, negative
	// means none.
	Retry policy.RetryOptions

	// MeterProvider receives the Store's OpenTelemetry metrics: the Blob
	// service operations it sends by operation and outcome, their latency
	// and the SDK's retries (nil: otel's global provider).
	MeterProvider metric.MeterProvider
	// TracerProvider, if set, receives a client span for each Blob service
	// operation (nil: none; blob.TracedStore traces the Store's own calls).
	TracerProvider trace.TracerProvider
	// Logger receives a debug line for each operation the SDK retried
	// (nil: slog.Default()).
	Logger *slog.Logger
}

// Store is an Azure blob container as a blob.Store.
type Store struct {
	client    *container.Client
	container string
	opts      Options
	secrets   []string
	life      driver.Lifecycle

	warmDone   chan struct{}
	warmErr    error
	warmCancel context.CancelFunc
	warmers    sync.WaitGroup
	warmSeen   atomic.Bool

	// noAppendBlobs is set once the account refused append blobs.
	noAppendBlobs atomic.Bool
}

var (
	_ blob.Store    = (*Store)(nil)
	_ blob.Appender = (*Store)(nil)
)

// OpenURL opens a parsed azpremium:// URL; see the package documentation.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	if u.Scheme != Scheme {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "scheme %q, want %s", u.Scheme, Scheme)
	}
	if u.User != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "%s:// URLs carry no credentials; set AZURE_STORAGE_KEY or AZURE_STORAGE_CONNECTION_STRING", Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "%s://%s has a path; the URL names a container only", Scheme, u.Host)
	}
	q := driver.NewQuery(u)
	o := Options{
		Account:            q.String("account", os.Getenv("AZURE_STORAGE_ACCOUNT")),
		Endpoint:           q.String("endpoint", ""),
		MultipartThreshold: q.Size("multipart_threshold", 0),
		PartSize:           q.Size("part_size", 0),
		Concurrency:        q.Int("concurrency", DefaultConcurrency),
		WarmConns:          q.Int("warm_conns", 0),
		ConnectTimeout:     q.Duration("connect_timeout", 0),
	}
	oo := blob.OpenOptionsFrom(ctx)
	o.MeterProvider, o.TracerProvider, o.Logger = oo.MeterProvider, oo.TracerProvider, oo.Logger
	o.Retry.MaxRetries = int32(q.Int("retries", 0))
	if err := q.Err(); err != nil {
		return nil, err
	}
	// In a URL 0 means none; in Options it means the default.
	if q.Has("warm_conns") && o.WarmConns == 0 {
		o.WarmConns = -1
	}
	if q.Has("retries") && o.Retry.MaxRetries == 0 {
		o.Retry.MaxRetries = -1
	}
	if o.Concurrency < 1 {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "concurrency %d below 1", o.Concurrency)
	}
	switch {
	case os.Getenv("AZURE_STORAGE_CONNECTION_STRING") != "":
		o.ConnectionString = Secret(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"))
	case os.Getenv("AZURE_STORAGE_KEY") != "":
		o.AccountKey = Secret(os.Getenv("AZURE_STORAGE_KEY"))
	case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
		o.SASToken = Secret(os.Getenv("AZURE_STORAGE_SAS_TOKEN"))
	}
	s, err := New(ctx, u.Host, o)
	if err != nil {
		return nil, err
	}
	// A URL opens like the other network drivers: an endpoint that does
	// not answer, or a container that does not exist, fails here, naming it.
	if err := s.opened(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// opened waits for the warm-up's first request and fails for what makes
// every later call fail: an endpoint that did not answer within
// ConnectTimeout, or a missing container. A refusal is left to the calls,
// which report ErrPermission for the operations it applies to. With no
// warm-up (warm_conns=0) there is nothing to wait for.
func (s *Store) opened(ctx context.Context) error {
	if s.warmSeen.Load() {
		return nil
	}
	select {
	case <-s.warmDone:
	case <-ctx.Done():
		return s.wrap(driver.OpOpen, "", ctx.Err(), nil)
	}
	if s.warmErr == nil || classify(s.warmErr) == blob.ErrPermission {
		return nil
	}
	s.warmSeen.Store(true)
	return s.wrap(driver.OpOpen, "", s.warmErr, classify)
}

// New opens container with opts. It validates everything before any request;
// then it opens opts.WarmConns connections in the background. ctx gives the
// warm-up its values; its end does not stop the warm-up (Close does).
func New(ctx context.Context, containerName string, opts Options) (*Store, error) {
	o := opts
	var secrets []string
	if o.ConnectionString != "" {
		cs, err := parseConnectionString(string(o.ConnectionString))
		if err != nil {
			return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "connection string: %v", err)
		}
		secrets = append(secrets, string(o.ConnectionString))
		if o.Account == "" {
			o.Account = cs.account
		}
		if o.Endpoint == "" {
			o.Endpoint = cs.endpoint
		}
		if cs.key != "" {
			o.AccountKey = Secret(cs.key)
		} else if cs.sas != "" {
			o.SASToken = Secret(cs.sas)
		}
	}
	if o.Account == "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "no storage account: set ?account=NAME (or AZURE_STORAGE_ACCOUNT, or a connection string with AccountName)")
	}
	if err := validateContainer(containerName); err != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "container %q: %v", containerName, err)
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://" + o.Account + ".blob.core.windows.net"
	}
	ep, err := url.Parse(o.Endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "endpoint %s is not an http(s) URL", blob.Redact(o.Endpoint))
	}
	if ep.User != nil || ep.RawQuery != "" || ep.Fragment != "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "endpoint %s must not carry credentials or a query (use a SAS token option)", blob.Redact(o.Endpoint))
	}
	if o.MultipartThreshold == 0 {
		o.MultipartThreshold = DefaultMultipartThreshold
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.WarmConns == 0 {
		o.WarmConns = DefaultWarmConns
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	switch {
	case o.ConnectTimeout < 0:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "connect_timeout %v is negative", o.ConnectTimeout)
	case o.MultipartThreshold < 0 || o.MultipartThreshold > MaxMultipartThreshold:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "multipart_threshold %d outside [0, %d]", o.MultipartThreshold, int64(MaxMultipartThreshold))
	case o.PartSize <= 0 || o.PartSize > MaxPartSize:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "part_size %d outside [1, %d]", o.PartSize, int64(MaxPartSize))
	case o.Concurrency < 1:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "concurrency %d below 1", o.Concurrency)
	}
	containerURL := strings.TrimSuffix(o.Endpoint, "/") + "/" + containerName
	m, err := newRequestMetrics(containerName, o)
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("metrics: %w", err)}
	}
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport:        sharedHTTPClient(),
		Retry:            o.Retry,
		PerCallPolicies:  []policy.Policy{policyFunc(m.perCall)},
		PerRetryPolicies: []policy.Policy{policyFunc(m.perRetry)},
	}}
	var client *container.Client
	switch {
	case o.AccountKey != "":
		secrets = append(secrets, string(o.AccountKey))
		cred, err := container.NewSharedKeyCredential(o.Account, string(o.AccountKey))
		if err != nil {
			// The SDK's message could quote the key; say only what is wrong.
			return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "account key is not valid base64")
		}
		client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, copts)
		if err != nil {
			return nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: err}
		}
	case o.SASToken != "":
		sas := strings.TrimPrefix(string(o.SASToken), "?")
		secrets = append(secrets, sas)
		if v, err := url.ParseQuery(sas); err == nil && v.Get("sig") != "" {
			secrets = append(secrets, v.Get("sig"), url.QueryEscape(v.Get("sig")))
		}
		client, err = container.NewClientWithNoCredential(containerURL+"?"+sas, copts)
		if err != nil {
			return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "SAS token is malformed")
		}
	default:
		cred := o.Credential
		if cred == nil {
			c, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: azcore.ClientOptions{Transport: sharedHTTPClient()}})
			if err != nil {
				return nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: fmt.Errorf("no credentials in the environment and azidentity's default credential failed: %w", err)}
			}
			cred = c
		}
		client, err = container.NewClient(containerURL, cred, copts)
		if err != nil {
			return nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: err}
		}
	}
	s := &Store{client: client, container: containerName, opts: o, secrets: secrets, warmDone: make(chan struct{})}
	if o.WarmConns < 0 {
		close(s.warmDone)
		s.warmSeen.Store(true)
	} else {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		s.warmCancel = cancel
		s.warmers.Go(func() { s.warmup(wctx) })
	}
	return s, nil
}

// String describes the store without credentials.
func (s *Store) String() string {
	return fmt.Sprintf("%s://%s?account=%s&endpoint=%s", Scheme, s.container, url.QueryEscape(s.opts.Account), url.QueryEscape(s.opts.Endpoint))
}

// Client returns the SDK's container client, for what this package does not cover.
func (s *Store) Client() *container.Client { return s.client }

// warmupKey names a blob that is never written: a HEAD of it opens and
// authenticates a connection, and its 404 proves the container is there.
const warmupKey = ".zonalblob-warmup"

// warmup proves the credentials and the container with one request, lets the
// calls waiting for it go, then opens the other connections: WarmConns
// concurrent requests reuse the first one's connection and open the rest.
func (s *Store) warmup(ctx context.Context) {
	defer s.warmCancel()
	first, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	_, err := s.client.NewBlobClient(warmupKey).GetProperties(first, nil)
	timedOut := first.Err() != nil && ctx.Err() == nil
	cancel()
	switch {
	case err == nil, bloberror.HasCode(err, bloberror.BlobNotFound):
	case timedOut:
		s.warmErr = fmt.Errorf("%s did not answer within connect_timeout %v (container %q): %v", s.opts.Endpoint, s.opts.ConnectTimeout, s.container, err)
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		s.warmErr = fmt.Errorf("container %q does not exist at %s: %w", s.container, s.opts.Endpoint, err)
	default:
		s.warmErr = fmt.Errorf("%s (container %q): %w", s.opts.Endpoint, s.container, err)
	}
	failed := s.warmErr != nil
	close(s.warmDone)
	if failed || s.opts.WarmConns < 2 {
		return
	}
	var wg sync.WaitGroup
	for range s.opts.WarmConns {
		wg.Go(func() { s.client.NewBlobClient(warmupKey).GetProperties(ctx, nil) })
	}
	wg.Wait()
}

// begin runs before every operation: it refuses a closed store and a bad key,
// and hands the first caller the warm-up's error, if any.
func (s *Store) begin(ctx context.Context, op, key string, validate bool) error {
	check := s.life.Check
	if !validate {
		check = s.life.CheckOpen
	}
	if err := check(op, key); err != nil {
		return err
	}
	if s.warmSeen.Load() {
		return nil
	}
	// Waiting costs nothing extra: the request would need the connection
	// the warm-up is opening anyway.
	select {
	case <-s.warmDone:
	case <-ctx.Done():
		return s.wrap(op, key, ctx.Err(), nil)
	}
	if s.warmSeen.CompareAndSwap(false, true) && s.warmErr != nil {
		return s.wrap(op, key, fmt.Errorf("connection warm-up: %w", s.warmErr), classify)
	}
	return nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.begin(ctx, driver.OpStat, key, true); err != nil {
		return nil, err
	}
	return s.stat(ctx, driver.OpStat, key)
}

func (s *Store) stat(ctx context.Context, op, key string) (*blob.Attributes, error) {
	p, err := s.client.NewBlobClient(escapeKey(key)).GetProperties(ctx, nil)
	if err != nil {
		return nil, s.wrap(op, key, err, classify)
	}
	return propsToAttrs(key, &p), nil
}

func propsToAttrs(key string, p *azblobblob.GetPropertiesResponse) *blob.Attributes {
	a := &blob.Attributes{
		Key:                key,
		Size:               derefInt(p.ContentLength),
		ContentType:        deref(p.ContentType),
		CacheControl:       deref(p.CacheControl),
		ContentDisposition: deref(p.ContentDisposition),
		ContentEncoding:    deref(p.ContentEncoding),
		ContentLanguage:    deref(p.ContentLanguage),
		Metadata:           decodeMetadata(p.Metadata),
		MD5:                p.ContentMD5,
		ModTime:            derefTime(p.LastModified),
		CreateTime:         derefTime(p.CreationTime),
	}
	if p.ETag != nil {
		a.ETag, a.Generation = string(*p.ETag), string(*p.ETag)
	}
	return a
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.begin(ctx, driver.OpDelete, key, true); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	include := azblobblob.DeleteSnapshotsOptionTypeInclude
	_, err = s.client.NewBlobClient(escapeKey(key)).Delete(ctx, &azblobblob.DeleteOptions{
		DeleteSnapshots:  &include,
		AccessConditions: accessConditions(cond),
	})
	return s.wrap(driver.OpDelete, key, err, classify)
}

// Close implements blob.Store.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	if s.warmCancel != nil {
		s.warmCancel()
	}
	s.warmers.Wait()
	return nil
}

// accessConditions is c as request headers: IfNotExist is If-None-Match: *,
// IfGenerationMatch is If-Match on the ETag.
func accessConditions(c blob.Condition) *azblobblob.AccessConditions {
	if c.NotExist() {
		etag := azcore.ETagAny
		return &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfNoneMatch: &etag}}
	}
	if gen, ok := c.Generation(); ok {
		etag := azcore.ETag(gen)
		return &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}}
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefTime(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

// validateContainer applies Azure's container naming rules, so a typo fails
// at open rather than as a 400 at the first request.
func validateContainer(name string) error {
	if name == "$root" || name == "$web" {
		return nil
	}
	if len(name) < 3 || len(name) > 63 {
		return errors.New("must be 3 to 63 characters")
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return errors.New("must be lowercase letters, digits and single hyphens, starting and ending with a letter or digit")
		}
	}
	return nil
}
