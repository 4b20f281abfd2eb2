package s3expresstest

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// Region is the region Client configures; the server accepts any.
const Region = "us-east-1"

// Default static credentials used by Client. The server does not check
// them: only session credentials of directory buckets are checked.
const (
	DefaultAccessKeyID     = "AKIDS3EXPRESSTEST"
	DefaultSecretAccessKey = "s3expresstest-secret"
)

// DefaultSessionTTL is how long CreateSession credentials last, as on S3
// Express One Zone (five minutes).
const DefaultSessionTTL = 5 * time.Minute

// DefaultMaxObjectParts is the most parts, hence appends, S3 Express allows
// one object: "each object can have up to 10,000 parts", and the append past
// it fails with the TooManyParts error.
const DefaultMaxObjectParts = 10000

// Options configures a Server. The zero value is a server with no buckets,
// no delay and no faults.
type Options struct {
	// Buckets are created before the server starts. Names ending in "--x-s3"
	// are directory buckets, others are general purpose buckets.
	Buckets []string

	// Profile delays each operation; Seed makes the delays, the ETags and the
	// listing order reproducible.
	Profile Profile
	Seed    uint64

	// SessionTTL is the lifetime of CreateSession credentials
	// (DefaultSessionTTL when zero).
	SessionTTL time.Duration

	// ConflictOnConcurrentWrite makes a conditional write (If-None-Match or
	// If-Match) fail with 409 ConditionalRequestConflict instead of 412 when
	// another write to the same key completed while it was in flight, as S3
	// may do under contention. Off by default: racing writers then see 412.
	ConflictOnConcurrentWrite bool

	// Credentials maps access key IDs to secret keys the server accepts
	// for SigV4 signatures besides DefaultAccessKeyID. Requests to general
	// purpose buckets and CreateSession must be signed with one of them;
	// directory bucket requests with their session's credentials.
	Credentials map[string]string

	// MaxObjectParts is how many parts one object may have
	// (DefaultMaxObjectParts when zero): a PUT makes one part, a multipart
	// upload one per part, and each append (PutObject with
	// x-amz-write-offset-bytes) adds one; the append that would exceed it
	// fails with 400 TooManyParts, as S3 Express does. CopyObject starts the
	// count again. Tests set it low to reach the limit quickly.
	MaxObjectParts int

	// Faults fail chosen requests; more can be added with InjectFault.
	Faults []Fault

	// Observe, if set, is called with every request after it is routed and
	// before it is answered, for tests that check what a client sends. It
	// must not keep r or read its body.
	Observe func(op Op, r *http.Request)
}

// Server is an S3 Express One Zone emulator listening on 127.0.0.1.
type Server struct {
	opts    Options
	secrets map[string]string
	ts      *httptest.Server
	backend *s3mem.Backend
	fake    http.Handler
	sampler *latency.Sampler

	// mu serializes every change to stored objects with the checks that guard
	// it (preconditions, append offsets), and lets reads see whole changes.
	mu      sync.RWMutex
	commits map[string]uint64 // bucket/key -> number of completed writes
	uploads map[string]upload // multipart upload ID -> what CreateMultipartUpload asked

	rngMu sync.Mutex
	rng   *rand.Rand

	sessMu   sync.Mutex
	sessions map[string]session // token -> session

	statMu sync.Mutex
	stats  Stats
	opSeen map[Op]int64
	faults []Fault
}

type session struct {
	bucket    string
	accessKey string
	secret    string
	expires   time.Time
	readOnly  bool
}

type upload struct {
	bucket, key string
	meta        map[string]string
}

// NewServer starts and returns a new Server. The caller should call Close
// when finished, to shut it down. It fails if a bucket of opts.Buckets
// cannot be created.
func NewServer(opts Options) (*Server, error) {
	s, err := NewUnstartedServer(opts)
	if err != nil {
		return nil, err
	}
	s.Start()
	return s, nil
}

// Start starts a Server for t, fails t if it cannot, and closes it when t
// ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return emulators.Started[*Server](t)(NewServer(opts))
}

// NewUnstartedServer returns a new Server that is not started yet; call
// Start to begin serving. Its listener is open, so Endpoint is known.
func NewUnstartedServer(opts Options) (*Server, error) {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	s := &Server{
		opts:     opts,
		secrets:  map[string]string{DefaultAccessKeyID: DefaultSecretAccessKey},
		backend:  s3mem.New(),
		sampler:  latency.NewSampler(opts.Seed),
		commits:  map[string]uint64{},
		uploads:  map[string]upload{},
		rng:      rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5eed5eed5eed5eed)),
		sessions: map[string]session{},
		opSeen:   map[Op]int64{},
		faults:   append([]Fault(nil), opts.Faults...),
	}
	for ak, secret := range opts.Credentials {
		s.secrets[ak] = secret
	}
	// The time-skew check is off because tests may run with fake clocks.
	s.fake = gofakes3.New(s.backend, gofakes3.WithTimeSkewLimit(0)).Server()
	for _, b := range opts.Buckets {
		if err := s.CreateBucket(b); err != nil {
			return nil, fmt.Errorf("s3expresstest: creating bucket %q: %w", b, err)
		}
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	return s, nil
}

