package tiered

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/quorum"
)

// A quorum behind a tracing wrapper still retires what pack moves packed:
// tracing must not change what the Store does.
func TestRetirerBehindTracing(t *testing.T) {
	var reps []blob.Store
	for range 3 {
		m, err := blob.Open(context.Background(), "mem://")
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, m)
	}
	q, err := quorum.New(reps, quorum.Options{AntiEntropyInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	cold, err := blob.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(blob.NewTracedStore(q, blob.TracingOptions{}), cold, Options{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.retirer == nil {
		t.Error("a traced quorum is not used as a retirer")
	}
}
