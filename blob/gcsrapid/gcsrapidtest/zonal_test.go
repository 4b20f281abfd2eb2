package gcsrapidtest

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestZonalCreateFlushReadFinalize(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	obj := c.Bucket("zonal").Object("log/0001")

	w := obj.NewWriter(ctx)
	w.Append = true
	w.FinalizeOnClose = false
	w.ContentType = "text/plain"
	w.Metadata = map[string]string{"k": "v"}
	if _, err := w.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	off, err := w.Flush()
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if off != 6 {
		t.Fatalf("Flush offset = %d, want 6", off)
	}

	// The flushed prefix is readable before the object is finalized.
	r, err := obj.NewRangeReader(ctx, 0, -1)
	if err != nil {
		t.Fatalf("NewRangeReader: %v", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatalf("read unfinalized: %v", err)
	}
	if string(got) != "hello " {
		t.Fatalf("unfinalized read = %q, want %q", got, "hello ")
	}
	attrs, err := obj.Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !attrs.Finalized.IsZero() {
		t.Fatalf("object finalized too early: %v", attrs.Finalized)
	}
	if attrs.ContentType != "text/plain" || attrs.Metadata["k"] != "v" || attrs.Size != 6 {
		t.Fatalf("attrs = %+v", attrs)
	}

	if _, err := w.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := srv.Stats()
	if st.ObjectsCreated != 1 || st.ObjectsFinalized != 0 || st.Flushes < 2 {
		t.Fatalf("stats after unfinalized close = %+v", st)
	}
	if got := readAll(t, obj); string(got) != "hello world" {
		t.Fatalf("read = %q", got)
	}

	// Take the object over, append and finalize.
	w2, off, err := obj.Generation(attrs.Generation).NewWriterFromAppendableObject(ctx, &storage.AppendableWriterOpts{FinalizeOnClose: true})
	if err != nil {
		t.Fatalf("NewWriterFromAppendableObject: %v", err)
	}
	if off != 11 {
		t.Fatalf("takeover offset = %d, want 11", off)
	}
	if _, err := w2.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatalf("Close after takeover: %v", err)
	}
	if got := readAll(t, obj); string(got) != "hello world!" {
		t.Fatalf("read after takeover = %q", got)
	}
	attrs, err = obj.Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Finalized.IsZero() || attrs.Size != 12 || attrs.CRC32C != crcOf([]byte("hello world!")) {
		t.Fatalf("attrs after finalize = %+v", attrs)
	}
	st = srv.Stats()
	if st.ObjectsCreated != 1 || st.ObjectsFinalized != 1 || st.Takeovers != 1 {
		t.Fatalf("stats after finalize = %+v", st)
	}

	// A finalized object takes no more appends.
	_, _, err = obj.Generation(attrs.Generation).NewWriterFromAppendableObject(ctx, &storage.AppendableWriterOpts{})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("takeover of a finalized object: err = %v, want FailedPrecondition", err)
	}
}

func TestZonalTakeoverFencesPreviousWriter(t *testing.T) {
	_, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	obj := c.Bucket("zonal").Object("fenced")
	w := obj.NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.Write([]byte("a"))
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	attrs, err := obj.Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2, _, err := obj.Generation(attrs.Generation).NewWriterFromAppendableObject(ctx, &storage.AppendableWriterOpts{})
	if err != nil {
		t.Fatal(err)
	}
	w2.Write([]byte("b"))
	if _, err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	if _, err := w.Flush(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("flush by the fenced writer: err = %v, want FailedPrecondition", err)
	}
	w.Close()
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, obj); string(got) != "ab" {
		t.Fatalf("read = %q, want %q", got, "ab")
	}
}

func TestZonalOneShotFinalize(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	obj := c.Bucket("zonal").Object("naive")
	w := obj.NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, true
	w.Write([]byte("payload"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Attrs() == nil || w.Attrs().Finalized.IsZero() || w.Attrs().Size != 7 {
		t.Fatalf("writer attrs = %+v", w.Attrs())
	}
	st := srv.Stats()
	if st.ObjectsCreated != 1 || st.ObjectsFinalized != 1 || st.Calls["BidiWriteObject"] != 1 {
		t.Fatalf("a naive create+write+finalize should be one stream, one create, one finalize: %+v", st)
	}
}

func TestConditions(t *testing.T) {
	_, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	for _, bkt := range []string{"zonal", "regional"} {
		t.Run(bkt, func(t *testing.T) {
			obj := c.Bucket(bkt).Object("cond")
			write := func(o *storage.ObjectHandle, data string) error {
				w := o.NewWriter(ctx)
				w.Append = bkt == "zonal"
				w.FinalizeOnClose = true
				w.Write([]byte(data))
				return w.Close()
			}
			if err := write(obj.If(storage.Conditions{DoesNotExist: true}), "first"); err != nil {
				t.Fatalf("create if absent: %v", err)
			}
			err := write(obj.If(storage.Conditions{DoesNotExist: true}), "second")
			if status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("create if absent over an existing object: err = %v, want FailedPrecondition", err)
			}
			attrs, err := obj.Attrs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := write(obj.If(storage.Conditions{GenerationMatch: attrs.Generation + 1}), "x"); status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("generation mismatch: err = %v, want FailedPrecondition", err)
			}
			if err := write(obj.If(storage.Conditions{GenerationMatch: attrs.Generation}), "third"); err != nil {
				t.Fatalf("generation match: %v", err)
			}
			if got := readAll(t, obj); string(got) != "third" {
				t.Fatalf("read = %q", got)
			}
		})
	}
}

