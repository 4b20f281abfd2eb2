package regional_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"

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

type harness struct {
	open func(ctx context.Context) (blob.Store, error)
}

func (h *harness) MakeDriver(ctx context.Context) (driver.Bucket, error) {
	s, err := h.open(ctx)
	if err != nil {
		return nil, err
	}
	return blob.Driver(s), nil
}
func (h *harness) MakeDriverForNonexistentBucket(context.Context) (driver.Bucket, error) {
	return nil, nil
}
func (h *harness) HTTPClient() *http.Client         { return nil }
func (h *harness) SupportsCopy() bool               { return true }
func (h *harness) SupportsNonSlashDelimiters() bool { return true }
func (h *harness) Close()                           {}

func TestGocloudDrivertestMem(t *testing.T) {
	drivertest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		// drivertest expects every MakeDriver of one test to see the same bucket.
		s := memStore(ctx, t)
		return &harness{open: func(context.Context) (blob.Store, error) { return nopClose{s}, nil }}, nil
	}, nil)
}

func TestGocloudDrivertestFile(t *testing.T) {
	drivertest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		u := fileURL(t.TempDir())
		return &harness{open: func(ctx context.Context) (blob.Store, error) { return blob.Open(ctx, u) }}, nil
	}, nil)
}

// nopClose lets several gocloud buckets share one mem:// store.
type nopClose struct{ blob.Store }

func (nopClose) Close() error { return nil }

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := regional.Open(ctx, "mem://?bogus=1"); err == nil {
		t.Error("unknown parameter accepted")
	}
	if _, err := blob.Open(ctx, "file:///tmp/x?nope=1"); err == nil {
		t.Error("unknown parameter accepted on file://")
	}
}
