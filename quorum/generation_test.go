package quorum_test

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// A quorum writer reports the version its round made current, which Stat
// reports as the Generation and a Delete can be conditioned on: for every
// kind of write, a fresh name (Create, Prewarm) included.
func TestWriterReportsGeneration(t *testing.T) {
	ctx := context.Background()
	q := newQuorum(t, testkit.Mems(t, 3), testOptions())
	defer q.Close()
	check := func(key string, w blob.Writer, data string) string {
		t.Helper()
		return conformance.WriteReported(ctx, t, q, key, w, []byte(data), 0)
	}
	open := func(key string, o *blob.WriterOptions) blob.Writer {
		t.Helper()
		w, err := q.NewWriter(ctx, key, o)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	g := check("k", open("k", nil), "one")
	check("k", open("k", &blob.WriterOptions{If: blob.IfGenerationMatch(g)}), "two")
	check("k", open("k", nil), "three")
	check("n", open("n", &blob.WriterOptions{If: blob.IfNotExist()}), "new")
	key, w, err := blob.Create(ctx, q, "c/", nil)
	if err != nil {
		t.Fatal(err)
	}
	check(key, w, "created")
	w, err = blob.Prewarm(ctx, q, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	gp := check("p", w, "prewarmed")
	if err := q.Delete(ctx, "p", &blob.DeleteOptions{If: blob.IfGenerationMatch(gp)}); err != nil {
		t.Errorf("delete on condition of the reported generation: %v", err)
	}
	// A write that failed reports nothing.
	w = open("n", &blob.WriterOptions{If: blob.IfNotExist()})
	w.Write([]byte("again"))
	if err := w.Close(); err == nil {
		t.Fatal("a second IfNotExist write succeeded")
	}
	if g, ok := blob.WrittenGeneration(w); ok {
		t.Errorf("a failed write reports %q", g)
	}
}
