package gcsrapidtest

import (
	"io"
	"testing"
	"time"

	"cloud.google.com/go/storage"
)

// With StaleSize, metadata reads of an unfinalized object report the size of
// its first flush until a later flush is StaleSize old; reads return every
// byte; a finalized object reports the truth.
func TestStaleSizesOfUnfinalizedObjects(t *testing.T) {
	for _, lag := range []time.Duration{0, time.Hour} {
		p := Zero()
		p.StaleSize = lag
		_, c := newTestServer(t, Options{Profile: p})
		ctx := testCtx(t)
		obj := c.Bucket("zonal").Object("grows")
		w := obj.NewWriter(ctx)
		w.Append, w.FinalizeOnClose = true, false
		w.Write([]byte("abc"))
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("defg"))
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		want := int64(7)
		if lag > 0 {
			want = 3
		}
		a, err := obj.Attrs(ctx)
		if err != nil || a.Size != want {
			t.Errorf("lag %v: Attrs size %d, %v; want %d", lag, a.Size, err, want)
		}
		it := c.Bucket("zonal").Objects(ctx, nil)
		if la, err := it.Next(); err != nil || la.Size != want {
			t.Errorf("lag %v: listed size %d, %v; want %d", lag, la.Size, err, want)
		}
		r, err := obj.NewRangeReader(ctx, 0, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || string(got) != "abcdefg" || r.Attrs.Size != want {
			t.Errorf("lag %v: read %q (size %d), %v; want every byte, size %d reported", lag, got, r.Attrs.Size, err, want)
		}
		w.Close()
		fw, _, err := obj.Generation(a.Generation).NewWriterFromAppendableObject(ctx, &storage.AppendableWriterOpts{FinalizeOnClose: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		if a, err := obj.Attrs(ctx); err != nil || a.Size != 7 {
			t.Errorf("lag %v: finalized size %d, %v; want 7", lag, a.Size, err)
		}
	}
}
