package gcsrapidtest

import (
	"errors"
	"io"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readChunk is the most object data put in one reply, like the real
// service's 2 MiB, so that a big range streams in several messages.
const readChunk = 2 << 20

// snapshot is an object as a reader sees it at one instant: its metadata
// and the bytes it had then. Appends after the snapshot are not in data.
type snapshot struct {
	meta msg
	data content
}

func (s *Server) snapshotLocked(bucketRes, name string, gen int64, c conds) (snapshot, error) {
	_, o, err := s.store.lookupLocked(bucketRes, name, gen)
	if err != nil {
		return snapshot{}, err
	}
	if err := c.check(o); err != nil {
		return snapshot{}, err
	}
	return snapshot{meta: o.metaProto(time.Now(), s.opts.Profile.StaleSize), data: o.data.frozen()}, nil
}

// resolveRange turns a request's offset and length into [start, end) of an
// object of size n. A negative offset counts from the end (clamped to 0); a
// zero length reads to the end; an offset past the end is OUT_OF_RANGE.
func resolveRange(off, length, n int64) (int64, int64, error) {
	if length < 0 {
		return 0, 0, status.Errorf(codes.InvalidArgument, "negative read length %d", length)
	}
	if off < 0 {
		off = max(n+off, 0)
	}
	if off > n {
		return 0, 0, status.Errorf(codes.OutOfRange, "read offset %d is past the end of the object (size %d)", off, n)
	}
	end := n
	if length > 0 && off+length < n {
		end = off + length
	}
	return off, end, nil
}

// bidiReadObject serves BidiReadObject: the first reply carries the object
// metadata and a read handle, then every requested range streams as
// ObjectRangeData tagged with its read_id, the last piece with range_end.
// Later messages on the stream add ranges, read against the object as it
// is then (an unfinalized object may have grown).
func (s *Server) bidiReadObject(stream grpc.ServerStream) error {
	ctx := stream.Context()
	req := newMsg("BidiReadObjectRequest")
	if err := stream.RecvMsg(req.proto()); err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "read stream closed before its first message")
		}
		return err
	}
	spec := req.sub("read_object_spec")
	if !spec.valid() {
		return status.Error(codes.InvalidArgument, "read_object_spec is required in the first message")
	}
	if err := checkRoutingHeader(ctx, spec.str("bucket")); err != nil {
		return err
	}
	bucketRes, name, gen := spec.str("bucket"), spec.str("object"), spec.i64("generation")
	s.store.mu.Lock()
	snap, err := s.snapshotLocked(bucketRes, name, gen, condsFrom(spec))
	s.store.mu.Unlock()
	if err != nil {
		return err
	}
	// Later requests read the generation the stream opened.
	gen = snap.meta.i64("generation")
	// The first-byte delay is charged with the first chunk in sendRanges.
	first := newMsg("BidiReadObjectResponse")
	first.set("metadata", snap.meta)
	first.mutable("read_handle").set("handle", []byte(itoaGen(gen)))
	pending := &first
	// Requests are received on their own goroutine, so that the stream can
	// end at its lifetime while the client is idle, as the service ends it.
	reqs, recvErr := make(chan msg), make(chan error, 1)
	go func() {
		for {
			r := newMsg("BidiReadObjectRequest")
			if err := stream.RecvMsg(r.proto()); err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	var expired <-chan time.Time
	var end time.Time
	if s.opts.ReadStreamLifetime > 0 {
		end = time.Now().Add(s.opts.ReadStreamLifetime)
		t := time.NewTimer(s.opts.ReadStreamLifetime)
		defer t.Stop()
		expired = t.C
	}
	for {
		if err := s.sendRanges(stream, snap, req.list("read_ranges"), pending, end); err != nil {
			return err
		}
		pending = nil
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-expired:
			return s.endReadStream()
		}
		s.store.mu.Lock()
		snap, err = s.snapshotLocked(bucketRes, name, gen, conds{})
		s.store.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// endReadStream is the status of a read stream ended by ReadStreamLifetime.
func (s *Server) endReadStream() error {
	s.stats.readsEnded.Add(1)
	code := s.opts.ReadStreamEndCode
	if code == codes.OK {
		code = codes.Canceled
	}
	return status.Errorf(code, "gcsrapidtest: read stream ended after its lifetime of %v", s.opts.ReadStreamLifetime)
}

func itoaGen(gen int64) string { return "gen:" + strconv.FormatInt(gen, 10) }

// sendRanges streams the ranges of one request. first, when not nil, is an
// unsent reply (the metadata) that the first piece of data rides along with,
// as the client expects data in the reply that opens the stream. A stream
// whose lifetime ends (end, if not zero) ends between two pieces.
func (s *Server) sendRanges(stream grpc.ServerStream, snap snapshot, ranges []msg, first *msg, end time.Time) error {
	ctx := stream.Context()
	n := snap.data.size()
	type span struct{ id, start, end int64 }
	spans := make([]span, 0, len(ranges))
	// Validate every range before sending any, so that a bad range fails
	// the stream without a partial answer.
	for _, r := range ranges {
		start, end, err := resolveRange(r.i64("read_offset"), r.i64("read_length"), n)
		if err != nil {
			return err
		}
		spans = append(spans, span{r.i64("read_id"), start, end})
	}
	for _, sp := range spans {
		off := sp.start
		for {
			if first == nil && !end.IsZero() && time.Now().After(end) {
				return s.endReadStream()
			}
			chunkEnd := min(off+readChunk, sp.end)
			p := snap.data.slice(off, chunkEnd)
			d := s.share(s.opts.Profile.ReadPerMiB, int64(len(p)))
			if first != nil {
				d += s.sampler.Sample(s.opts.Profile.FirstByte)
			}
			if err := s.sleep(ctx, d); err != nil {
				return err
			}
			var resp msg
			if first != nil {
				resp, first = *first, nil
			} else {
				resp = newMsg("BidiReadObjectResponse")
			}
			rd := newMsg("ObjectRangeData")
			cd := rd.mutable("checksummed_data")
			cd.set("content", p)
			cd.set("crc32c", crcOf(p))
			rr := rd.mutable("read_range")
			rr.set("read_offset", off)
			rr.set("read_length", int64(len(p)))
			rr.set("read_id", sp.id)
			rd.set("range_end", chunkEnd == sp.end)
			resp.appendMsg("object_data_ranges", rd)
			if err := stream.SendMsg(resp.proto()); err != nil {
				return err
			}
			s.stats.read.Add(int64(len(p)))
			off = chunkEnd
			if off >= sp.end {
				break
			}
		}
	}
	if first != nil {
		if err := s.delay(ctx, s.opts.Profile.FirstByte); err != nil {
			return err
		}
		return stream.SendMsg(first.proto())
	}
	return nil
}

// readObject serves the legacy server-streaming ReadObject, which the
// client uses without storage.WithGRPCBidiReads.
func (s *Server) readObject(stream grpc.ServerStream) error {
	ctx := stream.Context()
	req := newMsg("ReadObjectRequest")
	if err := stream.RecvMsg(req.proto()); err != nil {
		return err
	}
	s.store.mu.Lock()
	snap, err := s.snapshotLocked(req.str("bucket"), req.str("object"), req.i64("generation"), condsFrom(req))
	s.store.mu.Unlock()
	if err != nil {
		return err
	}
	n := snap.data.size()
	if req.i64("read_limit") < 0 {
		return status.Errorf(codes.InvalidArgument, "negative read_limit %d", req.i64("read_limit"))
	}
	start, end, err := resolveRange(req.i64("read_offset"), req.i64("read_limit"), n)
	if err != nil {
		return err
	}
	off := start
	first := true
	for first || off < end {
		chunkEnd := min(off+readChunk, end)
		p := snap.data.slice(off, chunkEnd)
		d := s.share(s.opts.Profile.ReadPerMiB, int64(len(p)))
		if first {
			d += s.sampler.Sample(s.opts.Profile.FirstByte)
		}
		if err := s.sleep(ctx, d); err != nil {
			return err
		}
		resp := newMsg("ReadObjectResponse")
		if first {
			resp.set("metadata", snap.meta)
			cr := resp.mutable("content_range")
			cr.set("start", start)
			cr.set("end", end)
			cr.set("complete_length", n)
			if cs := snap.meta.sub("checksums"); cs.valid() {
				resp.set("object_checksums", cs)
			}
		}
		cd := resp.mutable("checksummed_data")
		cd.set("content", p)
		cd.set("crc32c", crcOf(p))
		if err := stream.SendMsg(resp.proto()); err != nil {
			return err
		}
		s.stats.read.Add(int64(len(p)))
		off, first = chunkEnd, false
	}
	return nil
}