func TestWrongBucketKind(t *testing.T) {
	_, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	w := c.Bucket("regional").Object("a").NewWriter(ctx)
	w.Append = true
	w.Write([]byte("x"))
	if err := w.Close(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("appendable write to a regional bucket: err = %v, want FailedPrecondition", err)
	}
	w = c.Bucket("zonal").Object("a").NewWriter(ctx)
	w.Append = false
	w.Write([]byte("x"))
	if err := w.Close(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("ordinary write to a zonal bucket: err = %v, want FailedPrecondition", err)
	}
}

func writeZonal(t *testing.T, c *storage.Client, name string, data []byte, finalize bool) {
	t.Helper()
	w := c.Bucket("zonal").Object(name).NewWriter(testCtx(t))
	w.Append, w.FinalizeOnClose = true, finalize
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if !finalize {
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMultiRangeDownloader(t *testing.T) {
	_, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	data := make([]byte, 5<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, finalize := range []bool{true, false} {
		name := "mrd-final"
		if !finalize {
			name = "mrd-open"
		}
		t.Run(name, func(t *testing.T) {
			writeZonal(t, c, name, data, finalize)
			mrd, err := c.Bucket("zonal").Object(name).NewMultiRangeDownloader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			type rng struct{ off, length, wantOff, wantLen int64 }
			n := int64(len(data))
			ranges := []rng{
				{0, 10, 0, 10},
				{100, 3 << 20, 100, 3 << 20},
				{-50, 0, n - 50, 50},
				{n - 5, 100, n - 5, 5}, // past the end: cut short
				{n, 0, n, 0},
			}
			bufs := make([]bytes.Buffer, len(ranges))
			var mu sync.Mutex
			errs := map[int]error{}
			for i, r := range ranges {
				i := i
				mrd.Add(&bufs[i], r.off, r.length, func(off, length int64, err error) {
					mu.Lock()
					errs[i] = err
					mu.Unlock()
				})
			}
			mrd.Wait()
			if err := mrd.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for i, r := range ranges {
				if errs[i] != nil {
					t.Errorf("range %d: %v", i, errs[i])
					continue
				}
				want := data[r.wantOff : r.wantOff+r.wantLen]
				if !bytes.Equal(bufs[i].Bytes(), want) {
					t.Errorf("range %d (%d,%d): got %d bytes, want %d", i, r.off, r.length, bufs[i].Len(), len(want))
				}
			}
		})
	}

	// An offset past the end fails the range with OutOfRange.
	mrd, err := c.Bucket("zonal").Object("mrd-final").NewMultiRangeDownloader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got error
	var buf bytes.Buffer
	mrd.Add(&buf, int64(len(data))+10, 5, func(_, _ int64, err error) { got = err })
	mrd.Wait()
	mrd.Close()
	if status.Code(got) != codes.OutOfRange {
		t.Fatalf("range past the end: err = %v, want OutOfRange", got)
	}
}

func TestReadRanges(t *testing.T) {
	_, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	data := []byte(strings.Repeat("0123456789", 100))
	writeZonal(t, c, "r", data, false)
	obj := c.Bucket("zonal").Object("r")
	cases := []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{10, 5, data[10:15]},
		{990, 100, data[990:]},
		{-10, -1, data[990:]},
		{1000, -1, nil},
	}
	for _, tc := range cases {
		r, err := obj.NewRangeReader(ctx, tc.off, tc.length)
		if err != nil {
			t.Fatalf("NewRangeReader(%d, %d): %v", tc.off, tc.length, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Fatalf("NewRangeReader(%d, %d) = %q, %v; want %q", tc.off, tc.length, got, err, tc.want)
		}
	}
	if _, err := obj.NewRangeReader(ctx, 2000, -1); status.Code(err) != codes.OutOfRange {
		t.Fatalf("read past the end: err = %v, want OutOfRange", err)
	}
	if _, err := c.Bucket("zonal").Object("missing").NewReader(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("read of a missing object: err = %v, want ErrObjectNotExist", err)
	}
}

// TestPooledWriterCostsOneCreate is what a writer pool relies on: an object
// opened once takes any number of write+flush cycles without another
// metadata operation or stream.
func TestPooledWriterCostsOneCreate(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	w := c.Bucket("zonal").Object("pooled").NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	for i := range 4 {
		if _, err := w.Write([]byte("record\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		st := srv.Stats()
		if st.ObjectsCreated != 1 || st.Flushes != int64(i+1) || st.Calls["BidiWriteObject"] != 1 || st.BytesWritten != int64(7*(i+1)) {
			t.Fatalf("after %d write+flush: %+v", i+1, st)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.ObjectsFinalized != 0 || st.ObjectsCreated != 1 {
		t.Fatalf("after an unfinalized Close: %+v", st)
	}
}