// NewTLSServer starts and returns a new Server serving HTTPS with a
// self-signed certificate; Client trusts it. Over HTTPS the SDK sends
// bodies aws-chunked with the checksum in a trailer, as it does against AWS,
// and accepts unseekable bodies; over HTTP it sends the checksum as a header
// and requires a seekable body.
func NewTLSServer(opts Options) (*Server, error) {
	s, err := NewUnstartedServer(opts)
	if err != nil {
		return nil, err
	}
	s.StartTLS()
	return s, nil
}

// Start starts a server from NewUnstartedServer.
func (s *Server) Start() { s.ts.Start() }

// StartTLS starts a server from NewUnstartedServer serving HTTPS.
func (s *Server) StartTLS() { s.ts.StartTLS() }

// HTTPClient returns an HTTP client for the server: for a TLS server one
// that trusts its certificate.
func (s *Server) HTTPClient() *http.Client { return s.ts.Client() }

// Close shuts the server down and blocks until all outstanding requests
// have completed.
func (s *Server) Close() { s.ts.Close() }

// URL returns the base URL, "http://127.0.0.1:PORT" (https for a TLS
// server), for o.BaseEndpoint.
func (s *Server) URL() string {
	if s.ts.URL != "" {
		return s.ts.URL
	}
	return "http://" + s.ts.Listener.Addr().String()
}

// Endpoint returns the listening address, "127.0.0.1:PORT".
func (s *Server) Endpoint() string { return s.ts.Listener.Addr().String() }

// ClientOptions configures an s3.Client for this server: base endpoint, path
// style, static credentials, Region and HTTPClient. Use it with s3.New or
// s3.NewFromConfig; Client is the short form.
func (s *Server) ClientOptions(o *s3.Options) {
	o.BaseEndpoint = aws.String(s.URL())
	o.UsePathStyle = true
	o.Region = Region
	o.Credentials = credentials.NewStaticCredentialsProvider(DefaultAccessKeyID, DefaultSecretAccessKey, "")
	o.HTTPClient = s.ts.Client()
}

// Client returns an AWS SDK S3 client that talks to this server; optFns
// apply after ClientOptions.
func (s *Server) Client(optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{}, append([]func(*s3.Options){s.ClientOptions}, optFns...)...)
}

// IsDirectoryBucket reports whether name is an S3 Express directory bucket
// name ("BASE--AZID--x-s3").
func IsDirectoryBucket(name string) bool { return strings.HasSuffix(name, "--x-s3") }

// CreateBucket creates a bucket; it may be called while the server runs.
func (s *Server) CreateBucket(name string) error {
	if name == "" || strings.ContainsAny(name, "/?#") {
		return fmt.Errorf("s3expresstest: invalid bucket name %q", name)
	}
	return s.backend.CreateBucket(name)
}

// Stats is a snapshot of what the server has answered. Operation counts
// include every attempt that passed session auth, also those that then
// failed (preconditions, injected faults), so the next request of Op is
// number count+1 for a Fault. Requests refused for missing or invalid
// session credentials are counted only as rejected.
type Stats struct {
	Requests        int64
	CreateSession   int64
	PutObject       int64 // includes appends
	Appends         int64 // PutObject with x-amz-write-offset-bytes
	GetObject       int64
	HeadObject      int64
	List            int64
	DeleteObject    int64
	DeleteObjects   int64 // bulk delete requests
	DeletedKeys     int64 // keys named in bulk delete requests
	CopyObject      int64
	MultipartCreate int64
	UploadPart      int64
	MultipartDone   int64 // CompleteMultipartUpload
	MultipartAbort  int64
	Other           int64 // bucket operations and anything else

	// RejectedMissingToken counts data-plane requests to a directory bucket
	// without an x-amz-s3session-token; RejectedInvalidToken those whose
	// token was unknown, expired, for another bucket or signed with another
	// access key.
	RejectedMissingToken int64
	RejectedInvalidToken int64
	// RejectedSignature counts requests refused because they were not
	// signed, signed with an unknown access key, or the signature was wrong.
	RejectedSignature int64

	PreconditionFailed int64 // 412 answers
	TooManyParts       int64 // appends refused with 400 TooManyParts
	Conflicts          int64 // 409 ConditionalRequestConflict answers, faults included
	FaultsInjected     int64

	BytesIn  int64 // object bytes received (PUT bodies, parts)
	BytesOut int64 // object bytes sent (GET bodies)

	// Delays counts requests the latency profile delayed, and Delayed is the
	// total of the delays drawn for them (a delay cut short by the client
	// going away included in full): a test can check that a profile was
	// applied without timing requests.
	Delays  int64
	Delayed time.Duration
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	return s.stats
}

