package gcsrapid

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// A pipelined append stream drives BidiWriteObject itself, below
// storage.Writer, whose Flush waits for its reply before the next Write:
// here each Send is one message carrying its bytes, a flush and a state
// lookup, sent at once, and the service's replies (one per flush, in order,
// each with the persisted size) acknowledge the Sends as they arrive. The
// protocol allows several flushes in flight; the client library's Writer
// does not use it.
//
// The stream speaks google.storage.v2 through the message types the storage
// package registers (its generated stubs are internal), on a connection of
// the Store's own (Options.StreamDial), each holding at most
// MaxStreamsPerConn streams, as the service's front ends allow.

const bidiWriteMethod = "/google.storage.v2.Storage/BidiWriteObject"

var bidiWriteDesc = &grpc.StreamDesc{StreamName: "BidiWriteObject", ClientStreams: true, ServerStreams: true}

// maxRedirects bounds how many times opening a stream follows the service's
// redirect to another front end.
const maxRedirects = 3

var crc32cTable = crc32.MakeTable(crc32.Castagnoli)

// pb is a google.storage.v2 message handled by field name.
type pb struct{ m protoreflect.Message }

func newPB(name string) pb {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("google.storage.v2." + name))
	if err != nil {
		// The storage package registers these types when it is imported,
		// which this package does: a miss is a programming error.
		panic(fmt.Sprintf("gcsrapid: message %s is not registered: %v", name, err))
	}
	return pb{mt.New()}
}

func (x pb) fd(name string) protoreflect.FieldDescriptor {
	fd := x.m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("gcsrapid: %s has no field %s", x.m.Descriptor().FullName(), name))
	}
	return fd
}

func (x pb) set(name string, v any) {
	var val protoreflect.Value
	switch v := v.(type) {
	case pb:
		val = protoreflect.ValueOfMessage(v.m)
	default:
		val = protoreflect.ValueOf(v)
	}
	x.m.Set(x.fd(name), val)
}

func (x pb) sub(name string) pb { return pb{x.m.Mutable(x.fd(name)).Message()} }

func (x pb) has(name string) bool { return x.m.Has(x.fd(name)) }

func (x pb) get(name string) protoreflect.Value { return x.m.Get(x.fd(name)) }

func (x pb) msg(name string) pb { return pb{x.get(name).Message()} }

// persistedSize is the size a BidiWriteObjectResponse reports.
func persistedSize(r pb) (int64, bool) {
	switch {
	case r.has("persisted_size"):
		return r.get("persisted_size").Int(), true
	case r.has("resource"):
		return r.msg("resource").get("size").Int(), true
	}
	return 0, false
}

// dataMsg is a message of p at off; the last message of a Send flushes and
// asks for the persisted size.
func dataMsg(off int64, p []byte, flush bool) pb {
	r := newPB("BidiWriteObjectRequest")
	r.set("write_offset", off)
	if len(p) > 0 {
		cd := r.sub("checksummed_data")
		cd.set("content", p)
		cd.set("crc32c", crc32.Checksum(p, crc32cTable))
	}
	if flush {
		r.set("flush", true)
		r.set("state_lookup", true)
	}
	return r
}

// pipeStream is an appendable object written on a BidiWriteObject stream
// of its own (see blob.PipelinedAppendStream).
type pipeStream struct {
	s      *Store
	key    string
	cs     grpc.ClientStream
	cancel context.CancelFunc

	// sendMu orders Sends: a Send's offset, its place among the waiters
	// and its messages on the stream go together.
	sendMu sync.Mutex
	mu     sync.Mutex
	size   int64    // bytes sent
	waits  []waiter // Sends not yet acknowledged, oldest first
	err    error    // what failed the stream; every later Send fails with it
	closed bool
}

type waiter struct {
	end  int64
	done func(error)
	stop func() bool // stops the watch on the Send's context
}

var _ blob.PipelinedAppendStream = (*pipeStream)(nil)

