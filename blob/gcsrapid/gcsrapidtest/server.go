package gcsrapidtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// DefaultMaxBytes is the memory cap used when Options.MaxBytes is zero.
const DefaultMaxBytes = 1 << 30

// Bucket declares a bucket the server starts with.
type Bucket struct {
	Name string
	// Zonal selects a GCS Rapid bucket: it accepts only appendable writes.
	// A regional bucket accepts only ordinary (non-appendable) writes.
	Zonal bool
}

// Options configures a Server. The zero Options is a server with no buckets,
// no delay, seed 0 and a 1 GiB memory cap.
type Options struct {
	// Buckets are created before the server starts.
	Buckets []Bucket
	// Profile is the per-operation delay; see Rapid, Regional, Zero and ProfileByName.
	Profile Profile
	// Seed seeds the latency sampler, so a run can be replayed.
	Seed uint64
	// MaxBytes caps the object data held in memory (DefaultMaxBytes if zero).
	// A write past it fails with codes.ResourceExhausted, which the storage
	// client retries by default until its deadline: give the writer's object
	// a Retryer with storage.RetryNever to see the error at once.
	MaxBytes int64
	// CloseTimeout bounds how long Close waits for in-flight streams before it
	// cuts them (default 10s), so a leaked client stream cannot hang a test.
	CloseTimeout time.Duration
	// MaxStreamsPerConn caps the RPCs in flight on one client connection, as
	// a front end's HTTP/2 MAX_CONCURRENT_STREAMS does (DefaultMaxStreamsPerConn
	// if zero; negative: no cap). The server advertises it, so a client
	// queues its streams beyond it; a stream that arrives over it anyway is
	// refused with UNAVAILABLE and counted in Stats.StreamsRefused.
	MaxStreamsPerConn int
	// TransientFaults fails this fraction of the calls of the methods in
	// TransientFaultMethods (default: the idempotent ones, see
	// DefaultTransientFaultMethods) before they act, alternately with
	// UNAVAILABLE and RESOURCE_EXHAUSTED, drawn from Seed, as a busy service
	// does at scale.
	TransientFaults       float64
	TransientFaultMethods []string
	// Hierarchical applies the naming rules of a bucket with hierarchical
	// namespace (as Rapid buckets have) to every zonal bucket: see
	// CheckHierarchicalName.
	Hierarchical bool

	// WriteBreaks fail appendable write streams part way, after the object
	// exists: after N messages (unflushed bytes lost), after a flush, or
	// after the last message but before its reply (SourceTestbench). See
	// WriteBreak; Server.BreakWrites arms more while the server runs.
	WriteBreaks []WriteBreak
	// MaxWriteMessage refuses a write message that carries more object data
	// than this with RESOURCE_EXHAUSTED, as a Rapid bucket does above 2 MiB
	// (SourceRapidProbes: set it to MaxWriteMessage). Zero: no limit.
	MaxWriteMessage int
	// RefuseZeroGenerationTakeover refuses a takeover (append_object_spec)
	// that names no generation (0) with INVALID_ARGUMENT, as a Rapid bucket
	// does (SourceRapidProbes). Off, generation 0 takes over the live one.
	RefuseZeroGenerationTakeover bool
	// ReadStreamLifetime ends every BidiReadObject stream this long after it
	// opened, with ReadStreamEndCode (codes.Canceled if zero), as the
	// storage-testbench does after 10 s (SourceTestbench); the service may
	// end a read stream at any time, and a client must open another. The
	// stream ends when idle or between two pieces (2 MiB) of an answer.
	// Zero: never.
	ReadStreamLifetime time.Duration
	ReadStreamEndCode  codes.Code
	// Redirects answers the first Redirects appendable write streams and
	// bidi read streams that carry no routing token ABORTED, before they
	// act, with a redirect detail (BidiWriteObjectRedirectedError or
	// BidiReadObjectRedirectedError) holding a routing token; a stream that
	// replays the token in x-goog-request-params is served, an unknown one
	// is refused (SourceRapidProbes; the client libraries follow these
	// redirects). Server.Redirect arms more.
	Redirects int
}

// DefaultMaxStreamsPerConn is a typical front end's cap on concurrent streams
// per HTTP/2 connection.
const DefaultMaxStreamsPerConn = 100

// DefaultTransientFaultMethods are the methods TransientFaults applies to by
// default: those a client may retry without changing the outcome.
var DefaultTransientFaultMethods = []string{"GetObject", "ListObjects", "BidiReadObject", "ReadObject", "GetBucket"}

// Server is an in-process google.storage.v2 gRPC service on 127.0.0.1.
// All methods are safe for concurrent use.
type Server struct {
	// Addr is host:port of the listener, set by Start.
	Addr string

	opts     Options
	sampler  *latency.Sampler
	store    *store
	grpc     *grpc.Server
	lis      net.Listener
	started  bool
	closed   chan struct{}
	serveErr chan error

	stats  counters
	faults faultTable
	breaks breakTable
	// redirects issues and checks routing tokens (Options.Redirects).
	redirects redirects
	mu        sync.Mutex

	conns     connTable
	transient transientFaults
}

