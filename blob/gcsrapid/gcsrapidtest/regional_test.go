package gcsrapidtest

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRegionalWritesRoundTripMetadata(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	big := bytes.Repeat([]byte("regional"), 200_000) // 1.6 MB: several resumable chunks
	cases := []struct {
		name      string
		chunkSize int
		data      []byte
		wantCalls map[string]int64
	}{
		{"oneshot", 0, []byte("small object"), map[string]int64{"BidiWriteObject": 1}},
		{"resumable", 256 << 10, big, map[string]int64{"StartResumableWrite": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Stats()
			obj := c.Bucket("regional").Object("meta/" + tc.name)
			w := obj.NewWriter(ctx)
			w.Append = false
			w.ChunkSize = tc.chunkSize
			w.ContentType = "application/x-test"
			w.CacheControl = "no-cache"
			w.ContentDisposition = "attachment"
			w.ContentEncoding = "identity"
			w.ContentLanguage = "fr"
			w.Metadata = map[string]string{"a": "1", "b": "2"}
			sum := md5.Sum(tc.data)
			w.MD5 = sum[:]
			if _, err := w.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			after := srv.Stats()
			for k, v := range tc.wantCalls {
				if got := after.Calls[k] - before.Calls[k]; got != v {
					t.Errorf("%s calls = %d, want %d", k, got, v)
				}
			}
			a, err := obj.Attrs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if a.ContentType != "application/x-test" || a.CacheControl != "no-cache" || a.ContentDisposition != "attachment" ||
				a.ContentEncoding != "identity" || a.ContentLanguage != "fr" || a.Metadata["a"] != "1" || a.Metadata["b"] != "2" {
				t.Errorf("attrs = %+v", a)
			}
			if !bytes.Equal(a.MD5, sum[:]) || a.CRC32C != crcOf(tc.data) || a.Size != int64(len(tc.data)) {
				t.Errorf("checksums/size = %x %d %d", a.MD5, a.CRC32C, a.Size)
			}
			if a.Generation == 0 || a.Metageneration != 1 || a.Created.IsZero() || a.Updated.IsZero() || a.Finalized.IsZero() {
				t.Errorf("generation/times = %+v", a)
			}
			if got := readAll(t, obj); !bytes.Equal(got, tc.data) {
				t.Errorf("read %d bytes, want %d", len(got), len(tc.data))
			}
			// The legacy ReadObject path, used by clients without bidi reads.
			plain, err := storage.NewGRPCClient(ctx, srv.ClientOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			if got := readAll(t, plain.Bucket("regional").Object("meta/"+tc.name)); !bytes.Equal(got, tc.data) {
				t.Errorf("ReadObject read %d bytes, want %d", len(got), len(tc.data))
			}
			r, err := plain.Bucket("regional").Object("meta/"+tc.name).NewRangeReader(ctx, 3, 4)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			buf.ReadFrom(r)
			r.Close()
			if !bytes.Equal(buf.Bytes(), tc.data[3:7]) {
				t.Errorf("ReadObject range = %q, want %q", buf.Bytes(), tc.data[3:7])
			}
		})
	}
}

func TestMD5Mismatch(t *testing.T) {
	_, c := newTestServer(t, Options{})
	w := c.Bucket("regional").Object("bad-md5").NewWriter(testCtx(t))
	w.Append = false
	w.MD5 = make([]byte, 16)
	w.Write([]byte("data"))
	if err := w.Close(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
}

func TestUpdateCopyDelete(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	src := c.Bucket("regional").Object("src")
	w := src.NewWriter(ctx)
	w.Append = false
	w.Metadata = map[string]string{"keep": "1", "drop": "2"}
	w.Write([]byte("copy me"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := src.Update(ctx, storage.ObjectAttrsToUpdate{ContentType: "text/x", Metadata: map[string]string{"keep": "1", "drop": ""}})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if a.ContentType != "text/x" || a.Metageneration != 2 || a.Metadata["keep"] != "1" {
		t.Fatalf("updated attrs = %+v", a)
	}
	// The gRPC API cannot delete one metadata key: the client documents
	// that an empty value is stored as such.
	if v, ok := a.Metadata["drop"]; !ok || v != "" {
		t.Fatalf("metadata = %v, want drop set to empty", a.Metadata)
	}
	if _, err := src.If(storage.Conditions{MetagenerationMatch: 1}).Update(ctx, storage.ObjectAttrsToUpdate{ContentType: "y"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("update with stale metageneration: err = %v, want FailedPrecondition", err)
	}

	dst := c.Bucket("regional").Object("dst")
	ca, err := dst.CopierFrom(src).Run(ctx)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if ca.Size != 7 || ca.ContentType != "text/x" {
		t.Fatalf("copy attrs = %+v", ca)
	}
	if got := readAll(t, dst); string(got) != "copy me" {
		t.Fatalf("copied data = %q", got)
	}
	if _, err := c.Bucket("zonal").Object("dst").CopierFrom(src).Run(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("copy into a zonal bucket: err = %v, want FailedPrecondition", err)
	}

	if err := dst.If(storage.Conditions{GenerationMatch: ca.Generation + 1}).Delete(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("delete with wrong generation precondition: err = %v, want FailedPrecondition", err)
	}
	if err := dst.Generation(ca.Generation + 1).Delete(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("delete of a missing generation: err = %v, want ErrObjectNotExist", err)
	}
	if err := dst.If(storage.Conditions{GenerationMatch: ca.Generation}).Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := dst.Delete(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("second delete: err = %v, want ErrObjectNotExist", err)
	}
	if _, err := dst.Attrs(ctx); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Fatalf("stat after delete: err = %v, want ErrObjectNotExist", err)
	}
	if st := srv.Stats(); st.ObjectsDeleted != 1 {
		t.Fatalf("ObjectsDeleted = %d, want 1", st.ObjectsDeleted)
	}
	if _, err := c.Bucket("nosuchbucket").Attrs(ctx); !errors.Is(err, storage.ErrBucketNotExist) {
		t.Fatalf("missing bucket: err = %v, want ErrBucketNotExist", err)
	}
}

func listNames(t *testing.T, c *storage.Client, q *storage.Query) []string {
	t.Helper()
	var out []string
	it := c.Bucket("zonal").Objects(testCtx(t), q)
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.Prefix != "" {
			out = append(out, "P:"+a.Prefix)
		} else {
			out = append(out, a.Name)
		}
	}
}

func TestList(t *testing.T) {
	_, c := newTestServer(t, Options{})
	for _, n := range []string{"a/1", "a/2", "a/b/3", "a/", "b", "c/x", "d"} {
		writeZonal(t, c, n, []byte(n), true)
	}
	cases := []struct {
		name string
		q    *storage.Query
		want string
	}{
		{"all", nil, "[a/ a/1 a/2 a/b/3 b c/x d]"},
		{"prefix", &storage.Query{Prefix: "a/"}, "[a/ a/1 a/2 a/b/3]"},
		// The client yields a page's objects before its prefixes.
		{"delimiter", &storage.Query{Delimiter: "/"}, "[b d P:a/ P:c/]"},
		{"prefix+delimiter", &storage.Query{Prefix: "a/", Delimiter: "/"}, "[a/ a/1 a/2 P:a/b/]"},
		{"trailing", &storage.Query{Delimiter: "/", IncludeTrailingDelimiter: true}, "[a/ b d P:a/ P:c/]"},
		{"lexicographic", &storage.Query{StartOffset: "a/2", EndOffset: "c"}, "[a/2 a/b/3 b]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(listNames(t, c, tc.q)); got != tc.want {
				t.Fatalf("list = %s, want %s", got, tc.want)
			}
		})
	}

	// Pages of two, with a token, see every name exactly once.
	it := c.Bucket("zonal").Objects(testCtx(t), nil)
	var pages [][]string
	pager := iterator.NewPager(it, 2, "")
	for {
		var page []*storage.ObjectAttrs
		tok, err := pager.NextPage(&page)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range page {
			names = append(names, a.Name)
		}
		pages = append(pages, names)
		if tok == "" {
			break
		}
	}
	if got := fmt.Sprint(pages); got != "[[a/ a/1] [a/2 a/b/3] [b c/x] [d]]" {
		t.Fatalf("pages = %s", got)
	}
}

func TestFaults(t *testing.T) {
	srv, c := newTestServer(t, Options{})
	ctx := testCtx(t)
	writeZonal(t, c, "f", []byte("data"), true)
	obj := c.Bucket("zonal").Object("f")

	t.Run("unavailable is retried", func(t *testing.T) {
		before := srv.Stats().Calls["GetObject"]
		srv.InjectFault(Fault{Method: "GetObject", Call: 1, Code: codes.Unavailable})
		defer srv.ClearFaults()
		if _, err := obj.Attrs(ctx); err != nil {
			t.Fatalf("Attrs after one UNAVAILABLE: %v", err)
		}
		if got := srv.Stats().Calls["GetObject"] - before; got != 2 {
			t.Fatalf("GetObject calls = %d, want 2 (one failed, one retry)", got)
		}
	})
	t.Run("aborted is not retried by default", func(t *testing.T) {
		srv.InjectFault(Fault{Method: "GetObject", Call: 1, Code: codes.Aborted})
		defer srv.ClearFaults()
		if _, err := obj.Attrs(ctx); status.Code(err) != codes.Aborted {
			t.Fatalf("err = %v, want Aborted", err)
		}
		srv.InjectFault(Fault{Method: "GetObject", Call: 1, Code: codes.Aborted})
		retryAborted := obj.Retryer(storage.WithErrorFunc(func(err error) bool { return status.Code(err) == codes.Aborted }))
		if _, err := retryAborted.Attrs(ctx); err != nil {
			t.Fatalf("Attrs with a retryer for ABORTED: %v", err)
		}
	})
	t.Run("stream broken mid-write", func(t *testing.T) {
		srv.InjectFault(Fault{Method: "BidiWriteObject", Call: 1, AfterMessages: 2})
		defer srv.ClearFaults()
		obj := c.Bucket("zonal").Object("broken")
		w := obj.NewWriter(ctx)
		w.Append, w.FinalizeOnClose = true, false
		w.ChunkSize = 256 << 10
		data := bytes.Repeat([]byte("z"), 3<<20)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(); err != nil {
			t.Fatalf("Flush after a broken stream: %v", err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, obj); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, want %d", len(got), len(data))
		}
		if got := srv.Stats().Calls["BidiWriteObject"]; got < 2 {
			t.Fatalf("BidiWriteObject calls = %d, want a retry", got)
		}
	})
}

func TestMemoryCap(t *testing.T) {
	srv, c := newTestServer(t, Options{MaxBytes: 1000})
	ctx := testCtx(t)
	noRetry := storage.WithPolicy(storage.RetryNever)
	w := c.Bucket("regional").Object("big").Retryer(noRetry).NewWriter(ctx)
	w.Append = false
	w.Write(make([]byte, 2000))
	if err := w.Close(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("write past the cap: err = %v, want ResourceExhausted", err)
	}
	if n := srv.BytesInUse(); n != 0 {
		t.Fatalf("BytesInUse after a rejected write = %d, want 0", n)
	}
	w = c.Bucket("zonal").Object("big").Retryer(noRetry).NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, true
	w.Write(make([]byte, 600))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Replacing an object frees the generation it replaces.
	w = c.Bucket("zonal").Object("big").Retryer(noRetry).NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, true
	w.Write(make([]byte, 700))
	if err := w.Close(); err != nil {
		t.Fatalf("replacing a 600-byte object with 700 bytes under a 1000-byte cap: %v", err)
	}
	if n := srv.BytesInUse(); n != 700 {
		t.Fatalf("BytesInUse = %d, want 700", n)
	}
}