// openPipe opens a BidiWriteObject stream whose first message is first and
// returns it with the service's first reply. A redirect to another front
// end is followed with the routing token it carries: first is rebuilt by
// retry, given the redirect's detail.
func (s *Store) openPipe(ctx context.Context, op, key string, first pb, retry func(redirect pb) pb, kind func(error) error) (grpc.ClientStream, context.CancelFunc, pb, error) {
	token := ""
	for attempt := 0; ; attempt++ {
		params := "appendable=true&bucket=" + url.QueryEscape(s.bucketRes())
		if token != "" {
			params += "&routing_token=" + token
		}
		conn, release, err := s.streamConns.acquire()
		if err != nil {
			return nil, nil, pb{}, &blob.Error{Op: op, Key: key, Err: fmt.Errorf("gcsrapid: append stream connection: %w", err)}
		}
		sctx, stop := context.WithCancel(metadata.AppendToOutgoingContext(s.bgCtx, "x-goog-request-params", params))
		var once sync.Once
		// Ending the stream gives its place on the connection back.
		cancel := func() { once.Do(func() { stop(); release() }) }
		var cs grpc.ClientStream
		reply := newPB("BidiWriteObjectResponse")
		err = untilDone(ctx, cancel, func() error {
			var err error
			if cs, err = conn.NewStream(sctx, bidiWriteDesc, bidiWriteMethod); err != nil {
				return err
			}
			if err := cs.SendMsg(first.m.Interface()); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			// An EOF from SendMsg means the stream ended: RecvMsg says why.
			return cs.RecvMsg(reply.m.Interface())
		})
		if err == nil {
			return cs, cancel, reply, nil
		}
		cancel()
		if r, ok := redirected(err); ok && attempt < maxRedirects {
			token = r.get("routing_token").String()
			first = retry(r)
			continue
		}
		return nil, nil, pb{}, driver.WrapError(op, key, err, kind)
	}
}

// redirected returns the BidiWriteObjectRedirectedError detail of an
// ABORTED status.
func redirected(err error) (pb, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Aborted {
		return pb{}, false
	}
	for _, d := range st.Proto().GetDetails() {
		r := newPB("BidiWriteObjectRedirectedError")
		if d.MessageIs(r.m.Interface()) && d.UnmarshalTo(r.m.Interface()) == nil && r.has("routing_token") {
			return r, true
		}
	}
	return pb{}, false
}

func (s *Store) bucketRes() string { return "projects/_/buckets/" + s.name }

// createPipe creates key as an appendable object holding data and keeps
// its stream for pipelined appends.
func (s *Store) createPipe(ctx context.Context, key string, data []byte) (*pipeStream, error) {
	first := dataMsg(0, data, true)
	spec := first.sub("write_object_spec")
	res := spec.sub("resource")
	res.set("bucket", s.bucketRes())
	res.set("name", key)
	spec.set("appendable", true)
	spec.set("if_generation_match", int64(0))
	// Redirected before the service applied it, the create is sent again
	// (its condition makes a repeat fail, never a second object).
	retry := func(pb) pb { return first }
	cs, cancel, reply, err := s.openPipe(ctx, driver.OpWrite, key, first, retry, driver.ClassifyWrite(classify, blob.IfNotExist()))
	if err != nil {
		return nil, err
	}
	a := &pipeStream{s: s, key: key, cs: cs, cancel: cancel, size: int64(len(data))}
	if n, ok := persistedSize(reply); !ok || n != int64(len(data)) {
		a.Close()
		return nil, blob.Errorf(driver.OpWrite, key, nil, "gcsrapid: the service persisted %d bytes of a create of %d", n, len(data))
	}
	go a.receive()
	return a, nil
}

// takeOverPipe takes over generation gen of key, unfinalized, for
// pipelined appends.
func (s *Store) takeOverPipe(ctx context.Context, key string, gen int64) (*pipeStream, error) {
	spec := func(token string, handle []byte) pb {
		r := newPB("BidiWriteObjectRequest")
		sp := r.sub("append_object_spec")
		sp.set("bucket", s.bucketRes())
		sp.set("object", key)
		sp.set("generation", gen)
		if token != "" {
			sp.set("routing_token", token)
		}
		if handle != nil {
			sp.sub("write_handle").set("handle", handle)
		}
		r.set("state_lookup", true)
		return r
	}
	retry := func(r pb) pb {
		var handle []byte
		if r.has("write_handle") {
			handle = r.msg("write_handle").get("handle").Bytes()
		}
		return spec(r.get("routing_token").String(), handle)
	}
	cs, cancel, reply, err := s.openPipe(ctx, driver.OpAppend, key, spec("", nil), retry, classify)
	if err != nil {
		return nil, err
	}
	n, ok := persistedSize(reply)
	a := &pipeStream{s: s, key: key, cs: cs, cancel: cancel, size: n}
	if !ok {
		a.Close()
		return nil, blob.Errorf(driver.OpAppend, key, nil, "gcsrapid: the service's reply to a takeover has no size")
	}
	go a.receive()
	return a, nil
}