func (s *Server) count(f func(*Stats)) {
	s.statMu.Lock()
	f(&s.stats)
	s.statMu.Unlock()
}

// Op names an operation for faults and observation.
type Op string

// Operations the server distinguishes.
const (
	OpCreateSession   Op = "CreateSession"
	OpPutObject       Op = "PutObject" // including appends
	OpGetObject       Op = "GetObject"
	OpHeadObject      Op = "HeadObject"
	OpListObjects     Op = "ListObjects"
	OpDeleteObject    Op = "DeleteObject"
	OpDeleteObjects   Op = "DeleteObjects"
	OpCopyObject      Op = "CopyObject"
	OpCreateMultipart Op = "CreateMultipartUpload"
	OpUploadPart      Op = "UploadPart"
	OpCompleteUpload  Op = "CompleteMultipartUpload"
	OpAbortUpload     Op = "AbortMultipartUpload"
	OpOther           Op = "Other"
)

// Fault makes the Nth request (1-based, counting from server start) of Op
// fail with Status: 500 answers InternalError, 503 SlowDown, 409
// ConditionalRequestConflict, unless Code says otherwise. A fault fires once.
// Note that the AWS SDK retries 500 and 503 by itself.
type Fault struct {
	Op     Op
	Nth    int64
	Status int
	Code   string
}

// InjectFault adds a fault while the server runs. Nth counts requests of
// f.Op from server start: to fail the next GetObject, use
// Nth: s.Stats().GetObject + 1.
func (s *Server) InjectFault(f Fault) {
	s.statMu.Lock()
	s.faults = append(s.faults, f)
	s.statMu.Unlock()
}

// seeOp counts one routed request of op (an append, if appending: a
// PutObject with x-amz-write-offset-bytes) and returns the fault it must
// answer with, if any. Both counts move under one lock, so that PutObject
// less Appends (the creates) never counts an append in flight.
func (s *Server) seeOp(op Op, appending bool) *s3Error {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	if appending {
		s.stats.Appends++
	}
	s.opSeen[op]++
	n := s.opSeen[op]
	st := &s.stats
	if c := map[Op]*int64{
		OpCreateSession: &st.CreateSession, OpPutObject: &st.PutObject, OpGetObject: &st.GetObject,
		OpHeadObject: &st.HeadObject, OpListObjects: &st.List, OpDeleteObject: &st.DeleteObject,
		OpDeleteObjects: &st.DeleteObjects, OpCopyObject: &st.CopyObject, OpCreateMultipart: &st.MultipartCreate,
		OpUploadPart: &st.UploadPart, OpCompleteUpload: &st.MultipartDone, OpAbortUpload: &st.MultipartAbort,
	}[op]; c != nil {
		*c++
	} else {
		st.Other++
	}
	for i, f := range s.faults {
		if f.Op != op || f.Nth != n {
			continue
		}
		s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		s.stats.FaultsInjected++
		e := &s3Error{Status: f.Status, Code: f.Code, Message: "fault injected by s3expresstest", injected: true}
		if e.Status == 0 {
			e.Status = http.StatusInternalServerError
		}
		if e.Code == "" {
			switch e.Status {
			case http.StatusServiceUnavailable:
				e.Code, e.Message = "SlowDown", "Please reduce your request rate. (fault injected by s3expresstest)"
			case http.StatusConflict:
				e.Code = "ConditionalRequestConflict"
			default:
				e.Code = "InternalError"
			}
		}
		if e.Status == http.StatusConflict {
			s.stats.Conflicts++
		}
		return e
	}
	return nil
}

// randomHex returns n random bytes from the seeded generator, hex encoded.
func (s *Server) randomHex(n int) string {
	b := make([]byte, n)
	s.rngMu.Lock()
	for i := range b {
		b[i] = byte(s.rng.Uint32())
	}
	s.rngMu.Unlock()
	return hex.EncodeToString(b)
}

// sleep waits for one draw of d, plus one draw of the per-MiB transfer
// delay per MiB of n bytes.
func (s *Server) sleep(ctx context.Context, d latency.Dist, n int64) error {
	total := s.sampler.Sample(d)
	if n > 0 && !s.opts.Profile.TransferPerMiB.IsZero() {
		perMiB := s.sampler.Sample(s.opts.Profile.TransferPerMiB)
		total += time.Duration(float64(perMiB) * float64(n) / (1 << 20))
	}
	if total > 0 {
		s.count(func(st *Stats) { st.Delays++; st.Delayed += total })
	}
	return latency.Sleep(ctx, total)
}

// objectURL is for messages and Location headers.
func (s *Server) objectURL(bucket, key string) string {
	return s.URL() + "/" + bucket + "/" + (&url.URL{Path: key}).EscapedPath()
}
