package gcsrapid_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// The tests here run the driver under the emulator's switches for failures
// that happen after a call acted: a write stream that breaks once its object
// exists, a read stream the service ends, and the limits of real Rapid
// buckets.

var retryModes = []struct {
	name    string
	retries int
}{{"default retries", 0}, {"no retries", -1}}

var noPool = pool.CreatorOptions{Capacity: -1}

// strictServer is a zero-latency emulator with the real service's limits on.
func strictServer(t *testing.T, opts gcsrapidtest.Options) *gcsrapidtest.Server {
	t.Helper()
	if opts.Profile.Name == "" {
		opts.Profile = gcsrapidtest.Zero()
	}
	opts.Seed = 1
	opts.MaxWriteMessage = gcsrapidtest.MaxWriteMessage
	opts.RefuseZeroGenerationTakeover = true
	return gcsrapidtest.Start(t, opts)
}

func mustRead(ctx context.Context, t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	got, err := blob.ReadAll(ctx, s, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return got
}

// A write stream that breaks after its object exists, before the service's
// reply said so: the write finishes its own object, whether it overwrote a
// finalized value or was conditional (its own object is not ErrExists).
func TestPutWhoseCreateLostItsReply(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		for _, size := range []int{10, 5 << 20} {
			t.Run(fmt.Sprintf("%s/%d bytes", rm.name, size), func(t *testing.T) {
				srv := strictServer(t, gcsrapidtest.Options{})
				s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
				defer s.Close()
				if err := blob.Put(ctx, s, "over", []byte("acknowledged"), nil); err != nil {
					t.Fatal(err)
				}
				if err := s.Finalize(ctx, "over"); err != nil {
					t.Fatal(err)
				}
				val := bytes.Repeat([]byte("n"), size)
				for _, c := range []struct {
					key  string
					opts *blob.WriterOptions
				}{{"over", nil}, {"fresh", &blob.WriterOptions{If: blob.IfNotExist()}}} {
					srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakBeforeReply, Streams: 1, CreatesOnly: true})
					before := s.Stats().WriteRecoveries
					if err := blob.Put(ctx, s, c.key, val, c.opts); err != nil {
						t.Errorf("Put %s whose reply was lost: %v", c.key, err)
						continue
					}
					if got := mustRead(ctx, t, s, c.key); !bytes.Equal(got, val) {
						t.Errorf("%s holds %d bytes, want the %d written", c.key, len(got), len(val))
					}
					// A write of several messages had its first reply: the
					// client resumes it by itself when it may retry.
					want := int64(1)
					if size > gcsrapidtest.MaxWriteMessage && rm.retries == 0 {
						want = 0
					}
					if n := s.Stats().WriteRecoveries - before; n != want {
						t.Errorf("Put %s: %d recoveries, want %d", c.key, n, want)
					}
				}
				if st := srv.Stats(); st.WriteBreaks != 2 || st.MessagesRefused != 0 {
					t.Errorf("%d breaks, %d refused messages; want 2 and 0", st.WriteBreaks, st.MessagesRefused)
				}
			})
		}
	}
}

// A multi-message write whose stream breaks after its first message (the
// object exists; its unflushed bytes are lost, so it is empty): the write is
// finished, not left empty in place of the value it replaced.
func TestLargePutBrokenAfterItsCreate(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			defer s.Close()
			if err := blob.Put(ctx, s, "k", []byte("acknowledged"), nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Finalize(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			val := bytes.Repeat([]byte("v"), 5<<20)
			srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 1, CreatesOnly: true})
			for _, opts := range []*blob.WriterOptions{nil, {If: blob.IfNotExist()}} {
				key := "k"
				if opts != nil {
					key = "fresh"
					srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 1, CreatesOnly: true})
				}
				if err := blob.Put(ctx, s, key, val, opts); err != nil {
					t.Fatalf("Put %s: %v", key, err)
				}
				if got := mustRead(ctx, t, s, key); !bytes.Equal(got, val) {
					t.Errorf("%s holds %d bytes, want %d", key, len(got), len(val))
				}
			}
			if st := srv.Stats(); st.WriteBreaks != 2 {
				t.Errorf("%d breaks, want 2", st.WriteBreaks)
			}
		})
	}
}

