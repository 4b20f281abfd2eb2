package gcsrapid_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// visibleAs checks what every read path says of key: hidden (NotFound,
// unlisted) or visible with want.
func visibleAs(ctx context.Context, t *testing.T, s *gcsrapid.Store, key string, want []byte, metadata ...string) {
	t.Helper()
	a, err := s.Stat(ctx, key)
	listed := false
	for o, lerr := range blob.All(ctx, s, &blob.ListOptions{Prefix: key}) {
		if lerr != nil {
			t.Fatal(lerr)
		}
		if o.Key == key {
			listed = true
			if want != nil && o.Size != int64(len(want)) {
				t.Errorf("%s listed with size %d, want %d", key, o.Size, len(want))
			}
		}
	}
	got, rerr := blob.ReadAll(ctx, s, key)
	ra, oerr := s.OpenReaderAt(ctx, key)
	if oerr == nil {
		ra.Close()
	}
	if want == nil {
		for what, err := range map[string]error{"Stat": err, "read": rerr, "OpenReaderAt": oerr} {
			if !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s of %s, whose write is not whole: %v, want ErrNotFound", what, key, err)
			}
		}
		if listed {
			t.Errorf("%s is listed before its write is whole", key)
		}
		return
	}
	if err != nil || a.Size != int64(len(want)) || !listed || rerr != nil || !bytes.Equal(got, want) || oerr != nil {
		t.Errorf("%s: Stat %+v, %v; listed %v; read %d bytes, %v; OpenReaderAt %v; want it whole, %d bytes", key, a, err, listed, len(got), rerr, oerr, len(want))
	}
	if a != nil && (len(a.Metadata) != len(metadata)/2 || len(metadata) == 2 && a.Metadata[metadata[0]] != metadata[1]) {
		t.Errorf("%s has metadata %v, want %v and none of the driver's", key, a.Metadata, metadata)
	}
}

// A write of more than one message declares its size when it creates its
// object, and readers do not see the object until it holds that many bytes,
// even when the service reports its size out of date.
func TestMultiMessageWritesAreHiddenUntilWhole(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := strictServer(t, gcsrapidtest.Options{Profile: p})
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 2}, MaxBuffer: 8 << 20})
	defer s.Close()
	rc, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	big := bytes.Repeat([]byte("b"), 5<<20)

	// A write caught half way: what a writer's first messages leave.
	w := rc.Bucket(s.Bucket()).Object("half").NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.Metadata = map[string]string{"zonalblob-size": "5242880"}
	w.Write(big[:3<<20])
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, "half", nil)
	w.Write(big[3<<20:])
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if a, err := rc.Bucket(s.Bucket()).Object("half").Attrs(ctx); err != nil || a.Size == int64(len(big)) {
		t.Fatalf("the service reports size %v, %v: its sizes are not stale, the test proves nothing", a.Size, err)
	}
	visibleAs(ctx, t, s, "half", big)

	// Puts and pooled writes of several messages, and one that streams.
	if err := blob.Put(ctx, s, "put", big, nil); err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, "put", big)
	if _, err := blob.CreateBytes(ctx, s, "p/", []byte("warm"), nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "p/", 2)
	name, err := blob.CreateBytes(ctx, s, "p/", big, nil)
	if err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, name, big)
	huge := bytes.Repeat([]byte("h"), 9<<20)
	sw, err := s.NewWriter(ctx, "stream", &blob.WriterOptions{Metadata: map[string]string{"user": "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write(huge); err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, "stream", nil) // streamed, not yet committed
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, "stream", huge, "user", "kept")
	if st := srv.Stats(); st.MessagesRefused != 0 {
		t.Errorf("%d messages refused", st.MessagesRefused)
	}
}

// An append stream whose first data takes more than one message is hidden
// until all of it is flushed: a create that breaks after its first message
// leaves nothing a reader sees, and one that succeeds is seen whole, then
// grows with each append.
func TestAppendStreamFirstDataHiddenUntilWhole(t *testing.T) {
	ctx := context.Background()
	srv := strictServer(t, gcsrapidtest.Options{})
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}, Retries: -1})
	defer s.Close()
	first := bytes.Repeat([]byte("f"), 5<<20)
	srv.BreakWrites(gcsrapidtest.WriteBreak{At: gcsrapidtest.BreakAfterMessages, N: 1, Streams: 1, CreatesOnly: true})
	if _, err := s.CreateAppendStream(ctx, "broken", first); err == nil {
		t.Fatal("append stream created through a broken stream")
	}
	if st := srv.Stats(); st.WriteBreaks != 1 {
		t.Fatalf("%d breaks, want 1", st.WriteBreaks)
	}
	visibleAs(ctx, t, s, "broken", nil)

	a, err := s.CreateAppendStream(ctx, "log", first)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	visibleAs(ctx, t, s, "log", first)
	if err := a.Append(ctx, []byte("+")); err != nil {
		t.Fatal(err)
	}
	visibleAs(ctx, t, s, "log", append(first, '+'))
}
