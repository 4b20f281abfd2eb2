package fault_test

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/conformance"
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
		conformance.WriteReported(ctx, t, s, name, w, []byte("x"), 0)
	}
}