// When every stream breaks, the write fails, and what its stream created is
// deleted: no empty or partial object stays, and a conditional write does
// not report its own leftover as ErrExists, then or on the caller's retry.
func TestPutThatCannotFinishLeavesNothing(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			val := bytes.Repeat([]byte("v"), 5<<20)
			srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterMessages, N: 1})
			for _, opts := range []*blob.WriterOptions{nil, {If: blob.IfNotExist()}} {
				key := "u"
				if opts != nil {
					key = "c"
				}
				err := blob.Put(ctx, s, key, val, opts)
				if err == nil || errors.Is(err, blob.ErrExists) {
					t.Errorf("Put %s under a break on every stream: %v, want a failure other than ErrExists", key, err)
				}
			}
			s.Close() // waits for the deletes of what the failed writes left
			srv.ClearBreaks()
			s = newStoreOnBucket(ctx, t, srv, s.Bucket(), gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			defer s.Close()
			for _, key := range []string{"u", "c"} {
				if _, err := s.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
					t.Errorf("Stat %s after its failed write: %v, want ErrNotFound", key, err)
				}
			}
			if err := blob.Put(ctx, s, "c", []byte("x"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
				t.Errorf("the caller's retry of the conditional Put: %v", err)
			}
			if st := srv.Stats(); st.WriteBreaks == 0 {
				t.Error("no stream broke")
			}
		})
	}
}

// A pooled writer whose stream breaks when it is used: its object (known by
// the generation of its prewarm) is finished.
func TestPooledWriteBroken(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 2}, Retries: rm.retries})
			defer s.Close()
			if _, err := blob.CreateBytes(ctx, s, "p/", []byte("warmup"), nil); err != nil {
				t.Fatal(err)
			}
			waitReady(t, s, "p/", 2)
			// A prewarmed stream's first message created its object; the
			// write is its second.
			for _, brk := range []gcsrapidtest.WriteBreak{
				{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 1},
				{At: gcsrapidtest.BreakBeforeReply, N: 2, Streams: 1, CreatesOnly: true},
			} {
				srv.BreakWrites(brk)
				before := srv.Stats().WriteBreaks
				name, err := blob.CreateBytes(ctx, s, "p/", []byte("record"), nil)
				if err != nil {
					t.Errorf("pooled write under %+v: %v", brk, err)
					continue
				}
				if got := mustRead(ctx, t, s, name); string(got) != "record" {
					t.Errorf("%s holds %q", name, got)
				}
				if srv.Stats().WriteBreaks == before {
					t.Errorf("%+v broke no stream", brk)
				}
				srv.ClearBreaks()
			}
		})
	}
}

// A stream that breaks right after a flush was answered: the flushed bytes
// are durable, and the append stream's next Append finds its stream broken;
// with retries the client resumes it.
func TestAppendStreamBrokenAfterAFlush(t *testing.T) {
	ctx := context.Background()
	srv := strictServer(t, gcsrapidtest.Options{})
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool})
	defer s.Close()
	srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterFlush, Streams: 1})
	a, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Append(ctx, []byte("more")); err != nil {
		t.Fatalf("Append after the stream broke: %v", err)
	}
	if got := mustRead(ctx, t, s, "log"); string(got) != "head|more" || a.Size() != 9 {
		t.Errorf("log holds %q, stream size %d", got, a.Size())
	}
	if st := srv.Stats(); st.WriteBreaks != 1 || st.Calls["BidiWriteObject"] < 2 {
		t.Errorf("%d breaks, %d write streams; want 1 and a resumption", st.WriteBreaks, st.Calls["BidiWriteObject"])
	}
	// Finalize and takeovers name their generation, which a Rapid bucket
	// requires.
	b, err := s.TakeOverAppendStream(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, []byte("|tail")); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Finalize(ctx, "log"); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.MessagesRefused != 0 {
		t.Errorf("%d messages or takeovers refused", st.MessagesRefused)
	}
}

// A ReaderAt whose stream the service ended opens another, within the
// Store's retries.
func TestReaderAtReopensAnEndedStream(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			// Long enough for the first ReadAt on a busy machine; the count
			// is taken before the stream opens, so that a stream ended
			// before the wait below began is counted.
			srv := strictServer(t, gcsrapidtest.Options{ReadStreamLifetime: 300 * time.Millisecond})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			defer s.Close()
			val := []byte("0123456789")
			if err := blob.Put(ctx, s, "r", val, nil); err != nil {
				t.Fatal(err)
			}
			ended := srv.Stats().ReadStreamsEnded
			ra, err := s.OpenReaderAt(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			defer ra.Close()
			p := make([]byte, 4)
			if n, err := ra.ReadAt(p, 2); n != 4 || err != nil || string(p) != "2345" {
				t.Fatalf("first ReadAt: %d %q %v", n, p, err)
			}
			waitFor(func() bool { return srv.Stats().ReadStreamsEnded > ended })
			n, err := ra.ReadAt(p, 6)
			if rm.retries < 0 {
				if err == nil {
					t.Errorf("ReadAt on an ended stream without retries: %d %q, want an error", n, p)
				}
				return
			}
			if n != 4 || (err != nil && err != io.EOF) || string(p) != "6789" {
				t.Errorf("ReadAt after the stream ended: %d %q %v", n, p, err)
			}
			if got := s.Stats().ReadReopens; got == 0 {
				t.Error("no stream was reopened")
			}
		})
	}
}