// NewUnstartedServer returns a Server that is not listening yet, so buckets
// and faults can be set up before the first request. Call Start.
func NewUnstartedServer(opts Options) (*Server, error) {
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("gcsrapidtest: negative MaxBytes %d", opts.MaxBytes)
	}
	if opts.CloseTimeout == 0 {
		opts.CloseTimeout = 10 * time.Second
	}
	if opts.MaxStreamsPerConn == 0 {
		opts.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if opts.TransientFaults < 0 || opts.TransientFaults > 1 {
		return nil, fmt.Errorf("gcsrapidtest: TransientFaults %v is not a fraction", opts.TransientFaults)
	}
	if opts.TransientFaultMethods == nil {
		opts.TransientFaultMethods = DefaultTransientFaultMethods
	}
	s := &Server{
		opts:     opts,
		sampler:  latency.NewSampler(opts.Seed),
		store:    newStore(opts.MaxBytes),
		closed:   make(chan struct{}),
		serveErr: make(chan error, 1),
	}
	s.stats.calls = map[string]*atomic.Int64{}
	s.conns.active = map[string]int{}
	s.transient = newTransientFaults(opts.Seed, opts.TransientFaults, opts.TransientFaultMethods)
	s.redirects.left = opts.Redirects
	for _, b := range opts.WriteBreaks {
		s.breaks.add(b)
	}
	if opts.MaxWriteMessage < 0 || opts.ReadStreamLifetime < 0 {
		return nil, fmt.Errorf("gcsrapidtest: negative MaxWriteMessage or ReadStreamLifetime")
	}
	for _, b := range opts.Buckets {
		if err := s.CreateBucket(b.Name, b.Zonal); err != nil {
			return nil, err
		}
	}
	sopts := []grpc.ServerOption{
		grpc.UnknownServiceHandler(s.dispatch),
		// The client sends up to 2 MiB of data per message plus framing.
		grpc.MaxRecvMsgSize(16 << 20),
		grpc.MaxSendMsgSize(16 << 20),
	}
	if opts.MaxStreamsPerConn > 0 {
		sopts = append(sopts, grpc.MaxConcurrentStreams(uint32(opts.MaxStreamsPerConn)))
	}
	s.grpc = grpc.NewServer(sopts...)
	return s, nil
}

// NewServer starts a Server on 127.0.0.1:0.
func NewServer(opts Options) (*Server, error) {
	s, err := NewUnstartedServer(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts a Server for t, fails t if it cannot, and closes it when t
// ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return emulators.Started[*Server](t)(NewServer(opts))
}

// Start listens on 127.0.0.1:0 and serves in the background.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("gcsrapidtest: server already started")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("gcsrapidtest: listen: %w", err)
	}
	s.lis = lis
	s.Addr = lis.Addr().String()
	s.started = true
	go func() { s.serveErr <- s.grpc.Serve(lis) }()
	return nil
}

// Endpoint is the host:port to pass to option.WithEndpoint.
func (s *Server) Endpoint() string { return s.Addr }

// Profile returns the latency profile the server runs.
func (s *Server) Profile() Profile { return s.opts.Profile }

// ClientConns is how many connections the clients of ClientOptions and
// Client open: enough for 1,600 concurrent streams under the default cap.
const ClientConns = 16

// ClientOptions are the options a storage gRPC client needs to reach the
// server: its endpoint, plaintext transport, no credentials, no metrics
// export (there is no Cloud Monitoring to export to), and ClientConns
// connections, so that pools of writers fit under MaxStreamsPerConn.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.Addr),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithoutAuthentication(),
		storage.WithDisabledClientMetrics(),
		option.WithGRPCConnectionPool(ClientConns),
	}
}

// Client returns a gRPC storage client for the server with the zonal APIs on
// (storage.WithAppendableUploads and storage.WithGRPCBidiReads). With these
// options Writer.Append defaults to true, which a regional bucket rejects:
// set Writer.Append = false there, or build a client from ClientOptions.
// The caller closes the client.
func (s *Server) Client(ctx context.Context, extra ...option.ClientOption) (*storage.Client, error) {
	opts := append(s.ClientOptions(), storage.WithAppendableUploads(), storage.WithGRPCBidiReads())
	return storage.NewGRPCClient(ctx, append(opts, extra...)...)
}

// Close stops accepting connections and waits for in-flight RPCs, up to
// Options.CloseTimeout, after which it cuts the remaining streams.
// Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return
	default:
	}
	close(s.closed)
	started := s.started
	s.mu.Unlock()
	if !started {
		s.grpc.Stop()
		return
	}
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.opts.CloseTimeout):
		s.grpc.Stop()
		<-done
	}
	<-s.serveErr
}

// CreateBucket adds an empty bucket. Names follow GCS rules loosely: 3-63
// characters of lowercase letters, digits, '-', '_' and '.'.
func (s *Server) CreateBucket(name string, zonal bool) error {
	if len(name) < 3 || len(name) > 63 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return fmt.Errorf("gcsrapidtest: invalid bucket name %q", name)
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if _, ok := s.store.buckets[name]; ok {
		return fmt.Errorf("gcsrapidtest: bucket %q already exists", name)
	}
	s.store.buckets[name] = &bucket{name: name, zonal: zonal, created: time.Now().UTC(), objects: map[string]*object{}}
	return nil
}

