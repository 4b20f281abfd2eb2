package gcsrapidtest

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zonalblob/zonalblob/blob/latency"
)

type writeMode int

const (
	modeAppend    writeMode = iota // appendable object, created or taken over
	modeOneShot                    // ordinary object written in one stream
	modeResumable                  // ordinary object in a StartResumableWrite session
)

// writeSession is the server side of one write stream.
type writeSession struct {
	s    *Server
	ctx  context.Context
	mode writeMode

	// modeAppend
	bucketName string
	objName    string
	generation int64
	wHandle    []byte
	replied    bool  // the first reply carries the resource and write handle
	unflushed  int64 // bytes since the last flush, charged per MiB at the flush
	// obj is the generation this session writes. Once its bytes are
	// persisted, a flush reports them even if a newer generation has
	// replaced it since (last writer wins; the earlier write still happened).
	obj *object
	// msgs counts the messages received, flushes the flushes applied;
	// persisted is the object's size at the stream's last flush (or when
	// it opened), what a WriteBreak leaves; flushed says the last message
	// applied was a flush (for BreakAfterFlush).
	msgs, flushes int
	persisted     int64
	persistedCRC  uint32 // the CRC32C of the first persisted bytes
	flushed       bool
	created       bool // the stream created its object (not a takeover)
	// bidi: replies come as flushes fall due (see replyQueue); arrived is
	// when the stream's bytes received so far have all arrived, due when
	// the reply to the message being handled is.
	bidi         bool
	arrived, due time.Time

	// modeOneShot
	spec      msg
	checksums msg
	buf       []byte
	reserved  int64

	// modeResumable
	up *upload

	finished bool
	final0   *object // the committed object, for WriteObject's reply
}

// bidiWriteObject serves BidiWriteObject. The first message selects the
// mode with write_object_spec (appendable or not), append_object_spec
// (takeover) or upload_id (resumable).
func (s *Server) bidiWriteObject(stream grpc.ServerStream) error {
	return s.serveWrite(stream, true)
}

// writeObject serves the client-streaming WriteObject: the same session
// without intermediate replies.
func (s *Server) writeObject(stream grpc.ServerStream) error {
	return s.serveWrite(stream, false)
}

func (s *Server) serveWrite(stream grpc.ServerStream, bidi bool) (err error) {
	ctx := stream.Context()
	reqName, respName := "BidiWriteObjectRequest", "BidiWriteObjectResponse"
	if !bidi {
		reqName, respName = "WriteObjectRequest", "WriteObjectResponse"
	}
	first := newMsg(reqName)
	if err := stream.RecvMsg(first.proto()); err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "write stream closed before its first message")
		}
		return err
	}
	if err := s.checkMessageSize(first); err != nil {
		return err
	}
	w := &writeSession{s: s, ctx: ctx, bidi: bidi}
	defer func() {
		if err != nil {
			w.abort()
		}
	}()
	if err := w.open(first, bidi); err != nil {
		return err
	}
	out := &replyQueue{s: s, stream: stream, bidi: bidi, w: w}
	var next func() (msg, error)
	if bidi {
		// The stream goes on receiving while replies wait to fall due, so
		// that a client may have several flushes in flight.
		stop := make(chan struct{})
		defer close(stop)
		in := receive(stream, reqName, stop)
		next = func() (msg, error) { return out.next(in) }
	} else {
		next = func() (msg, error) {
			req := newMsg(reqName)
			return req, stream.RecvMsg(req.proto())
		}
	}
	req := first
	for {
		if err := s.checkMessageSize(req); err != nil {
			return err
		}
		w.msgs++
		if w.mode == modeAppend && w.msgs > 1 {
			if err := s.breaks.fire(BreakAfterMessages, w.msgs-1, w); err != nil {
				w.dropUnflushed()
				s.stats.breaks.Add(1)
				return err
			}
		}
		w.due = time.Time{}
		reply, err := w.handle(req)
		if err != nil {
			return err
		}
		if reply.valid() {
			flushN := 0
			if w.mode == modeAppend && w.flushed {
				flushN = w.flushes
			}
			if err := out.add(reply, w.due, flushN); err != nil {
				return err
			}
		}
		if w.finished {
			if err := out.drain(); err != nil {
				return err
			}
			// The client half-closes right after finish_write; anything
			// else it sends is an error, as the service documents.
			_, err := next()
			if err == nil {
				return status.Error(codes.InvalidArgument, "message after finish_write")
			}
			if !errors.Is(err, io.EOF) {
				return err
			}
			if !bidi {
				return stream.SendMsg(w.final(respName).proto())
			}
			return nil
		}
		req, err = next()
		if errors.Is(err, io.EOF) {
			if err := out.drain(); err != nil {
				return err
			}
			return w.closeSend(bidi, stream, respName)
		}
		if err != nil {
			return err
		}
		if req.has("write_object_spec") || req.has("upload_id") || (bidi && req.has("append_object_spec")) {
			return status.Error(codes.InvalidArgument, "only the first message of a write stream may name the object")
		}
	}
}

