package gcsrapidtest

import (
	"context"
	"io"
	"testing"
	"time"

	"cloud.google.com/go/storage"
)

// newTestServer starts a zero-latency server with a zonal bucket "zonal"
// and a regional bucket "regional", and a client with the zonal APIs on.
func newTestServer(t testing.TB, opts Options) (*Server, *storage.Client) {
	t.Helper()
	if opts.Buckets == nil {
		opts.Buckets = []Bucket{{Name: "zonal", Zonal: true}, {Name: "regional"}}
	}
	srv := Start(t, opts)
	c, err := srv.Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run in reverse order: the client closes before the server.
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
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
