package conformance

import (
	"bytes"
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
)

// WriteReported writes data through w in Write calls of at most chunk bytes
// (all at once if chunk is 0) and checks that w reports no generation before
// Close and, after it, the one Stat reports for key, whose bytes are
// data. Drivers whose writers must report (blob.GenerationReporter) check
// each way of writing with it.
func WriteReported(ctx context.Context, t *testing.T, s blob.Store, key string, w blob.Writer, data []byte, chunk int) string {
	t.Helper()
	for rest := data; len(rest) > 0; {
		n := len(rest)
		if chunk > 0 {
			n = min(n, chunk)
		}
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatalf("%s: Write: %v", key, err)
		}
		rest = rest[n:]
	}
	if g, ok := blob.WrittenGeneration(w); ok {
		t.Errorf("%s: reports generation %q before Close", key, g)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("%s: Close: %v", key, err)
	}
	g, ok := blob.WrittenGeneration(w)
	if !ok {
		t.Fatalf("%s: the writer reports no generation", key)
	}
	a, err := s.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if g != a.Generation || a.Size != int64(len(data)) {
		t.Fatalf("%s: the writer reports generation %s; Stat has generation %s, %d bytes (want %d)", key, g, a.Generation, a.Size, len(data))
	}
	if got, err := blob.ReadAll(ctx, s, key); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("%s holds %d bytes, want the %d written (%v)", key, len(got), len(data), err)
	}
	return g
}
