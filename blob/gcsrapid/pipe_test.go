package gcsrapid_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// openPipelined opens a bucket of srv by URL, which pipelines append
// streams unless query turns it off.
func openPipelined(ctx context.Context, t *testing.T, srv *gcsrapidtest.Server, query string) *gcsrapid.Store {
	t.Helper()
	name := testkit.RapidBucket(t, srv)
	u, err := url.Parse("gcsrapid://" + name + "?endpoint=" + srv.Endpoint() + query)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gcsrapid.OpenURL(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sendAll sends each frame without waiting and returns, in the order the
// acknowledgements came, each frame's index and error.
func sendAll(ctx context.Context, t *testing.T, st blob.PipelinedAppendStream, frames [][]byte) (order []int, errs []error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, f := range frames {
		wg.Add(1)
		err := st.Send(ctx, f, func(err error) {
			mu.Lock()
			order, errs = append(order, i), append(errs, err)
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			wg.Done()
			mu.Lock()
			order, errs = append(order, i), append(errs, err)
			mu.Unlock()
		}
	}
	wg.Wait()
	return order, errs
}

func frames(n int, tag string) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, []byte(fmt.Sprintf("%s%02d|", tag, i)))
	}
	return out
}

// Several flushes are in flight on one stream: each Send is acknowledged in
// order once the service has persisted it, and the object holds every
// frame in the order sent. The emulator counts the flushes that arrived
// while an earlier one's reply was still due.
func TestPipelinedAppendStream(t *testing.T) {
	ctx := context.Background()
	p := slowFlush(20 * time.Millisecond)
	srv := newServer(t, p)
	s := openPipelined(ctx, t, srv, "")
	as, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
	if err != nil {
		t.Fatal(err)
	}
	st, ok := as.(blob.PipelinedAppendStream)
	if !ok {
		t.Fatalf("%T is not pipelined", as)
	}
	if _, err := s.CreateAppendStream(ctx, "log", []byte("again")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	before := srv.Stats()
	fs := frames(8, "a")
	order, errs := sendAll(ctx, t, st, fs)
	after := srv.Stats()
	for i := range order {
		if order[i] != i || errs[i] != nil {
			t.Fatalf("acknowledgements %v, errors %v: want 0..7 in order, all nil", order, errs)
		}
	}
	if got := after.Flushes - before.Flushes; got != 8 {
		t.Errorf("%d flushes for 8 sends", got)
	}
	// The sends go out back to back while each flush takes 20 ms: all
	// but the first arrive with an earlier one in flight.
	if got := after.FlushesInFlight - before.FlushesInFlight; got < 4 {
		t.Errorf("%d of 8 flushes arrived with another in flight; the stream did not pipeline", got)
	}
	want := append([]byte("head|"), bytes.Join(fs, nil)...)
	if st.Size() != int64(len(want)) {
		t.Errorf("Size %d, want %d", st.Size(), len(want))
	}
	got, err := blob.ReadAll(ctx, s, "log")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object holds %q, %v; want %q", got, err, want)
	}

	// A takeover fences the stream and starts at the persisted size.
	b, err := s.TakeOverAppendStream(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != int64(len(want)) {
		t.Errorf("taken over at %d, want %d", b.Size(), len(want))
	}
	if err := st.Append(ctx, []byte("stale|")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("append on a stream taken over: %v, want ErrPrecondition", err)
	}
	if err := st.Send(ctx, []byte("later|"), func(error) { t.Error("done called for a Send refused") }); !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("send after the stream failed: %v, want its ErrPrecondition", err)
	}
	if err := b.Append(ctx, []byte("tail")); err != nil {
		t.Fatal(err)
	}
	got, err = blob.ReadAll(ctx, s, "log")
	if want := string(want) + "tail"; err != nil || string(got) != want {
		t.Errorf("object holds %q, %v; want %q", got, err, want)
	}
	b.Close()
	if _, err := s.TakeOverAppendStream(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("take over a missing object: %v, want ErrNotFound", err)
	}
	// pipeline=false keeps the client library's Writer.
	plain := openPipelined(ctx, t, srv, "&pipeline=false")
	ps, err := plain.CreateAppendStream(ctx, "log", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if _, ok := ps.(blob.PipelinedAppendStream); ok {
		t.Error("pipeline=false gave a pipelined stream")
	}
}

// A stream that breaks with flushes in flight acknowledges the ones the
// service answered and fails every one after, in order; a takeover finds
// at least what was acknowledged, and nothing but a prefix of what was sent.
func TestPipelinedStreamBreaks(t *testing.T) {
	ctx := context.Background()
	p := slowFlush(5 * time.Millisecond)
	for _, brk := range []gcsrapidtest.WriteBreak{
		{At: gcsrapidtest.BreakAfterFlush, N: 4, Streams: 1},
		{At: gcsrapidtest.BreakBeforeReply, N: 4, Streams: 1},
		{At: gcsrapidtest.BreakAfterMessages, N: 3, Streams: 1},
	} {
		t.Run(brk.At.String(), func(t *testing.T) {
			srv := newServer(t, p)
			s := openPipelined(ctx, t, srv, "")
			as, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
			if err != nil {
				t.Fatal(err)
			}
			srv.BreakWrites(brk)
			fs := frames(8, "b")
			order, errs := sendAll(ctx, t, as.(blob.PipelinedAppendStream), fs)
			acked := []byte("head|")
			failed := false
			for i := range order {
				if order[i] != i {
					t.Fatalf("acknowledgements out of order: %v", order)
				}
				switch {
				case errs[i] == nil && failed:
					t.Fatalf("send %d acknowledged after an earlier one failed: %v", i, errs)
				case errs[i] == nil:
					acked = append(acked, fs[i]...)
				default:
					failed = true
				}
			}
			if !failed {
				t.Fatalf("no send failed: %v", errs)
			}
			b, err := s.TakeOverAppendStream(ctx, "log")
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := blob.ReadAll(ctx, s, "log")
			sent := append([]byte("head|"), bytes.Join(fs, nil)...)
			if err != nil || !bytes.HasPrefix(got, acked) || !bytes.HasPrefix(sent, got) || b.Size() != int64(len(got)) {
				t.Fatalf("after the break the object holds %q (%v), taken over at %d; acknowledged %q", got, err, b.Size(), acked)
			}
		})
	}
}

// Opening a stream follows the service's redirect to another front end,
// for a create and for a takeover; a Send whose context ends fails the
// stream.
func TestPipelinedStreamRedirectsAndContexts(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := openPipelined(ctx, t, srv, "")
	srv.Redirect(1)
	a, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Redirect(1)
	b, err := s.TakeOverAppendStream(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Redirects != 2 || st.RedirectsFollowed != 2 {
		t.Errorf("%d redirects, %d followed; want 2 and 2", st.Redirects, st.RedirectsFollowed)
	}
	a.Close()
	if err := b.Append(ctx, []byte("one|")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Append(cctx, []byte("two|")); !errors.Is(err, context.Canceled) {
		t.Errorf("append with an ended context: %v, want context.Canceled", err)
	}
	if err := b.Append(ctx, []byte("three|")); err == nil {
		t.Error("a stream whose Send's context ended goes on")
	}
}

// Pipelined streams spread over as many connections as the front end's cap
// on streams per connection needs: none is refused, and a stream that ends
// gives its place back.
func TestPipelinedStreamsShareConnections(t *testing.T) {
	ctx := context.Background()
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{MaxStreamsPerConn: 10, Seed: 1})
	s := openPipelined(ctx, t, srv, "&max_streams_per_conn=10")
	base := srv.Stats().Connections
	var streams []blob.AppendStream
	for i := range 25 {
		st, err := s.CreateAppendStream(ctx, fmt.Sprintf("log%02d", i), []byte("head|"))
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		if err := st.Append(ctx, []byte("x")); err != nil {
			t.Fatalf("append on stream %d: %v", i, err)
		}
	}
	st := srv.Stats()
	if st.StreamsRefused != 0 || st.PeakStreamsPerConn > 10 || st.Connections-base != 3 {
		t.Errorf("25 streams: %d refused, peak %d a connection, %d stream connections; want 0, at most 10, 3", st.StreamsRefused, st.PeakStreamsPerConn, st.Connections-base)
	}
	for _, st := range streams[:10] {
		st.Close()
	}
	// The places of the closed streams are taken again, with no new
	// connection, once the service has seen them end (it counts a stream
	// until its handler returns).
	for srv.Stats().StreamsOpen > 15 {
		time.Sleep(time.Millisecond)
	}
	for i := range 10 {
		st, err := s.CreateAppendStream(ctx, fmt.Sprintf("again%02d", i), []byte("head|"))
		if err != nil {
			t.Fatalf("stream %d after closes: %v", i, err)
		}
		defer st.Close()
	}
	if got := srv.Stats(); got.StreamsRefused != 0 || got.Connections != st.Connections {
		t.Errorf("after closes: %d refused, %d connections (was %d)", got.StreamsRefused, got.Connections, st.Connections)
	}
	for _, st := range streams[10:] {
		st.Close()
	}
}

// slowFlush is the zero profile with every flush taking d.
func slowFlush(d time.Duration) gcsrapidtest.Profile {
	p := gcsrapidtest.Zero()
	p.Name = "slow flush"
	p.Flush = latency.Fixed(d)
	return p
}

// A stream that another writer took over, and whose generation a Put then
// replaced (as a commit log's mover replaces a sealed segment with a
// marker), fails its next append: the bytes the taker appended past its end
// are not its own, however many there are. Acknowledging it for them would
// let a writer fenced by the takeover count a zone it never wrote to.
func TestStreamTakenOverThenReplaced(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, slowFlush(0))
	for _, query := range []string{"", "&pipeline=false"} {
		t.Run("query="+query, func(t *testing.T) {
			s := openPipelined(ctx, t, srv, query)
			a, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := s.TakeOverAppendStream(ctx, "log")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Append(ctx, []byte("fence|copies of the records the old writer lacked|")); err != nil {
				t.Fatal(err)
			}
			b.Close()
			attrs, err := s.Stat(ctx, "log")
			if err != nil {
				t.Fatal(err)
			}
			if err := blob.Put(ctx, s, "log", []byte("marker"), &blob.WriterOptions{If: blob.IfGenerationMatch(attrs.Generation)}); err != nil {
				t.Fatal(err)
			}
			if err := a.Append(ctx, []byte("mine|")); err == nil {
				t.Fatal("a stream taken over and then replaced was acknowledged for bytes it never wrote")
			} else if !errors.Is(err, blob.ErrPrecondition) && !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("append after a takeover and a replacement: %v, want ErrPrecondition or ErrNotFound", err)
			}
			if got, err := blob.ReadAll(ctx, s, "log"); err != nil || string(got) != "marker" {
				t.Errorf("object holds %q, %v; want the marker", got, err)
			}
		})
	}
}