// receive acknowledges the Sends as the service's replies come: one reply
// per flush, in order.
func (a *pipeStream) receive() {
	for {
		r := newPB("BidiWriteObjectResponse")
		if err := a.cs.RecvMsg(r.m.Interface()); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("gcsrapid: the service ended the stream")
			}
			a.fail(driver.WrapError(driver.OpAppend, a.key, err, classify))
			return
		}
		n, _ := persistedSize(r)
		a.mu.Lock()
		if len(a.waits) == 0 {
			a.mu.Unlock()
			a.fail(blob.Errorf(driver.OpAppend, a.key, nil, "gcsrapid: a reply that no flush asked for (persisted size %d)", n))
			return
		}
		w := a.waits[0]
		if n < w.end {
			a.mu.Unlock()
			a.fail(blob.Errorf(driver.OpAppend, a.key, nil, "gcsrapid: the service persisted %d bytes, expected %d", n, w.end))
			return
		}
		if n > a.size {
			// More than this stream has sent: another writer's bytes (a
			// takeover), which must never acknowledge this stream's.
			sent := a.size
			a.mu.Unlock()
			a.fail(blob.Errorf(driver.OpAppend, a.key, blob.ErrPrecondition, "gcsrapid: the service persisted %d bytes, more than the %d this stream wrote: another writer appended", n, sent))
			return
		}
		a.waits = a.waits[1:]
		a.mu.Unlock()
		w.stop()
		w.done(nil)
	}
}

// fail makes err the stream's error, fails every Send in flight with it
// and ends the stream.
func (a *pipeStream) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	err = a.err
	waits := a.waits
	a.waits = nil
	a.mu.Unlock()
	for _, w := range waits {
		w.stop()
		w.done(err)
	}
	a.cancel()
}

func (a *pipeStream) Send(ctx context.Context, p []byte, done func(error)) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	a.mu.Lock()
	if a.err == nil && a.s.life.Closed() {
		a.err = driver.ClosedError(driver.OpAppend, a.key)
	}
	if a.err != nil {
		err := a.err
		a.mu.Unlock()
		return err
	}
	off := a.size
	a.size += int64(len(p))
	stop := context.AfterFunc(ctx, func() { a.fail(driver.WrapError(driver.OpAppend, a.key, ctx.Err(), classify)) })
	a.waits = append(a.waits, waiter{a.size, done, stop})
	a.mu.Unlock()
	for {
		n := min(len(p), maxMessage)
		if err := a.cs.SendMsg(dataMsg(off, p[:n], n == len(p)).m.Interface()); err != nil {
			// An EOF means the stream ended; the receiver learns why
			// and fails the Sends in flight, this one included.
			if !errors.Is(err, io.EOF) {
				a.fail(driver.WrapError(driver.OpAppend, a.key, err, classify))
			}
			return nil
		}
		off, p = off+int64(n), p[n:]
		if len(p) == 0 {
			return nil
		}
	}
}

// Append sends p and waits for it; if ctx ends first the stream fails, as
// storage.Writer's does.
func (a *pipeStream) Append(ctx context.Context, p []byte) error {
	return blob.SendAndWait(ctx, a, p)
}

func (a *pipeStream) Size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.size
}

// Close ends the stream without finalizing the object, failing the Sends
// still in flight (their bytes may be durable or not).
func (a *pipeStream) Close() error {
	a.mu.Lock()
	closed := a.closed
	a.closed = true
	a.mu.Unlock()
	if !closed {
		a.fail(driver.ClosedError(driver.OpAppend, a.key))
	}
	return nil
}

// pipelines reports whether the Store's append streams are pipelined.
func (s *Store) pipelines() bool { return s.opts.StreamDial != nil }

// connPool holds the connections of pipelined append streams, dialing
// another when those it has hold per streams each.
type connPool struct {
	dial func() (*grpc.ClientConn, error)
	per  int

	mu     sync.Mutex
	conns  []*grpc.ClientConn
	counts []int
	closed bool
}

// acquire returns a connection with room for one more stream, and the
// function that gives the room back.
func (p *connPool) acquire() (grpc.ClientConnInterface, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, errors.New("the store is closed")
	}
	i := slices.IndexFunc(p.counts, func(n int) bool { return n < p.per })
	if i < 0 {
		c, err := p.dial()
		if err != nil {
			return nil, nil, err
		}
		p.conns, p.counts = append(p.conns, c), append(p.counts, 0)
		i = len(p.conns) - 1
	}
	p.counts[i]++
	return p.conns[i], func() {
		p.mu.Lock()
		p.counts[i]--
		p.mu.Unlock()
	}, nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
}
