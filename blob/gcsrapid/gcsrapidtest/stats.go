package gcsrapidtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Stats is a snapshot of what clients asked the server to do, so a test can
// assert exactly how many metadata operations a driver made.
type Stats struct {
	// ObjectsCreated counts new object generations: appendable creates,
	// one-shot and resumable writes, and rewrites.
	ObjectsCreated int64
	// ObjectsFinalized counts objects finalized, including non-appendable
	// objects, which are finalized when written.
	ObjectsFinalized int64
	// Flushes counts flush or state-lookup requests on appendable objects.
	Flushes int64
	// Takeovers counts appendable objects reopened by a new writer.
	Takeovers int64
	// ObjectsDeleted counts successful DeleteObject calls.
	ObjectsDeleted int64
	// BytesWritten counts object data accepted (after deduplicating resent bytes).
	BytesWritten int64
	// BytesRead counts object data sent.
	BytesRead int64
	// Calls counts RPCs by method name ("BidiWriteObject", "GetObject", ...),
	// including calls that failed or had a fault injected.
	Calls map[string]int64
	// Connections counts the client connections seen; PeakStreamsPerConn is
	// the most RPCs ever in flight on one of them; StreamsRefused counts the
	// RPCs refused for exceeding MaxStreamsPerConn.
	Connections, PeakStreamsPerConn int
	// StreamsOpen counts the RPCs in flight now, on every connection.
	StreamsOpen    int
	StreamsRefused int64
	// TransientFaults counts the calls failed by Options.TransientFaults.
	TransientFaults int64
	// WriteBreaks counts the write streams a WriteBreak failed;
	// ReadStreamsEnded the read streams ended by ReadStreamLifetime;
	// MessagesRefused the write messages over MaxWriteMessage and the
	// takeovers without a generation that were refused.
	WriteBreaks, ReadStreamsEnded, MessagesRefused int64
	// Redirects counts the streams answered with a redirect, and
	// RedirectsFollowed the streams that replayed its routing token.
	Redirects, RedirectsFollowed int64
	// Delays counts the waits the latency profile imposed, and Delayed is
	// their total as drawn (a wait cut short by a cancelled RPC included in
	// full): a test can check that a profile was applied, or that the zero
	// profile delayed nothing, without timing RPCs.
	Delays  int64
	Delayed time.Duration
	// FlushesInFlight counts the flushes that arrived while the reply to
	// an earlier flush of their stream was still due: pipelined flushes.
	FlushesInFlight int64
}

type counters struct {
	created, finalized, flushes, takeovers, deleted, written, read atomic.Int64
	refused, transient                                             atomic.Int64
	breaks, readsEnded, msgRefused                                 atomic.Int64
	delays, delayed                                                atomic.Int64
	flushesInFlight                                                atomic.Int64

	mu    sync.Mutex
	calls map[string]*atomic.Int64
}

func (c *counters) call(method string) {
	c.mu.Lock()
	n, ok := c.calls[method]
	if !ok {
		n = new(atomic.Int64)
		c.calls[method] = n
	}
	c.mu.Unlock()
	n.Add(1)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		ObjectsCreated:   c.created.Load(),
		ObjectsFinalized: c.finalized.Load(),
		Flushes:          c.flushes.Load(),
		Takeovers:        c.takeovers.Load(),
		ObjectsDeleted:   c.deleted.Load(),
		BytesWritten:     c.written.Load(),
		BytesRead:        c.read.Load(),
		Calls:            map[string]int64{},
		StreamsRefused:   c.refused.Load(),
		TransientFaults:  c.transient.Load(),
		WriteBreaks:      c.breaks.Load(),
		ReadStreamsEnded: c.readsEnded.Load(),
		MessagesRefused:  c.msgRefused.Load(),
		Delays:           c.delays.Load(),
		Delayed:          time.Duration(c.delayed.Load()),
		FlushesInFlight:  c.flushesInFlight.Load(),
	}
	s.redirects.mu.Lock()
	st.Redirects, st.RedirectsFollowed = s.redirects.sent, s.redirects.followed
	s.redirects.mu.Unlock()
	s.conns.mu.Lock()
	st.Connections, st.PeakStreamsPerConn = s.conns.seen, s.conns.peak
	for _, n := range s.conns.active {
		st.StreamsOpen += n
	}
	s.conns.mu.Unlock()
	c.mu.Lock()
	for k, v := range c.calls {
		st.Calls[k] = v.Load()
	}
	c.mu.Unlock()
	return st
}

// Fault makes an RPC fail, to test a client's retries. Faults are
// deterministic: they fire on a given call number of a method.
type Fault struct {
	// Method is the RPC name, such as "BidiWriteObject" or "GetObject".
	Method string
	// Call is the 1-based number of the call of Method that fails, counted
	// from when the fault is injected. Zero means every call.
	Call int
	// Code is the status code returned (codes.Unavailable if zero).
	Code codes.Code
	// AfterMessages, for streams, lets this many request messages through
	// and fails the next receive: a stream broken mid-write. Zero fails the
	// call before it reads anything.
	AfterMessages int
	// Message is the status message; a default names the fault.
	Message string
}

func (f Fault) err(method string) error {
	code := f.Code
	if code == codes.OK {
		code = codes.Unavailable
	}
	m := f.Message
	if m == "" {
		m = fmt.Sprintf("gcsrapidtest: injected fault on %s", method)
	}
	return status.Error(code, m)
}

type armedFault struct {
	Fault
	seen int
}

type faultTable struct {
	mu     sync.Mutex
	faults []*armedFault
}

// InjectFault arms f. Faults on the same method are checked in the order
// injected; the first that matches a call fires.
func (s *Server) InjectFault(f Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults = append(s.faults.faults, &armedFault{Fault: f})
}

// ClearFaults disarms every fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults = nil
}

// next counts a call of method against every armed fault and returns the
// one that fires, if any. A fault with a call number fires once.
func (t *faultTable) next(method string) (Fault, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var fired *armedFault
	for _, f := range t.faults {
		if f.Method != method {
			continue
		}
		f.seen++
		if fired == nil && (f.Call == 0 || f.seen == f.Call) {
			fired = f
		}
	}
	if fired == nil {
		return Fault{}, false
	}
	return fired.Fault, true
}

// faultStream fails RecvMsg after left messages, as if the connection broke.
type faultStream struct {
	grpc.ServerStream
	left int
	err  error
}

func (f *faultStream) RecvMsg(m any) error {
	if f.left <= 0 {
		return f.err
	}
	f.left--
	return f.ServerStream.RecvMsg(m)
}

var _ grpc.ServerStream = (*faultStream)(nil)
