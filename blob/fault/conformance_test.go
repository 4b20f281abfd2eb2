package fault_test

import (
	"context"
	"net/http"
	"testing"

	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"

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

type harness struct{ s blob.Store }

func (h harness) MakeDriver(context.Context) (driver.Bucket, error) {
	return blob.Driver(nopClose{h.s}), nil
}
func (harness) MakeDriverForNonexistentBucket(context.Context) (driver.Bucket, error) {
	return nil, nil
}
func (harness) HTTPClient() *http.Client         { return nil }
func (harness) SupportsCopy() bool               { return true }
func (harness) SupportsNonSlashDelimiters() bool { return true }
func (h harness) Close()                         { h.s.Close() }

type nopClose struct{ blob.Store }

func (nopClose) Close() error { return nil }

func TestGocloudDrivertestThroughFault(t *testing.T) {
	drivertest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return harness{wrapped(ctx, t, "mem://")}, nil
	}, nil)
}
