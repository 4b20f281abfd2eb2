package fault_test

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
)

// The fault wrapper, and tracing around it, pass the inner writer's
// generation through: a composite over them keeps its one-round-trip
// deletes of what it wrote.
func TestWrappersPassWrittenGenerationThrough(t *testing.T) {
	ctx := context.Background()
	m, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := fault.Wrap(m, fault.Options{Seed: 1})
	for name, s := range map[string]blob.Store{"fault": f, "traced": blob.NewTracedStore(f, blob.TracingOptions{})} {
		w, err := s.NewWriter(ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("x"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		g, ok := blob.WrittenGeneration(w)
		a, err := s.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || g != a.Generation {
			t.Errorf("%s: the writer reports %q (%v); Stat has %q", name, g, ok, a.Generation)
		}
	}
}
