// Package azpremium is a blob.Store over Azure Premium block blob accounts
// (the same Blob REST API as standard accounts, with lower and steadier
// latency), built on the azblob SDK.
//
// URL, registered on blob.Open and on gocloud's DefaultURLMux by importing
// this package:
//
//	azpremium://CONTAINER?account=NAME[&endpoint=URL][&put_threshold=256MiB][&block_size=8MiB][&concurrency=4][&warmup=true]
//
// Credentials come from the environment, never from the URL, first match wins:
// AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY (shared key for the
// account), AZURE_STORAGE_SAS_TOKEN, else azidentity's default credential.
// The account is the account parameter, else AZURE_STORAGE_ACCOUNT, else the
// connection string's AccountName; a URL with none fails at open.
//
// Guarantees: a write of up to PutThreshold bytes is one Put Blob request at
// Close; larger writes stage blocks while writing and commit the block list at
// Close, so a writer whose ctx is canceled before Close commits nothing.
// IfNotExist is If-None-Match: *, IfGenerationMatch is If-Match on the ETag
// (the Generation). Lists are in byte order and page with opaque tokens. A
// connection is opened in the background at open; an error it meets (bad
// credentials, missing container) is returned by the first call. Errors wrap
// blob's sentinels and the SDK's *azcore.ResponseError, and never contain the
// account key, SAS token or connection string.
package azpremium

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
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

// Secret is a credential string. It prints as REDACTED, so Options can be
// logged.
type Secret string

func (Secret) String() string   { return "REDACTED" }
func (Secret) GoString() string { return `"REDACTED"` }

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
	closed    atomic.Bool

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
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "malformed URL %s", blob.Redact(rawURL))
	}
	return OpenURL(ctx, u)
}

// OpenURL opens a parsed azpremium:// URL; see the package documentation.
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	if u.Scheme != Scheme {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "scheme %q, want %s", u.Scheme, Scheme)
	}
	if u.User != nil {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "%s:// URLs carry no credentials; set AZURE_STORAGE_KEY or AZURE_STORAGE_CONNECTION_STRING", Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "%s://%s has a path; the URL names a container only", Scheme, u.Host)
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
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "concurrency %d below 1", o.Concurrency)
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
			return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "connection string: %v", err)
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
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "no storage account: set ?account=NAME (or AZURE_STORAGE_ACCOUNT, or a connection string with AccountName)")
	}
	if err := validateContainer(containerName); err != nil {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "container %q: %v", containerName, err)
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://" + o.Account + ".blob.core.windows.net"
	}
	ep, err := url.Parse(o.Endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "endpoint %s is not an http(s) URL", blob.Redact(o.Endpoint))
	}
	if ep.User != nil || ep.RawQuery != "" || ep.Fragment != "" {
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "endpoint %s must not carry credentials or a query (use a SAS token option)", blob.Redact(o.Endpoint))
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
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "put threshold %d outside [0, %d]", o.PutThreshold, int64(MaxPutThreshold))
	case o.BlockSize <= 0 || o.BlockSize > MaxBlockSize:
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "block size %d outside [1, %d]", o.BlockSize, int64(MaxBlockSize))
	case o.Concurrency < 1:
		return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "concurrency %d below 1", o.Concurrency)
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
			return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "account key is not valid base64")
		}
		client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, copts)
		if err != nil {
			return nil, &blob.Error{Op: "open", Kind: blob.ErrInvalidArgument, Err: err}
		}
	case o.SASToken != "":
		sas := strings.TrimPrefix(string(o.SASToken), "?")
		secrets = append(secrets, sas)
		if v, err := url.ParseQuery(sas); err == nil && v.Get("sig") != "" {
			secrets = append(secrets, v.Get("sig"), url.QueryEscape(v.Get("sig")))
		}
		client, err = container.NewClientWithNoCredential(containerURL+"?"+sas, copts)
		if err != nil {
			return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "SAS token is malformed")
		}
	default:
		cred := o.Credential
		if cred == nil {
			c, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: azcore.ClientOptions{Transport: sharedHTTPClient()}})
			if err != nil {
				return nil, &blob.Error{Op: "open", Kind: blob.ErrInvalidArgument, Err: fmt.Errorf("no credentials in the environment and azidentity's default credential failed: %w", err)}
			}
			cred = c
		}
		client, err = container.NewClient(containerURL, cred, copts)
		if err != nil {
			return nil, &blob.Error{Op: "open", Kind: blob.ErrInvalidArgument, Err: err}
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
	if s.closed.Load() {
		return &blob.Error{Op: op, Key: key, Kind: blob.ErrClosed}
	}
	if validate {
		if err := blob.ValidateKey(op, key); err != nil {
			return err
		}
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

// Error codes the service uses when an account type lacks a blob type (append
// blobs on some premium accounts), absent from bloberror.
const (
	featureNotSupportedForAccount bloberror.Code = "FeatureNotSupportedForAccount"
	blobTypeNotSupported          bloberror.Code = "BlobTypeNotSupported"
)

// classify maps the service's answer to a sentinel.
func classify(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil
	}
	switch bloberror.Code(re.ErrorCode) {
	case bloberror.BlobAlreadyExists:
		return blob.ErrExists
	case bloberror.ConditionNotMet, bloberror.AppendPositionConditionNotMet, bloberror.MaxBlobSizeConditionNotMet, bloberror.TargetConditionNotMet, bloberror.SourceConditionNotMet:
		return blob.ErrPrecondition
	case featureNotSupportedForAccount, blobTypeNotSupported, bloberror.InvalidBlobType:
		return blob.ErrUnsupported
	case bloberror.MD5Mismatch, bloberror.InvalidMetadata, bloberror.InvalidHeaderValue, bloberror.InvalidRange, bloberror.InvalidQueryParameterValue:
		return blob.ErrInvalidArgument
	}
	switch re.StatusCode {
	case http.StatusNotFound:
		return blob.ErrNotFound
	case http.StatusPreconditionFailed:
		return blob.ErrPrecondition
	case http.StatusNotImplemented:
		return blob.ErrUnsupported
	}
	return nil
}

// wrap is driver.WrapError plus redaction of this store's credentials.
func (s *Store) wrap(op, key string, err error, classify func(error) error) error {
	return redact(driver.WrapError(op, key, err, classify), s.secrets)
}

// writeKind classifies a failed conditional write: with IfNotExist every
// "condition failed" answer means the object exists; with a generation, a
// missing object is a failed precondition, not NotFound.
func writeKind(err error, ifNotExist bool, ifGen string) error {
	kind := classify(err)
	switch {
	case ifNotExist && (kind == blob.ErrPrecondition || bloberror.HasCode(err, bloberror.BlobAlreadyExists)):
		return blob.ErrExists
	case ifGen != "" && kind == blob.ErrNotFound && !bloberror.HasCode(err, bloberror.ContainerNotFound):
		return blob.ErrPrecondition
	}
	return kind
}

func accessConditions(ifNotExist bool, ifGen string) *azblobblob.AccessConditions {
	switch {
	case ifNotExist:
		etag := azcore.ETagAny
		return &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfNoneMatch: &etag}}
	case ifGen != "":
		etag := azcore.ETag(ifGen)
		return &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}}
	}
	return nil
}

