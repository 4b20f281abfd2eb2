package azpremium

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

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
	// DefaultPutThreshold is the largest write sent as one Put Blob; it is
	// where azblob's own uploader switches to staged blocks.
	DefaultPutThreshold = 256 << 20
	// MaxPutThreshold is the largest single Put Blob the service accepts.
	MaxPutThreshold = 5000 << 20
	// DefaultBlockSize is the size of a staged block above the threshold.
	DefaultBlockSize = 8 << 20
	// MaxBlockSize is the largest block the service accepts.
	MaxBlockSize = 4000 << 20
	// DefaultConcurrency is the number of blocks a writer stages at once.
	DefaultConcurrency = 4
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

	// PutThreshold is the largest write sent as a single Put Blob (default
	// DefaultPutThreshold, at most MaxPutThreshold). Larger writes stage
	// blocks of BlockSize (default DefaultBlockSize), Concurrency at a time
	// (default DefaultConcurrency), and commit them at Close.
	PutThreshold int64
	BlockSize    int64
	Concurrency  int

	// NoWarmup skips opening a connection in the background at New.
	NoWarmup bool

	// Retry tunes the SDK's retries (zero: azcore's defaults).
	Retry policy.RetryOptions
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
	warmSeen   atomic.Bool

	// noAppendBlobs is set once the account refused append blobs.
	noAppendBlobs atomic.Bool
}

var (
	_ blob.Store    = (*Store)(nil)
	_ blob.Appender = (*Store)(nil)
)

// Open opens an azpremium:// URL.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "malformed URL %s", blob.Redact(rawURL))
	}
	return OpenURL(ctx, u)
}

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
		Account:  q.String("account", os.Getenv("AZURE_STORAGE_ACCOUNT")),
		Endpoint: q.String("endpoint", ""),
		NoWarmup: !q.Bool("warmup", true),
	}
	o.PutThreshold = querySize(q, "put_threshold")
	o.BlockSize = querySize(q, "block_size")
	o.Concurrency = q.Int("concurrency", DefaultConcurrency)
	if err := q.Err(); err != nil {
		return nil, err
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
	return New(ctx, u.Host, o)
}

// querySize reads a byte size: a plain number or one with a KiB, MiB or GiB suffix.
func querySize(q *driver.Query, name string) int64 {
	v := q.String(name, "")
	if v == "" {
		return 0
	}
	n, err := parseSize(v)
	if err != nil {
		// Reported by q.Err through Int's parser, which names the parameter.
		return int64(q.Int(name, 0))
	}
	return n
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if s, ok := strings.CutSuffix(v, suffix); ok {
			v, mult = s, m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v || n < 0 {
		return 0, fmt.Errorf("%q is not a size", v)
	}
	return n * mult, nil
}

// New opens container with opts. It validates everything before any request;
// unless opts.NoWarmup, it then opens a connection in the background.
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
	if o.PutThreshold == 0 {
		o.PutThreshold = DefaultPutThreshold
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	switch {
	case o.PutThreshold < 0 || o.PutThreshold > MaxPutThreshold:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "put threshold %d outside [0, %d]", o.PutThreshold, int64(MaxPutThreshold))
	case o.BlockSize <= 0 || o.BlockSize > MaxBlockSize:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "block size %d outside [1, %d]", o.BlockSize, int64(MaxBlockSize))
	case o.Concurrency < 1:
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "concurrency %d below 1", o.Concurrency)
	}
	containerURL := strings.TrimSuffix(o.Endpoint, "/") + "/" + containerName
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: sharedHTTPClient(),
		Retry:     o.Retry,
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
	if o.NoWarmup {
		close(s.warmDone)
		s.warmSeen.Store(true)
	} else {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		s.warmCancel = cancel
		go s.warmup(wctx)
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

func (s *Store) warmup(ctx context.Context) {
	defer close(s.warmDone)
	defer s.warmCancel()
	_, err := s.client.NewBlobClient(warmupKey).GetProperties(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		s.warmErr = err
	}
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
	var cond blob.Condition
	if opts != nil && opts.IfGenerationMatch != "" {
		cond = blob.IfGenerationMatch(opts.IfGenerationMatch)
	}
	include := azblobblob.DeleteSnapshotsOptionTypeInclude
	_, err := s.client.NewBlobClient(escapeKey(key)).Delete(ctx, &azblobblob.DeleteOptions{
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
	<-s.warmDone
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