type received struct {
	req msg
	err error
}

// receive reads a stream's messages in a goroutine of their own until one
// fails (io.EOF at the client's half-close) or stop is closed.
func receive(stream grpc.ServerStream, reqName string, stop <-chan struct{}) <-chan received {
	ch := make(chan received)
	go func() {
		for {
			req := newMsg(reqName)
			err := stream.RecvMsg(req.proto())
			select {
			case ch <- received{req, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// replyQueue sends a write stream's replies in order, each once it is due. A
// flush is due when its bytes have arrived (a stream's bytes arrive one
// after another at Profile.WritePerMiB) and its round trip (Profile.Flush)
// has passed; the round trips of flushes in flight overlap, as the
// service's do (it persists each flush while it receives the next), and
// are answered in order.
type replyQueue struct {
	s      *Server
	stream grpc.ServerStream
	bidi   bool
	w      *writeSession
	queue  []pendingReply
	last   time.Time // when the last reply queued is due
}

type pendingReply struct {
	r      msg
	due    time.Time
	flushN int // the stream's flush this answers, 0 if none
}

// add queues r, due no earlier than due and than the replies before it.
// A client-streaming write has no replies but the last; its delays were
// charged as they came.
func (o *replyQueue) add(r msg, due time.Time, flushN int) error {
	if !o.bidi {
		return nil
	}
	if err := o.sendDue(); err != nil {
		return err
	}
	if flushN > 0 && slices.ContainsFunc(o.queue, func(p pendingReply) bool { return p.flushN > 0 }) {
		o.s.stats.flushesInFlight.Add(1)
	}
	if due.Before(o.last) {
		due = o.last
	}
	o.last = due
	o.queue = append(o.queue, pendingReply{r, due, flushN})
	return o.sendDue()
}

// sendDue sends the replies that have fallen due; after the Nth flush's
// reply a BreakAfterFlush may fail the stream.
func (o *replyQueue) sendDue() error {
	now := time.Now()
	for len(o.queue) > 0 && !o.queue[0].due.After(now) {
		p := o.queue[0]
		o.queue = o.queue[1:]
		if err := o.stream.SendMsg(p.r.proto()); err != nil {
			return err
		}
		if p.flushN > 0 {
			if err := o.s.breaks.fire(BreakAfterFlush, p.flushN, o.w); err != nil {
				o.s.stats.breaks.Add(1)
				return err
			}
		}
	}
	return nil
}

// next returns the next message received, sending replies as they fall due
// while it waits.
func (o *replyQueue) next(in <-chan received) (msg, error) {
	for {
		if err := o.sendDue(); err != nil {
			return msg{}, err
		}
		var timer <-chan time.Time
		var t *time.Timer
		if len(o.queue) > 0 {
			t = time.NewTimer(time.Until(o.queue[0].due))
			timer = t.C
		}
		select {
		case r := <-in:
			if t != nil {
				t.Stop()
			}
			return r.req, r.err
		case <-timer:
		case <-o.stream.Context().Done():
			return msg{}, status.FromContextError(o.stream.Context().Err()).Err()
		}
	}
}

// drain sends every reply queued, each when it falls due.
func (o *replyQueue) drain() error {
	for len(o.queue) > 0 {
		if err := latency.Sleep(o.stream.Context(), time.Until(o.queue[0].due)); err != nil {
			return status.FromContextError(err).Err()
		}
		if err := o.sendDue(); err != nil {
			return err
		}
	}
	return nil
}

// open validates the first message and sets up the session.
func (w *writeSession) open(first msg, bidi bool) error {
	s := w.s
	switch {
	case first.has("write_object_spec"):
		spec := first.sub("write_object_spec")
		b, err := s.checkWriteSpec(spec)
		if err != nil {
			return err
		}
		if bidi {
			if err := checkRoutingHeader(w.ctx, bucketPrefix+b.name); err != nil {
				return err
			}
		}
		if spec.boolean("appendable") {
			if !b.zonal {
				return errRegionalNoAppendable(b.name)
			}
			return w.createAppendable(b.name, spec, first)
		}
		if b.zonal {
			return errZonalNeedsAppendable(b.name)
		}
		// Fail early on a precondition, as the real service does when the
		// stream opens; it is checked again at commit.
		s.store.mu.Lock()
		err = condsFrom(spec).check(b.objects[spec.sub("resource").str("name")])
		s.store.mu.Unlock()
		if err != nil {
			return err
		}
		w.mode, w.spec, w.checksums = modeOneShot, spec, first.sub("object_checksums")
		return nil
	case bidi && first.has("append_object_spec"):
		return w.takeover(first.sub("append_object_spec"))
	case first.has("upload_id"):
		s.store.mu.Lock()
		u, ok := s.store.uploads[first.str("upload_id")]
		s.store.mu.Unlock()
		if !ok {
			return status.Errorf(codes.NotFound, "upload %q not found", first.str("upload_id"))
		}
		if bidi {
			if err := checkRoutingHeader(w.ctx, bucketPrefix+u.bucket); err != nil {
				return err
			}
		}
		w.mode, w.up = modeResumable, u
		return nil
	}
	return status.Error(codes.InvalidArgument, "the first message of a write stream must set write_object_spec, append_object_spec or upload_id")
}

// createAppendable makes a new, unfinalized generation visible at once, which
// is what lets readers see data before the writer finalizes. Data carried by
// the first message is part of the new generation from the moment it is
// visible: one request is applied atomically, so a reader never sees a
// replaced object empty. (handle, run next on the same message, drops those
// bytes as already persisted.)
func (w *writeSession) createAppendable(bucketName string, spec, first msg) error {
	s := w.s
	if err := s.delay(w.ctx, s.opts.Profile.CreateAppendable); err != nil {
		return err
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, err := s.store.bucketLocked(bucketPrefix + bucketName)
	if err != nil {
		return err
	}
	name := spec.sub("resource").str("name")
	if err := condsFrom(spec).check(b.objects[name]); err != nil {
		return err
	}
	o := s.store.newObjectLocked(b, spec, true)
	o.writeHandle = newHandle()
	// Committing first frees the generation this one replaces, so the cap
	// counts only what is stored; the lock is still held, so readers see the
	// new generation only with its first message's data.
	s.store.commitLocked(b, o)
	if first.i64("write_offset") == 0 {
		p, err := data(first)
		if err != nil {
			return err
		}
		if err := s.store.reserve(int64(len(p))); err != nil {
			return err
		}
		o.data.append(p)
		o.crc = crc32.Update(o.crc, crc32cTable, p)
		s.stats.written.Add(int64(len(p)))
		w.unflushed += int64(len(p))
	}
	s.stats.created.Add(1)
	w.mode, w.bucketName, w.objName, w.generation, w.wHandle = modeAppend, b.name, name, o.generation, o.writeHandle
	w.obj, w.created = o, true
	return nil
}

// takeover reopens an unfinalized appendable object. A stream that presents
// the current write handle resumes the same writer (a client retry); any
// other stream becomes the writer, and the previous one fails on its next
// message.
func (w *writeSession) takeover(spec msg) error {
	s := w.s
	if err := checkRoutingHeader(w.ctx, spec.str("bucket")); err != nil {
		return err
	}
	if err := s.delay(w.ctx, s.opts.Profile.CreateAppendable); err != nil {
		return err
	}
	h := spec.sub("write_handle").bytes("handle")
	// A write handle names the generation it was issued for, so only a
	// takeover without one must name it.
	if s.opts.RefuseZeroGenerationTakeover && spec.i64("generation") == 0 && h == nil {
		s.stats.msgRefused.Add(1)
		return status.Errorf(codes.InvalidArgument, "append_object_spec of %q names no generation", spec.str("object"))
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, o, err := s.store.lookupLocked(spec.str("bucket"), spec.str("object"), spec.i64("generation"))
	if err != nil {
		return err
	}
	if spec.i64("generation") == 0 && h != nil && !bytes.Equal(h, o.writeHandle) {
		// The handle was issued for a generation that is no longer live,
		// or is not a handle at all.
		return status.Errorf(codes.FailedPrecondition, "write_handle of %q does not name its live generation", o.name)
	}
	if err := (conds{metaMatch: optI64(spec, "if_metageneration_match"), metaNotMatch: optI64(spec, "if_metageneration_not_match")}).check(o); err != nil {
		return err
	}
	if !o.appendable {
		return status.Errorf(codes.FailedPrecondition, "object %q is not appendable", o.name)
	}
	if o.finalized {
		return status.Errorf(codes.FailedPrecondition, "object %q generation %d is finalized; it cannot be appended to", o.name, o.generation)
	}
	if h == nil || !bytes.Equal(h, o.writeHandle) {
		o.writeHandle = newHandle()
		s.stats.takeovers.Add(1)
	}
	w.mode, w.bucketName, w.objName, w.generation, w.wHandle = modeAppend, b.name, o.name, o.generation, o.writeHandle
	w.obj, w.persisted, w.persistedCRC = o, o.data.size(), o.crc
	// The client blocks on this reply to learn where to append.
	w.replied = false
	return nil
}

// replacedLocked reports whether err says this session's generation is gone
// (replaced by a newer one, or deleted) while the message carries no new
// bytes for it: a flush of bytes persisted before that still succeeded.
// Only while this session was still the generation's writer when it went:
// after a takeover the bytes past this session's are the taker's, and a
// message over them is not a resend of its own.
func (w *writeSession) replacedLocked(err error, off int64, p []byte) bool {
	return status.Code(err) == codes.NotFound && w.writerOfObjLocked() && !w.obj.finalized &&
		off+int64(len(p)) <= w.obj.data.size()
}

// writerOfObjLocked reports whether this session is still the writer of
// its generation, live or replaced: no takeover issued another handle.
func (w *writeSession) writerOfObjLocked() bool {
	return w.obj != nil && bytes.Equal(w.obj.writeHandle, w.wHandle)
}

// appendTarget returns the session's object if this stream still owns it.
func (w *writeSession) appendTargetLocked() (*object, error) {
	b, o, err := w.s.store.lookupLocked(bucketPrefix+w.bucketName, w.objName, w.generation)
	_ = b
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(o.writeHandle, w.wHandle) {
		return nil, status.Errorf(codes.FailedPrecondition, "object %q was taken over by another writer", o.name)
	}
	if o.finalized {
		return nil, status.Errorf(codes.FailedPrecondition, "object %q generation %d is finalized; it cannot be appended to", o.name, o.generation)
	}
	return o, nil
}

// data validates and returns a message's payload.
func data(req msg) ([]byte, error) {
	if req.i64("write_offset") < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative write_offset %d", req.i64("write_offset"))
	}
	cd := req.sub("checksummed_data")
	p := cd.bytes("content")
	if cd.has("crc32c") && crcOf(p) != cd.u32("crc32c") {
		return nil, status.Errorf(codes.InvalidArgument, "checksummed_data crc32c %d does not match the content (%d)", cd.u32("crc32c"), crcOf(p))
	}
	return p, nil
}

// newBytes returns the part of p at off that lies past size. Resent bytes
// (off < size) are dropped, as the real service does for a retried chunk; a
// gap (off > size) is an error.
func newBytes(p []byte, off, size int64) ([]byte, error) {
	if off > size {
		return nil, status.Errorf(codes.OutOfRange, "write_offset %d is past the persisted size %d", off, size)
	}
	skip := size - off
	if skip >= int64(len(p)) {
		return nil, nil
	}
	return p[skip:], nil
}

// handle applies one request and returns the reply to send, if any.
func (w *writeSession) handle(req msg) (msg, error) {
	if w.finished {
		return msg{}, status.Error(codes.InvalidArgument, "message after finish_write")
	}
	p, err := data(req)
	if err != nil {
		return msg{}, err
	}
	switch w.mode {
	case modeAppend:
		return w.handleAppend(req, p)
	case modeOneShot:
		return w.handleOneShot(req, p)
	default:
		return w.handleResumable(req, p)
	}
}

func (w *writeSession) handleAppend(req msg, p []byte) (msg, error) {
	s := w.s
	w.flushed = false
	off := req.i64("write_offset")
	s.store.mu.Lock()
	o, err := w.appendTargetLocked()
	if w.replacedLocked(err, off, p) {
		// Nothing new to append to a generation that was replaced after its
		// bytes were persisted: the flush below reports them.
		o, err = w.obj, nil
	}
	if err == nil {
		p, err = newBytes(p, off, o.data.size())
	}
	if err == nil {
		err = s.store.reserve(int64(len(p)))
	}
	if err == nil && len(p) > 0 {
		o.data.append(p)
		o.crc = crc32.Update(o.crc, crc32cTable, p)
		s.stats.written.Add(int64(len(p)))
		w.unflushed += int64(len(p))
	}
	s.store.mu.Unlock()
	if err != nil {
		return msg{}, err
	}

	switch {
	case req.boolean("finish_write"):
		if err := s.sleep(w.ctx, s.share(s.opts.Profile.WritePerMiB, w.unflushed)+s.sampler.Sample(s.opts.Profile.Finalize)); err != nil {
			return msg{}, err
		}
		s.store.mu.Lock()
		defer s.store.mu.Unlock()
		o, err := w.appendTargetLocked()
		if err != nil {
			return msg{}, err
		}
		if err := checkObjectChecksums(req.sub("object_checksums"), o.data.md5, o.crc); err != nil {
			return msg{}, err
		}
		finalizeLocked(o, false)
		s.stats.finalized.Add(1)
		w.finished = true
		w.flushes++
		w.persisted, w.persistedCRC = o.data.size(), o.crc
		if err := s.breaks.fire(BreakBeforeReply, w.flushes, w); err != nil {
			s.stats.breaks.Add(1)
			return msg{}, err
		}
		return w.reply(o, true), nil
	case req.boolean("flush") || req.boolean("state_lookup") || !w.replied:
		if req.boolean("flush") {
			s.stats.flushes.Add(1)
			if err := w.chargeFlush(); err != nil {
				return msg{}, err
			}
			w.unflushed = 0
			s.store.mu.Lock()
			if o, err := w.appendTargetLocked(); err == nil {
				o.recordFlushLocked(time.Now())
			}
			if w.writerOfObjLocked() {
				// The flush persists what this stream's generation holds,
				// even if a newer generation has replaced it since, as long
				// as no takeover made another stream its writer.
				w.persisted, w.persistedCRC = w.obj.data.size(), w.obj.crc
			}
			s.store.mu.Unlock()
			w.flushes++
			w.flushed = true
			if err := s.breaks.fire(BreakBeforeReply, w.flushes, w); err != nil {
				s.stats.breaks.Add(1)
				return msg{}, err
			}
		} else if !req.boolean("state_lookup") && w.replied {
			return msg{}, nil
		}
		s.store.mu.Lock()
		defer s.store.mu.Unlock()
		o, err := w.appendTargetLocked()
		if w.replacedLocked(err, off, p) {
			return w.reply(w.obj, false), nil
		}
		if err != nil {
			return msg{}, err
		}
		return w.reply(o, false), nil
	}
	return msg{}, nil
}

// chargeFlush charges a flush its delays. A bidi stream's reply waits for
// them (w.due: see replyQueue) while the stream goes on receiving; a
// client-streaming write has no replies to wait, so the handler sleeps.
func (w *writeSession) chargeFlush() error {
	s := w.s
	transfer := s.share(s.opts.Profile.WritePerMiB, w.unflushed)
	rtt := s.sampler.Sample(s.opts.Profile.Flush)
	if !w.bidi {
		return s.sleep(w.ctx, transfer+rtt)
	}
	s.countDelay(transfer + rtt)
	now := time.Now()
	if w.arrived.Before(now) {
		w.arrived = now
	}
	w.arrived = w.arrived.Add(transfer)
	w.due = w.arrived.Add(rtt)
	return nil
}

// reply answers an appendable stream: the first reply (and the final one)
// carries the object, so the client learns the generation and write handle
// it needs to resume; later ones carry only the persisted size.
//
// The size reported is what the stream has persisted: bytes received since
// its last flush are not, and a stream that breaks loses them (WriteBreak),
// so the reply to a create whose message carried bytes but no flush reports
// none of them. The caller holds the store lock.
func (w *writeSession) reply(o *object, final bool) msg {
	n, crc := o.data.size(), o.crc
	if !final && o == w.obj && w.persisted < n {
		n, crc = w.persisted, w.persistedCRC
	}
	r := newMsg("BidiWriteObjectResponse")
	if final || !w.replied {
		res := o.toProto()
		res.set("size", n)
		res.mutable("checksums").set("crc32c", crc)
		r.set("resource", res)
		r.mutable("write_handle").set("handle", o.writeHandle)
	} else {
		r.set("persisted_size", n)
		r.mutable("persisted_data_checksums").set("crc32c", crc)
	}
	w.replied = true
	return r
}

func checkObjectChecksums(cs msg, md5Of func() [md5.Size]byte, crc uint32) error {
	if !cs.valid() {
		return nil
	}
	if cs.has("crc32c") && cs.u32("crc32c") != crc {
		return status.Errorf(codes.InvalidArgument, "object crc32c %d does not match the data written (%d)", cs.u32("crc32c"), crc)
	}
	if m := cs.bytes("md5_hash"); len(m) > 0 {
		sum := md5Of()
		if !bytes.Equal(m, sum[:]) {
			return status.Errorf(codes.InvalidArgument, "object md5 %x does not match the data written (%x)", m, sum)
		}
	}
	return nil
}

func (w *writeSession) handleOneShot(req msg, p []byte) (msg, error) {
	s := w.s
	p, err := newBytes(p, req.i64("write_offset"), int64(len(w.buf)))
	if err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	err = s.store.reserve(int64(len(p)))
	s.store.mu.Unlock()
	if err != nil {
		return msg{}, err
	}
	w.reserved += int64(len(p))
	w.buf = append(w.buf, p...)
	if !req.boolean("finish_write") {
		if req.boolean("state_lookup") {
			r := newMsg("BidiWriteObjectResponse")
			r.set("persisted_size", int64(len(w.buf)))
			return r, nil
		}
		return msg{}, nil
	}
	if cs := req.sub("object_checksums"); cs.valid() {
		w.checksums = cs
	}
	o, err := w.commit(w.spec, w.buf, w.checksums)
	if err != nil {
		return msg{}, err
	}
	w.reserved = 0
	w.finished = true
	r := newMsg("BidiWriteObjectResponse")
	s.store.mu.Lock()
	r.set("resource", o.toProto())
	s.store.mu.Unlock()
	w.final0 = o
	return r, nil
}

// commit makes an ordinary object from a complete write. The caller has
// already reserved len(p) bytes; on success they belong to the object.
func (w *writeSession) commit(spec msg, p []byte, cs msg) (*object, error) {
	s := w.s
	if err := s.sleep(w.ctx, s.share(s.opts.Profile.WritePerMiB, int64(len(p)))+s.sampler.Sample(s.opts.Profile.Write)); err != nil {
		return nil, err
	}
	crc := crcOf(p)
	if err := checkObjectChecksums(cs, func() [md5.Size]byte { return md5.Sum(p) }, crc); err != nil {
		return nil, err
	}
	if spec.has("object_size") && spec.i64("object_size") != int64(len(p)) {
		return nil, status.Errorf(codes.OutOfRange, "object_size %d does not match the %d bytes written", spec.i64("object_size"), len(p))
	}
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b, err := s.store.bucketLocked(spec.sub("resource").str("bucket"))
	if err != nil {
		return nil, err
	}
	name := spec.sub("resource").str("name")
	if err := condsFrom(spec).check(b.objects[name]); err != nil {
		return nil, err
	}
	o := s.store.newObjectLocked(b, spec, false)
	o.data = contentOf(p)
	o.crc = crc
	finalizeLocked(o, true)
	s.store.commitLocked(b, o)
	s.stats.created.Add(1)
	s.stats.finalized.Add(1)
	s.stats.written.Add(int64(len(p)))
	return o, nil
}

func (w *writeSession) handleResumable(req msg, p []byte) (msg, error) {
	s := w.s
	s.store.mu.Lock()
	u := w.up
	if u.done != nil {
		s.store.mu.Unlock()
		return msg{}, status.Errorf(codes.FailedPrecondition, "upload %q is already complete", u.id)
	}
	p, err := newBytes(p, req.i64("write_offset"), int64(len(u.data)))
	if err == nil {
		err = s.store.reserve(int64(len(p)))
	}
	if err == nil {
		u.data = append(u.data, p...)
	}
	size := int64(len(u.data))
	s.store.mu.Unlock()
	if err != nil {
		return msg{}, err
	}
	if !req.boolean("finish_write") {
		if req.boolean("flush") {
			if err := s.sleep(w.ctx, s.share(s.opts.Profile.WritePerMiB, int64(len(p)))); err != nil {
				return msg{}, err
			}
		}
		if req.boolean("state_lookup") || req.boolean("flush") {
			r := newMsg("BidiWriteObjectResponse")
			r.set("persisted_size", size)
			return r, nil
		}
		return msg{}, nil
	}
	cs := req.sub("object_checksums")
	if !cs.valid() {
		cs = u.checksums
	}
	s.store.mu.Lock()
	dataCopy := u.data
	s.store.mu.Unlock()
	o, err := w.commit(u.spec, dataCopy, cs)
	if err != nil {
		return msg{}, err
	}
	s.store.mu.Lock()
	u.done = o
	u.data = nil
	r := newMsg("BidiWriteObjectResponse")
	r.set("resource", o.toProto())
	s.store.mu.Unlock()
	w.finished = true
	w.final0 = o
	return r, nil
}

// closeSend answers a client that half-closed without finish_write: an
// appendable object stays open and a resumable upload stays resumable, and
// both learn the persisted size; a one-shot write is incomplete.
func (w *writeSession) closeSend(bidi bool, stream grpc.ServerStream, respName string) error {
	s := w.s
	var size int64
	switch w.mode {
	case modeOneShot:
		return status.Error(codes.InvalidArgument, "write stream closed without finish_write")
	case modeAppend:
		s.store.mu.Lock()
		o, err := w.appendTargetLocked()
		if err == nil {
			size = o.data.size()
		}
		s.store.mu.Unlock()
		if err != nil {
			return err
		}
	case modeResumable:
		s.store.mu.Lock()
		size = int64(len(w.up.data))
		s.store.mu.Unlock()
	}
	r := newMsg(respName)
	r.set("persisted_size", size)
	return stream.SendMsg(r.proto())
}

// final is the WriteObject reply of a finished write.
func (w *writeSession) final(respName string) msg {
	r := newMsg(respName)
	w.s.store.mu.Lock()
	defer w.s.store.mu.Unlock()
	if w.final0 != nil {
		r.set("resource", w.final0.toProto())
	}
	return r
}

// abort releases the memory a failed one-shot write had reserved.
func (w *writeSession) abort() {
	if w.reserved > 0 {
		w.s.store.mu.Lock()
		w.s.store.release(w.reserved)
		w.s.store.mu.Unlock()
		w.reserved = 0
	}
}

// checkMessageSize refuses a write message over Options.MaxWriteMessage.
func (s *Server) checkMessageSize(req msg) error {
	if s.opts.MaxWriteMessage <= 0 {
		return nil
	}
	if n := len(req.sub("checksummed_data").bytes("content")); n > s.opts.MaxWriteMessage {
		s.stats.msgRefused.Add(1)
		return status.Errorf(codes.ResourceExhausted, "write message of %d bytes is over the %d-byte limit", n, s.opts.MaxWriteMessage)
	}
	return nil
}

// dropUnflushed undoes what the stream appended since its last flush: the
// service persists an appendable object's data at flushes, and a stream that
// breaks loses the rest. Readers may hold slices of the old data, so it is
// copied, never cut in place.
func (w *writeSession) dropUnflushed() {
	s := w.s
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	o := w.obj
	if o == nil || o.finalized || o.data.size() <= w.persisted {
		return
	}
	s.store.release(o.data.size() - w.persisted)
	o.data = o.data.prefix(w.persisted)
	o.crc = o.data.crc()
}