// NewRangeReader implements blob.Store.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.begin(ctx, "read", key, true); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf("read", key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	bc := s.client.NewBlobClient(escapeKey(key))
	if length == 0 {
		// The SDK reads a zero Count as "to the end"; ask for the attributes only.
		return s.emptyReader(ctx, key)
	}
	var o azblobblob.DownloadStreamOptions
	if offset > 0 || length > 0 {
		o.Range = azblobblob.HTTPRange{Offset: offset, Count: max(length, 0)}
	}
	resp, err := bc.DownloadStream(ctx, &o)
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			// Reading at or past the end is not an error: io.EOF at once.
			return s.emptyReader(ctx, key)
		}
		return nil, s.wrap("read", key, err, classify)
	}
	size := derefInt(resp.ContentLength)
	if resp.ContentRange != nil {
		if _, total, ok := strings.Cut(*resp.ContentRange, "/"); ok {
			fmt.Sscanf(total, "%d", &size)
		}
	}
	a := &blob.Attributes{
		Key:                key,
		Size:               size,
		ContentType:        deref(resp.ContentType),
		CacheControl:       deref(resp.CacheControl),
		ContentDisposition: deref(resp.ContentDisposition),
		ContentEncoding:    deref(resp.ContentEncoding),
		ContentLanguage:    deref(resp.ContentLanguage),
		Metadata:           decodeMetadata(resp.Metadata),
		ModTime:            derefTime(resp.LastModified),
		CreateTime:         derefTime(resp.CreationTime),
	}
	if resp.ETag != nil {
		a.ETag, a.Generation = string(*resp.ETag), string(*resp.ETag)
	}
	if resp.ContentRange == nil {
		a.MD5 = resp.ContentMD5
	}
	return &reader{s: s, body: resp.Body, key: key, attrs: a}, nil
}

func (s *Store) emptyReader(ctx context.Context, key string) (blob.Reader, error) {
	a, err := s.stat(ctx, "read", key)
	if err != nil {
		return nil, err
	}
	return driver.EmptyReader(a), nil
}

type reader struct {
	s      *Store
	body   io.ReadCloser
	key    string
	attrs  *blob.Attributes
	closed bool
}