// BytesInUse reports the object data held in memory, counted against MaxBytes.
func (s *Server) BytesInUse() int64 {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	return s.store.used
}

// delay sleeps for a draw from d, or until the RPC is cancelled.
func (s *Server) delay(ctx context.Context, d latency.Dist) error {
	return s.sleep(ctx, s.sampler.Sample(d))
}

// share is n bytes' share of a draw from a per-MiB distribution.
func (s *Server) share(d latency.Dist, n int64) time.Duration {
	if n <= 0 || d.IsZero() {
		return 0
	}
	return time.Duration(float64(s.sampler.Sample(d)) * float64(n) / (1 << 20))
}

// sleep waits once for the sum of an operation's delays: timers are coarse
// (about 1 ms on a busy VM), so two short sleeps would cost far more than
// one of their total.
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	s.countDelay(d)
	if err := latency.Sleep(ctx, d); err != nil {
		return status.FromContextError(err).Err()
	}
	return nil
}

// countDelay counts a delay the profile imposed (Stats.Delays, Delayed).
func (s *Server) countDelay(d time.Duration) {
	if d > 0 {
		s.stats.delays.Add(1)
		s.stats.delayed.Add(int64(d))
	}
}

type unaryHandler struct {
	in string
	fn func(s *Server, ctx context.Context, req msg) (msg, error)
}

var unaryHandlers = map[string]unaryHandler{
	"GetBucket":           {"GetBucketRequest", (*Server).getBucket},
	"GetObject":           {"GetObjectRequest", (*Server).getObject},
	"ListObjects":         {"ListObjectsRequest", (*Server).listObjects},
	"DeleteObject":        {"DeleteObjectRequest", (*Server).deleteObject},
	"UpdateObject":        {"UpdateObjectRequest", (*Server).updateObject},
	"RewriteObject":       {"RewriteObjectRequest", (*Server).rewriteObject},
	"StartResumableWrite": {"StartResumableWriteRequest", (*Server).startResumableWrite},
	"QueryWriteStatus":    {"QueryWriteStatusRequest", (*Server).queryWriteStatus},
	"MoveObject":          {"MoveObjectRequest", (*Server).moveObject},
}

// dispatch serves every google.storage.v2.Storage method through the
// generic stream API, decoding requests into the message types the storage
// module registered.
func (s *Server) dispatch(_ any, stream grpc.ServerStream) (err error) {
	full, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method in stream")
	}
	svc, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if svc != storageService {
		return status.Errorf(codes.Unimplemented, "unknown service %s", svc)
	}
	s.stats.call(method)
	release, err := s.conns.enter(stream.Context(), s.opts.MaxStreamsPerConn)
	if err != nil {
		s.stats.refused.Add(1)
		return err
	}
	defer release()
	if err := s.transient.next(method); err != nil {
		s.stats.transient.Add(1)
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			// A malformed request must never take the test process down.
			err = status.Errorf(codes.Internal, "gcsrapidtest: %s panicked: %v", method, r)
		}
	}()
	if method == "BidiWriteObject" || method == "BidiReadObject" {
		if err := s.redirects.check(stream, method); err != nil {
			return err
		}
	}
	f, hit := s.faults.next(method)
	if hit && f.AfterMessages == 0 {
		return f.err(method)
	}
	if hit {
		stream = &faultStream{ServerStream: stream, left: f.AfterMessages, err: f.err(method)}
	}
	switch method {
	case "BidiWriteObject":
		return s.bidiWriteObject(stream)
	case "WriteObject":
		return s.writeObject(stream)
	case "BidiReadObject":
		return s.bidiReadObject(stream)
	case "ReadObject":
		return s.readObject(stream)
	}
	h, ok := unaryHandlers[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "gcsrapidtest does not implement %s", method)
	}
	req := newMsg(h.in)
	if err := stream.RecvMsg(req.proto()); err != nil {
		return err
	}
	resp, err := h.fn(s, stream.Context(), req)
	if err != nil {
		return err
	}
	return stream.SendMsg(resp.proto())
}

// checkRoutingHeader verifies that a stream's x-goog-request-params names
// the bucket of its first message, as the real front end requires to route
// a bidi stream before it reads the body.
func checkRoutingHeader(ctx context.Context, bucketRes string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("x-goog-request-params")
	if len(vals) == 0 {
		return status.Error(codes.InvalidArgument, "missing x-goog-request-params routing header")
	}
	for _, v := range vals {
		for _, kv := range strings.Split(v, "&") {
			k, val, _ := strings.Cut(kv, "=")
			if k != "bucket" {
				continue
			}
			if u, err := url.QueryUnescape(val); err == nil {
				val = u
			}
			if val != bucketRes {
				return status.Errorf(codes.InvalidArgument, "x-goog-request-params bucket %q does not match request bucket %q", val, bucketRes)
			}
			return nil
		}
	}
	return status.Error(codes.InvalidArgument, "x-goog-request-params has no bucket")
}
