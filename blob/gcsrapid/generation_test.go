package gcsrapid_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/testkit"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// Every way of writing reports the generation it wrote, which a later
// delete conditions on without a Stat: a write that only buffered, one that
// streamed and declared its size (a metadata update, which must leave the
// generation alone), a prewarmed object written in place or replaced, an
// empty prewarmed write (unmarked by a metadata update) and an overwrite.
func TestWriterReportsGeneration(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, MaxBuffer: 4 << 20})
	defer s.Close()
	newWriter := func(opts *blob.WriterOptions) func(key string) (blob.Writer, error) {
		return func(key string) (blob.Writer, error) { return s.NewWriter(ctx, key, opts) }
	}
	prewarm := func(key string) (blob.Writer, error) { return s.Prewarm(ctx, key, nil) }
	for i, c := range []struct {
		name  string
		open  func(key string) (blob.Writer, error)
		size  int
		chunk int
	}{
		{"put", newWriter(nil), 10, 0},
		{"ifnotexist", newWriter(&blob.WriterOptions{If: blob.IfNotExist()}), 10, 0},
		{"empty", newWriter(nil), 0, 0},
		{"buffered-declared", newWriter(nil), 3<<20 + 1, 0}, // more than one message, less than MaxBuffer
		{"streamed", newWriter(nil), 5<<20 + 3, 300 << 10},
		{"streamed-ifnotexist", newWriter(&blob.WriterOptions{If: blob.IfNotExist()}), 5<<20 + 3, 1 << 20},
		{"prewarm", prewarm, 10, 0},
		{"prewarm-empty", prewarm, 0, 0},
		{"prewarm-replaced", prewarm, 3<<20 + 1, 700 << 10},
		{"prewarm-streamed", prewarm, 5<<20 + 3, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "gen/" + c.name
			w, err := c.open(key)
			if err != nil {
				t.Fatal(err)
			}
			if g, ok := blob.WrittenGeneration(w); ok {
				t.Errorf("a fresh writer reports generation %q", g)
			}
			g := conformance.WriteReported(ctx, t, s, key, w, payloadOf(i, c.size), c.chunk)
			w, err = s.NewWriter(ctx, key, &blob.WriterOptions{If: blob.IfGenerationMatch(g)})
			if err != nil {
				t.Fatal(err)
			}
			g2 := conformance.WriteReported(ctx, t, s, key, w, payloadOf(i+100, 7), 0)
			if g2 == g {
				t.Errorf("the overwrite reports the generation it replaced, %s", g)
			}
			if err := s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g2)}); err != nil {
				t.Errorf("Delete on condition of the reported generation: %v", err)
			}
		})
	}
}

// A write whose stream broke before the service's reply learns its
// generation from its own object, which it takes over and finishes: that
// generation is the one it reports.
func TestRecoveredWriteReportsGeneration(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		for _, size := range []int{10, 5 << 20} {
			t.Run(fmt.Sprintf("%s/%d bytes", rm.name, size), func(t *testing.T) {
				srv := strictServer(t, gcsrapidtest.Options{})
				s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
				defer s.Close()
				for _, opts := range []*blob.WriterOptions{nil, {If: blob.IfNotExist()}} {
					key := fmt.Sprintf("k%v", opts != nil)
					srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakBeforeReply, Streams: 1, CreatesOnly: true})
					before := s.Stats().WriteRecoveries
					w, err := s.NewWriter(ctx, key, opts)
					if err != nil {
						t.Fatal(err)
					}
					conformance.WriteReported(ctx, t, s, key, w, bytes.Repeat([]byte("r"), size), 0)
					// As in TestPutWhoseCreateLostItsReply: the client
					// resumes a write of several messages by itself when
					// it may retry; otherwise the driver takes it over.
					want := int64(1)
					if size > gcsrapidtest.MaxWriteMessage && rm.retries == 0 {
						want = 0
					}
					if n := s.Stats().WriteRecoveries - before; n != want {
						t.Errorf("%s: %d recoveries, want %d", key, n, want)
					}
				}
				if st := srv.Stats(); st.WriteBreaks != 2 {
					t.Errorf("%d breaks, want 2", st.WriteBreaks)
				}
			})
		}
	}
}

// A pooled writer whose stream broke after its prewarm is finished on the
// prewarm's generation, which it reports.
func TestBrokenPrewarmedWriteReportsGeneration(t *testing.T) {
	ctx := context.Background()
	for _, rm := range retryModes {
		t.Run(rm.name, func(t *testing.T) {
			srv := strictServer(t, gcsrapidtest.Options{})
			s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: noPool, Retries: rm.retries})
			defer s.Close()
			for i, brk := range []gcsrapidtest.WriteBreak{
				{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 1},
				{At: gcsrapidtest.BreakBeforeReply, N: 2, Streams: 1, CreatesOnly: true},
			} {
				key := fmt.Sprintf("p%d", i)
				w, err := s.Prewarm(ctx, key, nil)
				if err != nil {
					t.Fatal(err)
				}
				srv.BreakWrites(brk)
				before := srv.Stats().WriteBreaks
				conformance.WriteReported(ctx, t, s, key, w, []byte("record"), 0)
				if srv.Stats().WriteBreaks == before {
					t.Errorf("%+v broke no stream", brk)
				}
				srv.ClearBreaks()
			}
		})
	}
}

func payloadOf(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>8)
	}
	return b
}

// Create through the pool hands out a prewarmed writer behind the pool's
// own: the pool's writer passes the generation through.
func TestPooledCreateReportsGeneration(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 2}})
	defer s.Close()
	for i := range 3 {
		key, w, err := s.Create(ctx, "pooled/", nil)
		if err != nil {
			t.Fatal(err)
		}
		g := conformance.WriteReported(ctx, t, s, key, w, payloadOf(i, 10+i), 0)
		if err := s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g)}); err != nil {
			t.Errorf("Delete on condition of the reported generation: %v", err)
		}
	}
}
