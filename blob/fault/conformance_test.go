package fault_test

import (
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
)

func wrapped(ctx context.Context, t *testing.T, url string) blob.Store {
	s, err := blob.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	return fault.Wrap(s, fault.Options{Seed: 1, Name: "conformance"})
}

// A wrapper injecting nothing must be invisible: the whole contract holds through it.
func TestConformanceMemThroughFault(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return wrapped(ctx, t, "mem://") },
		Caps:     conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestConformanceFileThroughFault(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return wrapped(ctx, t, "file://"+t.TempDir())
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true, FileTree: true},
	})
}

func TestGocloudDrivertestThroughFault(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return wrapped(ctx, t, "mem://") },
		Caps:     conformance.Caps{NonSlashDelimiters: true},
	})
}

func TestGocloudDrivertestFileThroughFault(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return wrapped(ctx, t, "file://"+t.TempDir()) },
		Caps:     conformance.Caps{NonSlashDelimiters: true},
	})
}