func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, &blob.Error{Op: "read", Key: r.key, Kind: blob.ErrClosed}
	}
	n, err := r.body.Read(p)
	if err != nil && err != io.EOF {
		err = r.s.wrap("read", r.key, err, classify)
	}
	return n, err
}

func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.body.Close()
}

func (r *reader) Attributes() *blob.Attributes { return r.attrs }

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.begin(ctx, "stat", key, true); err != nil {
		return nil, err
	}
	return s.stat(ctx, "stat", key)
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

// NewWriter implements blob.Store. Up to PutThreshold bytes are buffered and
// sent as one Put Blob at Close; past it, blocks are staged as they fill and
// the block list is committed at Close.
func (s *Store) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := s.begin(ctx, "write", key, true); err != nil {
		return nil, err
	}
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	if err := o.If.Validate("write", key); err != nil {
		return nil, err
	}
	if o.ContentMD5 != nil && len(o.ContentMD5) != md5.Size {
		return nil, blob.Errorf("write", key, blob.ErrInvalidArgument, "ContentMD5 has %d bytes, want %d", len(o.ContentMD5), md5.Size)
	}
	md, err := encodeMetadata(o.Metadata)
	if err != nil {
		return nil, blob.Errorf("write", key, blob.ErrInvalidArgument, "metadata: %v", err)
	}
	return &writer{s: s, ctx: ctx, key: key, opts: o, md: md}, nil
}

func (o *Options) headers(wo *blob.WriterOptions) *azblobblob.HTTPHeaders {
	h := &azblobblob.HTTPHeaders{}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = &v
		}
	}
	set(&h.BlobContentType, wo.ContentType)
	set(&h.BlobCacheControl, wo.CacheControl)
	set(&h.BlobContentDisposition, wo.ContentDisposition)
	set(&h.BlobContentEncoding, wo.ContentEncoding)
	set(&h.BlobContentLanguage, wo.ContentLanguage)
	return h
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.begin(ctx, "delete", key, true); err != nil {
		return err
	}
	var ifGen string
	if opts != nil {
		ifGen = opts.IfGenerationMatch
	}
	include := azblobblob.DeleteSnapshotsOptionTypeInclude
	_, err := s.client.NewBlobClient(escapeKey(key)).Delete(ctx, &azblobblob.DeleteOptions{
		DeleteSnapshots:  &include,
		AccessConditions: accessConditions(false, ifGen),
	})
	if err != nil {
		kind := classify(err)
		return redact(&blob.Error{Op: "delete", Key: key, Kind: ctxKind(err, kind), Err: err}, s.secrets)
	}
	return nil
}

// Close implements blob.Store.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return &blob.Error{Op: "close", Kind: blob.ErrClosed}
	}
	if s.warmCancel != nil {
		s.warmCancel()
	}
	<-s.warmDone
	return nil
}

// ctxKind drops the sentinel of errors caused by a done context.
func ctxKind(err, kind error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return kind
}

// newBlockID returns a random block ID of n bytes, base64: IDs must be unique
// within a blob and of one length in it.
func newBlockID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// blockIDBytes is the length of the block IDs this package makes.
const blockIDBytes = 48

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

func nopCloser(b []byte) io.ReadSeekCloser { return streaming.NopCloser(bytes.NewReader(b)) }

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

type connectionString struct {
	account, key, sas, endpoint string
}

// parseConnectionString reads an Azure Storage connection string. Its errors
// name fields, never values.
func parseConnectionString(cs string) (connectionString, error) {
	var out connectionString
	fields := map[string]string{}
	for part := range strings.SplitSeq(cs, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return out, errors.New("a field lacks '='")
		}
		fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if fields["UseDevelopmentStorage"] == "true" {
		fields["AccountName"] = "devstoreaccount1"
		fields["AccountKey"] = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
		fields["BlobEndpoint"] = "http://127.0.0.1:10000/devstoreaccount1"
	}
	out.account, out.key, out.sas, out.endpoint = fields["AccountName"], fields["AccountKey"], fields["SharedAccessSignature"], fields["BlobEndpoint"]
	if out.endpoint == "" && out.account != "" {
		proto := cmpOr(fields["DefaultEndpointsProtocol"], "https")
		suffix := cmpOr(fields["EndpointSuffix"], "core.windows.net")
		out.endpoint = proto + "://" + out.account + ".blob." + suffix
	}
	if out.key == "" && out.sas == "" {
		return out, errors.New("neither AccountKey nor SharedAccessSignature")
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redact hides secrets from err's message, keeping err reachable through
// errors.Is and errors.As.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	hit := false
	for _, sec := range secrets {
		if len(sec) >= 4 && strings.Contains(msg, sec) {
			msg = strings.ReplaceAll(msg, sec, "REDACTED")
			hit = true
		}
	}
	if !hit {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