// newStoreOnBucket opens a Store over an existing bucket with a client of
// its own.
func newStoreOnBucket(ctx context.Context, t *testing.T, srv *gcsrapidtest.Server, bucket string, opts gcsrapid.Options) *gcsrapid.Store {
	t.Helper()
	client, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	s, err := gcsrapid.New(ctx, client, bucket, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A range read whose stream the service ends part way through its answer
// goes on from where it got on a new stream, within the Store's retries in
// a row without progress.
func TestRangeReadReopensAnEndedStream(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.Name = "slow reads"
	// Each 2 MiB piece of an answer takes 10 ms, so a stream living 15 ms
	// ends inside a 10 MiB answer.
	p.ReadPerMiB = latency.Dist{P50: 5 * time.Millisecond, P99: 5 * time.Millisecond, Source: "test"}
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{Profile: p, ReadStreamLifetime: 15 * time.Millisecond})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			defer s.Close()
			val := make([]byte, 10<<20)
			for i := range val {
				val[i] = byte(i * 7)
			}
			if err := blob.Put(ctx, s, "big", val, nil); err != nil {
				t.Fatal(err)
			}
			got, err := blob.ReadRange(ctx, s, "big", 1, -1)
			if srv.Stats().ReadStreamsEnded == 0 {
				t.Fatal("no read stream ended: the test proves nothing")
			}
			if rm.retries < 0 {
				if err == nil {
					t.Error("a read whose stream ended succeeded without retries")
				}
				return
			}
			if err != nil || !bytes.Equal(got, val[1:]) {
				t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(val)-1)
			}
			if s.Stats().ReadReopens == 0 {
				t.Error("no stream was reopened")
			}
		})
	}
}

// Zonal write and read streams may be redirected (ABORTED with a routing
// token to replay); every call goes through, with or without retries.
func TestRedirectedStreams(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 2}, Retries: rm.retries})
			defer s.Close()
			big := bytes.Repeat([]byte("r"), 3<<20)
			steps := []struct {
				name string
				do   func() error
			}{
				{"Put", func() error { return blob.Put(ctx, s, "k", []byte("value"), nil) }},
				{"Put IfNotExist", func() error {
					return blob.Put(ctx, s, "c", big, &blob.WriterOptions{If: blob.IfNotExist()})
				}},
				{"Create", func() error { _, err := blob.CreateBytes(ctx, s, "p/", []byte("x"), nil); return err }},
				{"ReadAll", func() error {
					got, err := blob.ReadAll(ctx, s, "c")
					if err == nil && !bytes.Equal(got, big) {
						err = fmt.Errorf("read %d bytes", len(got))
					}
					return err
				}},
				{"ReadAt", func() error {
					ra, err := s.OpenReaderAt(ctx, "k")
					if err != nil {
						return err
					}
					defer ra.Close()
					p := make([]byte, 5)
					if _, err := ra.ReadAt(p, 0); err != nil && err != io.EOF {
						return err
					}
					return nil
				}},
				{"append stream", func() error {
					a, err := s.CreateAppendStream(ctx, "log", []byte("a"))
					if err != nil {
						return err
					}
					defer a.Close()
					return a.Append(ctx, []byte("b"))
				}},
				{"takeover and finalize", func() error {
					b, err := s.TakeOverAppendStream(ctx, "log")
					if err != nil {
						return err
					}
					b.Close()
					return s.Finalize(ctx, "log")
				}},
			}
			for _, st := range steps {
				srv.Redirect(1)
				before := srv.Stats()
				if err := st.do(); err != nil {
					t.Errorf("%s, redirected: %v", st.name, err)
				}
				after := srv.Stats()
				if after.Redirects == before.Redirects {
					t.Errorf("%s made no stream that was redirected", st.name)
				}
			}
			// A redirect can fall on a pool's background prewarm, which
			// follows it on its own time: on a busy machine, after the
			// last step returned.
			for i := 0; ; i++ {
				st := srv.Stats()
				if st.RedirectsFollowed >= st.Redirects && st.MessagesRefused == 0 {
					break
				}
				if i > 1000 {
					t.Errorf("%d redirects, %d followed, %d refused", st.Redirects, st.RedirectsFollowed, st.MessagesRefused)
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// Pooled writers whose streams broke right after their prewarm's flush (the
// object exists, empty and marked) are still written: by the client's own
// resumption, or else by a takeover of the prewarm's generation.
func TestPooledWritersBrokenAfterTheirPrewarm(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterFlush, Streams: 3, CreatesOnly: true})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 3}, Retries: rm.retries})
			defer s.Close()
			for i := range 8 {
				val := []byte(fmt.Sprintf("record %d", i))
				name, err := blob.CreateBytes(ctx, s, "p/", val, nil)
				if err != nil {
					t.Fatalf("Create %d: %v", i, err)
				}
				if got := mustRead(ctx, t, s, name); !bytes.Equal(got, val) {
					t.Errorf("%s holds %q, want %q", name, got, val)
				}
			}
			if st := srv.Stats(); st.WriteBreaks != 3 {
				t.Errorf("%d streams broke, want 3", st.WriteBreaks)
			}
			if ps := s.Stats().Pools["p/"]; ps.Hits == 0 {
				t.Errorf("no write was pooled: %+v", ps)
			}
			if rec := s.Stats().WriteRecoveries; rm.retries < 0 && rec == 0 {
				t.Error("without retries no broken pooled writer was finished by a takeover")
			}
		})
	}
}

