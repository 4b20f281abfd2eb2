package gcsrapidtest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"cloud.google.com/go/storage"
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
	if st.ObjectsCreated != 1 || st.ObjectsFinalized != 0 {
		t.Fatalf("stats after unfinalized close = %+v", st)
	}
	got = readAll(t, obj)
	if string(got) != "hello world" {
		t.Fatalf("read = %q", got)
	}
	_ = bytes.Equal
	_ = errors.Is
	_ = storage.ErrObjectNotExist
}

func readAll(t *testing.T, obj *storage.ObjectHandle) []byte {
	t.Helper()
	r, err := obj.NewReader(testCtx(t))
	if err != nil {
		t.Fatalf("NewReader %s: %v", obj.ObjectName(), err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", obj.ObjectName(), err)
	}
	return b
}
