package gcsrapidtest

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"
	"gocloud.dev/blob/gcsblob"
)

// gcsblobHarness runs gocloud's own gcsblob driver, an independent client of
// the storage API, against the emulator: the same setup as gcsblob's
// TestConformanceGRPC and TestConformanceGRPCZonal, with the emulator in
// place of recorded traffic.
type gcsblobHarness struct {
	srv    *Server
	client *storage.Client
	zonal  bool
}

func newGCSBlobHarness(zonal bool) drivertest.HarnessMaker {
	return func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		srv, err := NewServer(Options{Buckets: []Bucket{{Name: "bucket", Zonal: zonal}}})
		if err != nil {
			return nil, err
		}
		opts := srv.ClientOptions()
		if zonal {
			opts = append(opts, storage.WithAppendableUploads(), storage.WithGRPCBidiReads())
		}
		client, err := storage.NewGRPCClient(ctx, opts...)
		if err != nil {
			srv.Close()
			return nil, err
		}
		return &gcsblobHarness{srv: srv, client: client, zonal: zonal}, nil
	}
}

func (h *gcsblobHarness) MakeDriver(ctx context.Context) (driver.Bucket, error) {
	return openDriver(h.client, "bucket")
}

func (h *gcsblobHarness) MakeDriverForNonexistentBucket(ctx context.Context) (driver.Bucket, error) {
	return openDriver(h.client, "bucket-does-not-exist")
}

// openDriver returns the driver.Bucket that gcsblob.OpenBucketGRPC builds.
// drivertest needs the driver itself, and gcsblob keeps its driver type
// unexported (its own tests are in-package), so the test reads it out of the
// *blob.Bucket by reflection. Every call still runs gcsblob's real code.
func openDriver(c *storage.Client, name string) (driver.Bucket, error) {
	bkt, err := gcsblob.OpenBucketGRPC(c, name, nil)
	if err != nil {
		return nil, err
	}
	f := reflect.ValueOf(bkt).Elem().FieldByName("b")
	drv, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(driver.Bucket)
	if !ok {
		return nil, fmt.Errorf("blob.Bucket.b is %v, not a driver.Bucket", f.Type())
	}
	return drv, nil
}

func (h *gcsblobHarness) HTTPClient() *http.Client         { return nil }
func (h *gcsblobHarness) SupportsCopy() bool               { return !h.zonal }
func (h *gcsblobHarness) SupportsNonSlashDelimiters() bool { return true }
func (h *gcsblobHarness) Close()                           { h.client.Close(); h.srv.Close() }

func TestGCSBlobConformanceRegional(t *testing.T) {
	drivertest.RunConformanceTests(t, newGCSBlobHarness(false), nil)
}

func TestGCSBlobConformanceZonal(t *testing.T) {
	drivertest.RunConformanceTests(t, newGCSBlobHarness(true), nil)
}
