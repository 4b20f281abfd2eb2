package regional_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
)

func memStore(ctx context.Context, t *testing.T) blob.Store {
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

func TestConformanceMem(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: memStore,
		Caps:     conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestConformanceFile(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, fileURL(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true, FileTree: true},
	})
}

func TestGocloudDrivertestMem(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{NewStore: memStore, Caps: conformance.Caps{NonSlashDelimiters: true}})
}

func TestGocloudDrivertestFile(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, fileURL(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := regional.Open(ctx, "mem://?bogus=1"); err == nil {
		t.Error("unknown parameter accepted")
	}
	if _, err := blob.Open(ctx, "file:///tmp/x?nope=1"); err == nil {
		t.Error("unknown parameter accepted on file://")
	}
}
