package gcsrapidtest

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawStream opens a stream to the server with hand-built messages, to send
// what the storage client never would.
func rawStream(t *testing.T, srv *Server, method, bucket string) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := testCtx(t)
	if bucket != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-goog-request-params", "bucket="+bucketPrefix+bucket)
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+storageService+"/"+method)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// exchange sends reqs, half-closes and returns the stream's final status.
func exchange(t *testing.T, st grpc.ClientStream, respType string, reqs ...msg) error {
	t.Helper()
	for _, r := range reqs {
		if err := st.SendMsg(r.proto()); err != nil {
			break // the server ended the stream; RecvMsg reports why
		}
	}
	st.CloseSend()
	for {
		if err := st.RecvMsg(newMsg(respType).proto()); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func appendableSpec(bucket, name string) msg {
	r := newMsg("BidiWriteObjectRequest")
	spec := r.mutable("write_object_spec")
	spec.set("appendable", true)
	res := spec.mutable("resource")
	res.set("bucket", bucketPrefix+bucket)
	res.set("name", name)
	return r
}

func dataMsg(off int64, p string, flush, finish bool) msg {
	r := newMsg("BidiWriteObjectRequest")
	r.set("write_offset", off)
	r.mutable("checksummed_data").set("content", []byte(p))
	r.set("flush", flush)
	r.set("state_lookup", flush)
	r.set("finish_write", finish)
	return r
}

func withData(r msg, off int64, p string, flush, finish bool) msg {
	proto.Merge(r.proto(), dataMsg(off, p, flush, finish).proto())
	return r
}

func TestBadWriteRequests(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	noSpec := dataMsg(0, "x", true, false)
	badCRC := dataMsg(0, "x", true, false)
	badCRC.sub("checksummed_data").set("crc32c", uint32(1))
	takeoverMissing := newMsg("BidiWriteObjectRequest")
	aos := takeoverMissing.mutable("append_object_spec")
	aos.set("bucket", bucketPrefix+"zonal")
	aos.set("object", "nope")
	cases := []struct {
		name   string
		bucket string
		reqs   []msg
		want   codes.Code
	}{
		{"missing spec", "zonal", []msg{noSpec}, codes.InvalidArgument},
		{"negative offset", "zonal", []msg{withData(appendableSpec("zonal", "neg"), -1, "x", true, false)}, codes.InvalidArgument},
		{"gap offset", "zonal", []msg{withData(appendableSpec("zonal", "gap"), 5, "x", true, false)}, codes.OutOfRange},
		{"gap on a later message", "zonal", []msg{withData(appendableSpec("zonal", "gap2"), 0, "ab", true, false), dataMsg(3, "c", true, false)}, codes.OutOfRange},
		{"unknown bucket", "nosuch", []msg{withData(appendableSpec("nosuch", "a"), 0, "x", true, false)}, codes.NotFound},
		{"malformed bucket", "zonal", []msg{withData(appendableSpec("zonal/x", "a"), 0, "x", true, false)}, codes.InvalidArgument},
		{"empty object name", "zonal", []msg{withData(appendableSpec("zonal", ""), 0, "x", true, false)}, codes.InvalidArgument},
		{"no routing header", "", []msg{withData(appendableSpec("zonal", "a"), 0, "x", true, false)}, codes.InvalidArgument},
		{"routing header for another bucket", "regional", []msg{withData(appendableSpec("zonal", "a"), 0, "x", true, false)}, codes.InvalidArgument},
		{"bad chunk crc32c", "zonal", []msg{withData(appendableSpec("zonal", "crc"), 0, "", false, false), badCRC}, codes.InvalidArgument},
		{"takeover of a missing object", "zonal", []msg{takeoverMissing}, codes.NotFound},
		{"message after finish", "zonal", []msg{withData(appendableSpec("zonal", "fin"), 0, "x", false, true), dataMsg(1, "y", true, false)}, codes.InvalidArgument},
		{"respec mid-stream", "zonal", []msg{withData(appendableSpec("zonal", "re"), 0, "x", true, false), appendableSpec("zonal", "re2")}, codes.InvalidArgument},
		{"empty stream", "zonal", nil, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := exchange(t, rawStream(t, srv, "BidiWriteObject", tc.bucket), "BidiWriteObjectResponse", tc.reqs...)
			if status.Code(err) != tc.want {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}

	// Appending to a finalized object fails, and so does a wrong generation.
	if err := exchange(t, rawStream(t, srv, "BidiWriteObject", "zonal"), "BidiWriteObjectResponse",
		withData(appendableSpec("zonal", "done"), 0, "x", false, true)); err != nil {
		t.Fatal(err)
	}
	takeover := newMsg("BidiWriteObjectRequest")
	aos = takeover.mutable("append_object_spec")
	aos.set("bucket", bucketPrefix+"zonal")
	aos.set("object", "done")
	err := exchange(t, rawStream(t, srv, "BidiWriteObject", "zonal"), "BidiWriteObjectResponse", withData(takeover, 1, "y", true, false))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("append to a finalized object: err = %v, want FailedPrecondition", err)
	}
	aos.set("generation", int64(1))
	err = exchange(t, rawStream(t, srv, "BidiWriteObject", "zonal"), "BidiWriteObjectResponse", takeover)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("takeover of a missing generation: err = %v, want NotFound", err)
	}
}

func readReq(bucket, name string, ranges ...[2]int64) msg {
	r := newMsg("BidiReadObjectRequest")
	if bucket != "" {
		spec := r.mutable("read_object_spec")
		spec.set("bucket", bucketPrefix+bucket)
		spec.set("object", name)
	}
	for i, rg := range ranges {
		rr := newMsg("ReadRange")
		rr.set("read_offset", rg[0])
		rr.set("read_length", rg[1])
		rr.set("read_id", int64(i))
		r.appendMsg("read_ranges", rr)
	}
	return r
}

func TestBadReadRequests(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	writeZonal(t, c, "obj", []byte("0123456789"), true)
	cases := []struct {
		name   string
		bucket string
		req    msg
		want   codes.Code
	}{
		{"missing spec", "zonal", readReq("", ""), codes.InvalidArgument},
		{"unknown bucket", "nosuch", readReq("nosuch", "obj"), codes.NotFound},
		{"missing object", "zonal", readReq("zonal", "nope"), codes.NotFound},
		{"negative length", "zonal", readReq("zonal", "obj", [2]int64{0, -1}), codes.InvalidArgument},
		{"offset past the end", "zonal", readReq("zonal", "obj", [2]int64{11, 1}), codes.OutOfRange},
		{"offset at the end", "zonal", readReq("zonal", "obj", [2]int64{10, 1}), codes.OK},
		{"negative offset beyond the start", "zonal", readReq("zonal", "obj", [2]int64{-100, 0}), codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := exchange(t, rawStream(t, srv, "BidiReadObject", tc.bucket), "BidiReadObjectResponse", tc.req)
			if status.Code(err) != tc.want {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// fakeStream feeds a handler pre-encoded request messages without a
// network, so the fuzzer can run many streams per second.
type fakeStream struct {
	ctx  context.Context
	in   [][]byte
	sent int
}

func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}
func (f *fakeStream) Context() context.Context     { return f.ctx }

func (f *fakeStream) SendMsg(m any) error {
	if _, err := proto.Marshal(m.(proto.Message)); err != nil {
		return err
	}
	f.sent++
	return nil
}

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.in) == 0 {
		return io.EOF
	}
	b := f.in[0]
	f.in = f.in[1:]
	if err := proto.Unmarshal(b, m.(proto.Message)); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

var _ grpc.ServerStream = (*fakeStream)(nil)

// frames encodes messages as the fuzz input format: a selector byte (even
// for BidiWriteObject, odd for BidiReadObject), then length-prefixed messages.
func frames(read bool, ms ...msg) []byte {
	b := []byte{0}
	if read {
		b[0] = 1
	}
	for _, m := range ms {
		p, _ := proto.Marshal(m.proto())
		b = protowire.AppendBytes(b, p)
	}
	return b
}

func FuzzStreamHandlers(f *testing.F) {
	f.Add(frames(false, withData(appendableSpec("zonal", "a"), 0, "hello", true, false), dataMsg(5, " world", false, true)))
	f.Add(frames(false, withData(appendableSpec("zonal", "a"), 0, "hello", true, false), dataMsg(2, "llo!", true, false), dataMsg(9, "x", true, false)))
	f.Add(frames(false, withData(appendableSpec("zonal", "a"), -4, "x", true, false)))
	oneshot := newMsg("BidiWriteObjectRequest")
	res := oneshot.mutable("write_object_spec").mutable("resource")
	res.set("bucket", bucketPrefix+"regional")
	res.set("name", "r")
	f.Add(frames(false, withData(oneshot, 0, "abc", false, true)))
	takeover := newMsg("BidiWriteObjectRequest")
	aos := takeover.mutable("append_object_spec")
	aos.set("bucket", bucketPrefix+"zonal")
	aos.set("object", "seed")
	f.Add(frames(false, takeover, dataMsg(4, "more", true, false), dataMsg(8, "", false, true)))
	f.Add(frames(true, readReq("zonal", "seed", [2]int64{0, 2}, [2]int64{-2, 0}), readReq("", "", [2]int64{1, 100})))
	f.Add(frames(true, readReq("zonal", "seed", [2]int64{5, 1})))
	f.Add([]byte{0, 3, 1, 2, 3})

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		read := in[0]%2 == 1
		var msgs [][]byte
		for rest := in[1:]; len(rest) > 0; {
			p, n := protowire.ConsumeBytes(rest)
			if n < 0 {
				break
			}
			msgs = append(msgs, p)
			rest = rest[n:]
		}
		srv, err := NewUnstartedServer(Options{Buckets: []Bucket{{Name: "zonal", Zonal: true}, {Name: "regional"}}, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		seed := &object{bucket: "zonal", name: "seed", generation: 1, metageneration: 1, appendable: true, data: contentOf([]byte("seed")), crc: crcOf([]byte("seed")), writeHandle: []byte("h")}
		srv.store.buckets["zonal"].objects["seed"] = seed
		srv.store.used = 4

		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-goog-request-params", "bucket="+bucketPrefix+"zonal"))
		st := &fakeStream{ctx: ctx, in: msgs}
		if read {
			err = srv.bidiReadObject(st)
		} else {
			err = srv.bidiWriteObject(st)
		}
		if err != nil {
			if _, ok := status.FromError(err); !ok || status.Code(err) == codes.Unknown {
				t.Fatalf("handler returned a non-status error: %v", err)
			}
		}
		// Memory accounting must match what is stored, whatever happened.
		var held int64
		for _, b := range srv.store.buckets {
			for _, o := range b.objects {
				held += o.data.size()
			}
		}
		for _, u := range srv.store.uploads {
			held += int64(len(u.data))
		}
		if held != srv.store.used {
			t.Fatalf("memory accounting: %d bytes held, %d counted", held, srv.store.used)
		}
	})
}
