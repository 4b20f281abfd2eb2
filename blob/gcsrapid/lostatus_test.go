package gcsrapid_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// answerFirst makes the server's answer to a chosen read stream arrive
// before the client sends that stream's request: it holds the stream's first
// SendMsg until the response headers (or, for a stream the server failed at
// once, its status) are in. A server that fails a stream before reading it,
// as a front end shedding load does, has then ended it when the request goes
// out, and gRPC's SendMsg returns io.EOF, leaving the status for RecvMsg.
// Unheld, which comes first is a race that a loaded machine loses now and
// then; held, it is lost every time.
type answerFirst struct {
	mu     sync.Mutex
	seen   int
	target int // the number of the BidiReadObject stream to hold; 0: none
	held   atomic.Int64
}

// hold arms the nth BidiReadObject stream from now.
func (a *answerFirst) hold(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.target = a.seen + n
}

func (a *answerFirst) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || !strings.HasSuffix(method, "/BidiReadObject") {
		return cs, err
	}
	a.mu.Lock()
	a.seen++
	hit := a.seen == a.target
	a.mu.Unlock()
	if !hit {
		return cs, nil
	}
	return &heldStream{ClientStream: cs, held: &a.held}, nil
}

type heldStream struct {
	grpc.ClientStream
	held *atomic.Int64
	once sync.Once
}

func (s *heldStream) SendMsg(m any) error {
	s.once.Do(func() {
		// Header returns once the server has answered: with headers, or
		// with its status if it failed the stream without reading.
		s.ClientStream.Header()
		s.held.Add(1)
	})
	return s.ClientStream.SendMsg(m)
}

// newHeldStore is newStore with a client whose read streams h can hold.
func newHeldStore(ctx context.Context, t *testing.T, srv *gcsrapidtest.Server, h *answerFirst, opts gcsrapid.Options) *gcsrapid.Store {
	t.Helper()
	return testkit.GCSRapid(t, srv, opts, option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(h.intercept)))
}

// A read stream that the service fails before reading its request (a
// transient UNAVAILABLE) while the client is still sending loses its status:
// the storage client returns io.EOF from opening the read. That is neither
// the end of an object nor an answer: the driver opens the read again, as it
// would have retried the UNAVAILABLE, and never hands the io.EOF on.
func TestReadOpenThatLostItsStatusIsRetried(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := newServer(t, p)
	var h answerFirst
	s := newHeldStore(ctx, t, srv, &h, gcsrapid.Options{
		CreatorOptions: pool.CreatorOptions{Capacity: 2, MinIdle: 2}, SweepInterval: -1, Retries: 2})
	if err := blob.Put(ctx, s, "k", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.CreateBytes(ctx, s, "log/", []byte("warm"), nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "log/", 2)
	pooled, err := blob.CreateBytes(ctx, s, "log/", []byte("0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Pools["log/"]; st.Hits == 0 {
		t.Fatalf("the write was not pooled: %+v", st)
	}
	waitReady(t, s, "log/", 2) // no pool work left to overlap the cases

	readAll := func(key string) error {
		got, err := blob.ReadAll(ctx, s, key)
		if err == nil && string(got) != map[string]string{"k": "hello", pooled: "0123456789"}[key] {
			t.Errorf("ReadAll(%q) = %q", key, got)
		}
		return err
	}
	for _, c := range []struct {
		name string
		// stream is the number of the op's read stream that loses its
		// status; streams is how many the op opens in all, counting the
		// one opened again.
		stream, streams int64
		op              func() error
		wantKind        error
	}{
		{"read", 1, 2, func() error { return readAll("k") }, nil},
		{"read of a missing object", 1, 2, func() error { return readAll("absent") }, blob.ErrNotFound},
		// A pooled write whose size reads zero (stale): the read, then the
		// probe that finds its bytes.
		{"read's visibility probe", 2, 3, func() error { return readAll(pooled) }, nil},
		{"stat's visibility probe", 1, 2, func() error {
			a, err := s.Stat(ctx, pooled)
			if err == nil && a.Size != 10 {
				t.Errorf("Stat(%q).Size = %d, want 10", pooled, a.Size)
			}
			return err
		}, nil},
		{"reader-at", 1, 2, func() error {
			ra, err := blob.OpenReaderAt(ctx, s, "k")
			if err != nil {
				return err
			}
			defer ra.Close()
			buf := make([]byte, 8)
			n, err := ra.ReadAt(buf, 1)
			if string(buf[:n]) != "ello" || err != io.EOF {
				t.Errorf("ReadAt(1) = %q, %v; want \"ello\", io.EOF", buf[:n], err)
			}
			return nil
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, held := srv.Stats(), h.held.Load()
			srv.InjectFault(gcsrapidtest.Fault{Method: "BidiReadObject", Call: int(c.stream), Code: codes.Unavailable})
			defer srv.ClearFaults()
			h.hold(int(c.stream))
			err := c.op()
			if c.wantKind == nil && err != nil || c.wantKind != nil && !errors.Is(err, c.wantKind) || errors.Is(err, io.EOF) {
				t.Errorf("got %v, want kind %v", err, c.wantKind)
			}
			after := srv.Stats()
			if h.held.Load() != held+1 {
				t.Errorf("%d streams held, want 1: the case did not meet the fault as planned", h.held.Load()-held)
			}
			if d := after.Calls["BidiReadObject"] - before.Calls["BidiReadObject"]; d != c.streams {
				t.Errorf("%d read streams, want %d", d, c.streams)
			}
		})
	}
}

// With no retries, a read whose open lost its status fails, as the
// UNAVAILABLE would have: with an error that says so, never with an io.EOF
// that a caller would take for the end of the data.
func TestReadOpenThatLostItsStatusWithoutRetries(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	var h answerFirst
	s := newHeldStore(ctx, t, srv, &h, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}, Retries: -1})
	if err := blob.Put(ctx, s, "k", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().Calls["BidiReadObject"]
	srv.InjectFault(gcsrapidtest.Fault{Method: "BidiReadObject", Call: 1, Code: codes.Unavailable})
	h.hold(1)
	_, err := blob.ReadAll(ctx, s, "k")
	var be *blob.Error
	if !errors.As(err, &be) || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "status was lost") {
		t.Errorf("ReadAll = %v, want a *blob.Error that says the status was lost, not io.EOF", err)
	}
	if h.held.Load() != 1 {
		t.Errorf("%d streams held, want 1", h.held.Load())
	}
	if d := srv.Stats().Calls["BidiReadObject"] - before; d != 1 {
		t.Errorf("%d read streams, want 1 (no retries)", d)
	}
}
