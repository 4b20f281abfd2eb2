package gcsrapidtest

import (
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sources of the real-service behaviours the strictness switches model.
const (
	// SourceTestbench is Google's storage-testbench, whose fault injection
	// fails write streams part way (after the appendable object exists, so
	// an empty or partial object is left) and which ends read streams after
	// 10 s.
	SourceTestbench = "Google storage-testbench (fault injection; read streams cancelled after 10 s)"
	// SourceRapidProbes is the WAL probe suite run against real Rapid
	// buckets (June 2026): a write message over 2 MiB is refused with
	// RESOURCE_EXHAUSTED, a takeover with generation 0 is refused with
	// INVALID_ARGUMENT, and the durable tail of an open object is the write
	// response's persisted_size.
	SourceRapidProbes = "WAL probe suite on real GCS Rapid buckets, June 2026"
)

// MaxWriteMessage is the most object data the real Rapid service accepts in
// one BidiWriteObject message (SourceRapidProbes; the client libraries
// send at most this much).
const MaxWriteMessage = 2 << 20

// BreakPoint says where a WriteBreak fails an appendable write stream.
type BreakPoint int

const (
	// BreakAfterMessages fails the stream when message N+1 arrives, after
	// N messages were applied (the first of which created the object or
	// took it over). The bytes it received since its last flush are lost:
	// the service persists an appendable object's data at flushes, so a
	// stream that breaks leaves the object as of its last flush (empty, if
	// it was never flushed).
	BreakAfterMessages BreakPoint = iota + 1
	// BreakAfterFlush fails the stream right after it answered its Nth
	// flush: what was flushed is durable and acknowledged, and the
	// stream's next use finds it broken.
	BreakAfterFlush
	// BreakBeforeReply applies the stream's Nth flush (its bytes are
	// persisted, and a create is done) and then fails the stream instead
	// of answering: the client cannot tell whether its write happened, and
	// if this was the message that created the object, it never learns the
	// generation or write handle.
	BreakBeforeReply
)

// WriteBreak fails appendable write streams (BidiWriteObject creating or
// taking over an appendable object) with UNAVAILABLE part way, as the
// service does when a front end or the connection fails (SourceTestbench).
// Faults injected with InjectFault act before a call does anything; a
// WriteBreak acts after the object exists.
type WriteBreak struct {
	// At is where the stream breaks.
	At BreakPoint
	// N counts messages for BreakAfterMessages and flushes for the others
	// (0 means 1).
	N int
	// Streams is how many streams break, the first to reach the point
	// (0: every stream that reaches it).
	Streams int
	// Code is the status the stream ends with (codes.Unavailable if zero).
	Code codes.Code
	// CreatesOnly limits the break to streams that create their object,
	// leaving takeovers and resumed streams alone.
	CreatesOnly bool
	// Redirect ends the stream ABORTED with a BidiWriteObjectRedirectedError
	// instead (Code is ignored): a routing token to replay, the object's
	// write handle and its generation, as a zonal front end does when the
	// object is served from elsewhere mid-stream (SourceRapidProbes). The
	// client resumes the stream as the same writer, which revokes no other
	// writer's stream. OmitGeneration leaves the generation out, so that a
	// stream redirected before it learned its generation resumes by write
	// handle alone.
	Redirect       bool
	OmitGeneration bool
}

func (p BreakPoint) String() string {
	switch p {
	case BreakAfterMessages:
		return "BreakAfterMessages"
	case BreakAfterFlush:
		return "BreakAfterFlush"
	case BreakBeforeReply:
		return "BreakBeforeReply"
	}
	return "BreakPoint(" + strconv.Itoa(int(p)) + ")"
}

func (b WriteBreak) n() int {
	if b.N <= 0 {
		return 1
	}
	return b.N
}

func (b WriteBreak) err() error {
	code := b.Code
	if code == codes.OK {
		code = codes.Unavailable
	}
	return status.Errorf(code, "gcsrapidtest: write stream broken (%v, n %d)", b.At, b.n())
}

type armedBreak struct {
	WriteBreak
	fired int
}

// breakTable holds the armed WriteBreaks.
type breakTable struct {
	mu     sync.Mutex
	breaks []*armedBreak
}

func (t *breakTable) add(b WriteBreak) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.breaks = append(t.breaks, &armedBreak{WriteBreak: b})
}

// fire reports whether w's stream, at point at having reached count there,
// breaks, and with what error; a break that fires counts one stream.
func (t *breakTable) fire(at BreakPoint, count int, w *writeSession) error {
	t.mu.Lock()
	var fired *WriteBreak
	for _, b := range t.breaks {
		if b.At != at || b.n() != count || (b.Streams > 0 && b.fired >= b.Streams) || (b.CreatesOnly && !w.created) {
			continue
		}
		b.fired++
		fired = &b.WriteBreak
		break
	}
	t.mu.Unlock()
	switch {
	case fired == nil:
		return nil
	case fired.Redirect:
		gen := w.generation
		if fired.OmitGeneration {
			gen = 0
		}
		return w.s.redirects.redirectWrite(w.wHandle, gen)
	}
	return fired.err()
}

// BreakWrites arms b, in addition to Options.WriteBreaks.
func (s *Server) BreakWrites(b WriteBreak) { s.breaks.add(b) }

// ClearBreaks disarms every WriteBreak.
func (s *Server) ClearBreaks() {
	s.breaks.mu.Lock()
	defer s.breaks.mu.Unlock()
	s.breaks.breaks = nil
}