// A write stream redirected after it opened (ABORTED with a routing token,
// the write handle and, or not, the generation) is resumed by the client as
// the same writer: every write goes through whole, with no takeover (no
// other writer's stream is revoked) and no recovery by the driver.
func TestWritesRedirectedMidStream(t *testing.T) {
	ctx := context.Background()
	for _, omit := range []bool{false, true} {
		for _, brk := range []gcsrapidtest.WriteBreak{
			{At: gcsrapidtest.BreakAfterMessages, N: 1, CreatesOnly: true},
			{At: gcsrapidtest.BreakAfterFlush},
			{At: gcsrapidtest.BreakBeforeReply, CreatesOnly: true},
		} {
			brk.Redirect, brk.OmitGeneration, brk.Streams = true, omit, 1
			t.Run(fmt.Sprintf("%v/omitGeneration=%v", brk.At, omit), func(t *testing.T) {
				srv := strictServer(t, gcsrapidtest.Options{})
				s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: -1})
				defer s.Close()
				for i, val := range [][]byte{[]byte("small"), bytes.Repeat([]byte("v"), 5<<20)} {
					key := fmt.Sprintf("k%d", i)
					srv.BreakWrites(brk)
					before := srv.Stats()
					if err := blob.Put(ctx, s, key, val, &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
						t.Fatalf("Put of %d bytes, redirected: %v", len(val), err)
					}
					if got := mustRead(ctx, t, s, key); !bytes.Equal(got, val) {
						t.Errorf("%s holds %d bytes, want %d", key, len(got), len(val))
					}
					after := srv.Stats()
					if after.Redirects == before.Redirects && brk.At != gcsrapidtest.BreakAfterMessages {
						t.Errorf("Put of %d bytes: no stream was redirected", len(val))
					}
					if after.Takeovers != before.Takeovers {
						t.Errorf("Put of %d bytes: %d takeovers, want none", len(val), after.Takeovers-before.Takeovers)
					}
					srv.ClearBreaks()
				}
				// An append stream redirected at its create or between
				// its flushes goes on, following the redirect.
				abrk := brk
				if abrk.At == gcsrapidtest.BreakAfterFlush {
					abrk.N = 2 // after the first append's flush
				}
				srv.BreakWrites(abrk)
				before := srv.Stats()
				a, err := s.CreateAppendStream(ctx, "log", []byte("a"))
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{"b", "c", "d"} {
					if err := a.Append(ctx, []byte(p)); err != nil {
						t.Fatalf("append %s, redirected: %v", p, err)
					}
				}
				a.Close()
				if got := mustRead(ctx, t, s, "log"); string(got) != "abcd" {
					t.Errorf("log holds %q, want abcd", got)
				}
				after := srv.Stats()
				if after.Redirects == before.Redirects || after.RedirectsFollowed == before.RedirectsFollowed || after.MessagesRefused != 0 {
					t.Errorf("append stream: %d redirects, %d followed, %d messages refused", after.Redirects-before.Redirects, after.RedirectsFollowed-before.RedirectsFollowed, after.MessagesRefused)
				}
				if after.Takeovers != before.Takeovers {
					t.Errorf("append stream: %d takeovers, want none", after.Takeovers-before.Takeovers)
				}
				if r := s.Stats().WriteRecoveries; r != 0 {
					t.Errorf("%d writes recovered by the driver, want none: the client follows redirects", r)
				}
			})
		}
	}
}
