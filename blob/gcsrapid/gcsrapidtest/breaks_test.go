package gcsrapidtest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// replies sends reqs, half-closes, and returns how many replies came before
// the stream's final status.
func replies(t *testing.T, srv *Server, reqs ...msg) (int, error) {
	t.Helper()
	st := rawStream(t, srv, "BidiWriteObject", "zonal")
	for _, r := range reqs {
		if err := st.SendMsg(r.proto()); err != nil {
			break
		}
	}
	st.CloseSend()
	n := 0
	for {
		if err := st.RecvMsg(newMsg("BidiWriteObjectResponse").proto()); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

// objectData returns the live bytes of name in the zonal bucket, or false.
func objectData(srv *Server, name string) ([]byte, bool) {
	srv.store.mu.Lock()
	defer srv.store.mu.Unlock()
	o, ok := srv.store.buckets["zonal"].objects[name]
	if !ok {
		return nil, false
	}
	return bytes.Clone(o.data.slice(0, o.data.size())), true
}

func TestWriteBreaks(t *testing.T) {
	cases := []struct {
		name        string
		brk         WriteBreak
		reqs        func(name string) []msg
		wantReplies int
		want        string // what the object holds after the break
	}{
		{"after messages, unflushed bytes lost",
			WriteBreak{At: BreakAfterMessages, N: 1},
			func(n string) []msg {
				return []msg{withData(appendableSpec("zonal", n), 0, "abc", false, false), dataMsg(3, "def", true, false)}
			}, 1, ""},
		{"after messages, flushed bytes kept",
			WriteBreak{At: BreakAfterMessages, N: 2},
			func(n string) []msg {
				return []msg{withData(appendableSpec("zonal", n), 0, "abc", true, false), dataMsg(3, "def", false, false), dataMsg(6, "ghi", true, false)}
			}, 1, "abc"},
		{"after a flush",
			WriteBreak{At: BreakAfterFlush},
			func(n string) []msg {
				return []msg{withData(appendableSpec("zonal", n), 0, "abc", true, false), dataMsg(3, "def", true, false)}
			}, 1, "abc"},
		{"before the reply of the create",
			WriteBreak{At: BreakBeforeReply},
			func(n string) []msg {
				return []msg{withData(appendableSpec("zonal", n), 0, "abc", true, false)}
			}, 0, "abc"},
		{"before the reply of the second flush",
			WriteBreak{At: BreakBeforeReply, N: 2},
			func(n string) []msg {
				return []msg{withData(appendableSpec("zonal", n), 0, "abc", true, false), dataMsg(3, "def", true, false)}
			}, 1, "abcdef"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, _ := newTestServer(t, Options{WriteBreaks: []WriteBreak{{At: c.brk.At, N: c.brk.N, Streams: 1}}})
			n, err := replies(t, srv, c.reqs("a")...)
			if status.Code(err) != codes.Unavailable || n != c.wantReplies {
				t.Fatalf("broken stream: %d replies, %v; want %d and UNAVAILABLE", n, err, c.wantReplies)
			}
			if got, ok := objectData(srv, "a"); !ok || string(got) != c.want {
				t.Errorf("after the break the object holds %q (exists %v), want %q", got, ok, c.want)
			}
			if st := srv.Stats(); st.WriteBreaks != 1 {
				t.Errorf("Stats.WriteBreaks = %d, want 1", st.WriteBreaks)
			}
			// Streams: 1 breaks one stream only.
			if _, err := replies(t, srv, c.reqs("b")...); err != nil {
				t.Errorf("second stream: %v, want no break", err)
			}
		})
	}
}

func TestBreakWritesArmedWhileRunning(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	srv.BreakWrites(WriteBreak{At: BreakBeforeReply, Streams: 2})
	for i := range 3 {
		w := c.Bucket("zonal").Object("k").Retryer(storage.WithPolicy(storage.RetryNever)).NewWriter(ctx)
		w.Append, w.FinalizeOnClose = true, false
		w.Write([]byte("x"))
		_, err := w.Flush()
		if broken := i < 2; broken != (status.Code(err) == codes.Unavailable) {
			t.Errorf("write %d: %v, broken %v", i, err, broken)
		}
		w.Close()
	}
	srv.ClearBreaks()
	if st := srv.Stats(); st.WriteBreaks != 2 {
		t.Errorf("Stats.WriteBreaks = %d, want 2", st.WriteBreaks)
	}
}

func TestMaxWriteMessage(t *testing.T) {
	srv, c := newTestServer(t, Options{MaxWriteMessage: MaxWriteMessage})
	big := strings.Repeat("x", MaxWriteMessage+1)
	if _, err := replies(t, srv, withData(appendableSpec("zonal", "big"), 0, big, true, false)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a %d-byte message: %v, want RESOURCE_EXHAUSTED", len(big), err)
	}
	if _, ok := objectData(srv, "big"); ok {
		t.Error("a refused first message created its object")
	}
	if _, err := replies(t, srv, withData(appendableSpec("zonal", "max"), 0, big[1:], true, false)); err != nil {
		t.Errorf("a message of exactly the limit: %v", err)
	}
	// The client never sends more than the limit in one message.
	ctx := testCtx(t)
	w := c.Bucket("zonal").Object("client").NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	payload := bytes.Repeat([]byte("y"), 5<<20)
	w.Write(payload)
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got, _ := objectData(srv, "client"); !bytes.Equal(got, payload) {
		t.Errorf("client write under the limit holds %d bytes, want %d", len(got), len(payload))
	}
	if st := srv.Stats(); st.MessagesRefused != 1 {
		t.Errorf("Stats.MessagesRefused = %d, want 1", st.MessagesRefused)
	}
}

func TestZeroGenerationTakeoverRefused(t *testing.T) {
	srv, _ := newTestServer(t, Options{RefuseZeroGenerationTakeover: true})
	if _, err := replies(t, srv, withData(appendableSpec("zonal", "a"), 0, "abc", true, false)); err != nil {
		t.Fatal(err)
	}
	takeover := func(gen int64) msg {
		r := newMsg("BidiWriteObjectRequest")
		aos := r.mutable("append_object_spec")
		aos.set("bucket", bucketPrefix+"zonal")
		aos.set("object", "a")
		aos.set("generation", gen)
		return r
	}
	if _, err := replies(t, srv, takeover(0)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("takeover with generation 0: %v, want INVALID_ARGUMENT", err)
	}
	srv.store.mu.Lock()
	gen := srv.store.buckets["zonal"].objects["a"].generation
	srv.store.mu.Unlock()
	if n, err := replies(t, srv, takeover(gen), dataMsg(3, "d", true, false)); err != nil || n < 2 {
		t.Errorf("takeover with the generation: %d replies, %v", n, err)
	}
}

func TestReadStreamLifetime(t *testing.T) {
	srv, c := newTestServer(t, Options{ReadStreamLifetime: 20 * time.Millisecond})
	ctx := testCtx(t)
	o := c.Bucket("zonal").Object("r")
	w := o.NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.Write([]byte("0123456789"))
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	mrd, err := o.NewMultiRangeDownloader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mrd.Close()
	read := func() error {
		var buf bytes.Buffer
		done := make(chan error, 1)
		mrd.Add(&buf, 2, 3, func(_, _ int64, err error) { done <- err })
		return <-done
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	for srv.Stats().ReadStreamsEnded == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// As on the testbench, the stream ends CANCELED, which the client does
	// not retry: its downloader is done for.
	if err := read(); status.Code(err) != codes.Canceled {
		t.Errorf("a read after the stream's lifetime: %v, want CANCELED", err)
	}
}

func TestRedirects(t *testing.T) {
	srv, c := newTestServer(t, Options{Redirects: 1})
	conn, err := grpc.NewClient(srv.Endpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := func(params string) error {
		ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-goog-request-params", params)
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+storageService+"/BidiWriteObject")
		if err != nil {
			t.Fatal(err)
		}
		return exchange(t, st, "BidiWriteObjectResponse", withData(appendableSpec("zonal", "raw"), 0, "x", true, false))
	}
	// A stream without a token is redirected, with a routing token in a
	// BidiWriteObjectRedirectedError detail.
	err = raw("appendable=true&bucket=" + bucketPrefix + "zonal")
	var token string
	for _, d := range status.Convert(err).Proto().GetDetails() {
		m := newMsg("BidiWriteObjectRedirectedError")
		if d.UnmarshalTo(m.proto()) == nil {
			token = m.str("routing_token")
		}
	}
	if status.Code(err) != codes.Aborted || token == "" {
		t.Fatalf("a stream without a routing token: %v (token %q), want ABORTED with a redirect", err, token)
	}
	if err := raw("appendable=true&bucket=" + bucketPrefix + "zonal&routing_token=bogus"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a stream with an unknown token: %v, want INVALID_ARGUMENT", err)
	}
	if err := raw("appendable=true&bucket=" + bucketPrefix + "zonal&routing_token=" + token); err != nil {
		t.Errorf("a stream replaying the token: %v", err)
	}
	// The storage client follows redirects by itself, writing and reading.
	srv.Redirect(1)
	w := c.Bucket("zonal").Object("b").NewWriter(testCtx(t))
	w.Append, w.FinalizeOnClose = true, false
	w.Write([]byte("xyz"))
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	srv.Redirect(1)
	if got := readAll(t, c.Bucket("zonal").Object("b")); string(got) != "xyz" {
		t.Errorf("read %q after a redirect", got)
	}
	if s := srv.Stats(); s.Redirects != 3 || s.RedirectsFollowed != 3 {
		t.Errorf("%d redirects, %d followed; want 3 and 3", s.Redirects, s.RedirectsFollowed)
	}
}

// A flush on a stream whose generation a newer create replaced reports the
// bytes that generation received: they are persisted by the flush.
func TestFlushAfterReplacementReportsItsBytes(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	a := rawStream(t, srv, "BidiWriteObject", "zonal")
	if err := a.SendMsg(withData(appendableSpec("zonal", "k"), 0, "abc", false, false).proto()); err != nil {
		t.Fatal(err)
	}
	first := newMsg("BidiWriteObjectResponse")
	if err := a.RecvMsg(first.proto()); err != nil {
		t.Fatal(err)
	}
	if n := first.sub("resource").i64("size"); n != 0 {
		t.Errorf("the reply to a create with unflushed bytes reports %d persisted, want 0", n)
	}
	if _, err := replies(t, srv, withData(appendableSpec("zonal", "k"), 0, "new", true, false)); err != nil {
		t.Fatal(err)
	}
	if err := a.SendMsg(dataMsg(3, "", true, false).proto()); err != nil {
		t.Fatal(err)
	}
	r := newMsg("BidiWriteObjectResponse")
	if err := a.RecvMsg(r.proto()); err != nil {
		t.Fatalf("flush on the replaced generation: %v", err)
	}
	if n := r.i64("persisted_size"); n != 3 {
		t.Errorf("flush on the replaced generation reports %d persisted, want 3", n)
	}
	a.CloseSend()
}

// A stream whose generation another writer took over and a newer create then
// replaced is not the writer of the bytes the taker appended: its message at
// its own end, no longer than those bytes, fails instead of being dropped as
// a resend, and no flush of it reports them as its own (a writer fenced by a
// takeover would otherwise be acknowledged for bytes it never wrote).
func TestTakenOverThenReplacedStreamFails(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	a := rawStream(t, srv, "BidiWriteObject", "zonal")
	if err := a.SendMsg(withData(appendableSpec("zonal", "k"), 0, "abc", true, false).proto()); err != nil {
		t.Fatal(err)
	}
	if err := a.RecvMsg(newMsg("BidiWriteObjectResponse").proto()); err != nil {
		t.Fatal(err)
	}
	srv.store.mu.Lock()
	gen := srv.store.buckets["zonal"].objects["k"].generation
	srv.store.mu.Unlock()
	takeover := newMsg("BidiWriteObjectRequest")
	aos := takeover.mutable("append_object_spec")
	aos.set("bucket", bucketPrefix+"zonal")
	aos.set("object", "k")
	aos.set("generation", gen)
	// The taker appends six bytes after the three the first stream wrote.
	if _, err := replies(t, srv, withData(takeover, 3, "FENCED", true, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := replies(t, srv, withData(appendableSpec("zonal", "k"), 0, "new", true, false)); err != nil {
		t.Fatal(err)
	}
	// Four bytes at 3: inside what the old generation holds, all the
	// taker's.
	if err := a.SendMsg(dataMsg(3, "mine", true, false).proto()); err != nil {
		t.Fatal(err)
	}
	r := newMsg("BidiWriteObjectResponse")
	err := a.RecvMsg(r.proto())
	if err == nil {
		t.Fatalf("a stream taken over and then replaced got a reply to its append: persisted %d", r.i64("persisted_size"))
	}
	if c := status.Code(err); c != codes.FailedPrecondition && c != codes.NotFound {
		t.Errorf("append of a taken-over, replaced stream: %v, want FAILED_PRECONDITION or NOT_FOUND", err)
	}
	a.CloseSend()
}
