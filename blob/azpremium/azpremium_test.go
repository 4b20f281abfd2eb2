package azpremium_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// One Azurite serves the whole package (it takes about a second to start);
// every test gets its own container.
var (
	shared     *azuritetest.Server
	sharedErr  error
	sharedOnce sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func azurite(t testing.TB) *azuritetest.Server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = azuritetest.NewServer(azuritetest.Options{}) })
	if sharedErr != nil {
		emulators.Unavailable(t, "azurite", sharedErr)
	}
	return shared
}

var containerSeq atomic.Int64

// newContainer creates an empty container and returns its name.
func newContainer(t testing.TB, srv *azuritetest.Server) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d", os.Getpid(), containerSeq.Add(1))
	s, err := azpremium.New(context.Background(), name, azpremium.Options{Account: srv.Account, Endpoint: srv.Endpoint(), AccountKey: azpremium.Secret(srv.Key), WarmConns: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Client().Create(context.Background(), nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	return name
}

func storeOptions(srv *azuritetest.Server) azpremium.Options {
	return azpremium.Options{Account: srv.Account, Endpoint: srv.Endpoint(), AccountKey: azpremium.Secret(srv.Key)}
}

func newStore(t testing.TB, o azpremium.Options) *azpremium.Store {
	t.Helper()
	srv := azurite(t)
	if o.Account == "" {
		base := storeOptions(srv)
		base.MultipartThreshold, base.PartSize, base.Concurrency, base.WarmConns = o.MultipartThreshold, o.PartSize, o.Concurrency, o.WarmConns
		o = base
	}
	s, err := azpremium.New(context.Background(), newContainer(t, srv), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// caps are what Azurite and the driver support: generation preconditions
// through ETags, appends (append blobs, and block lists for block blobs), and
// any delimiter.
var caps = conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true}

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store { return newStore(t, azpremium.Options{}) },
		Caps:     caps,
		OpenMissingBucket: func(ctx context.Context, t *testing.T) (blob.Store, error) {
			return azpremium.New(ctx, "nope", storeOptions(azurite(t)))
		},
	})
}

// TestConformanceStaged runs the suite with a tiny MultipartThreshold, so every
// write past 64 KiB goes through staged blocks and a committed block list.
func TestConformanceStaged(t *testing.T) {
	c := caps
	c.LargeObjectSize = 1<<20 + 7
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newStore(t, azpremium.Options{MultipartThreshold: 64 << 10, PartSize: 100 << 10, Concurrency: 3})
		},
		Caps: c,
	})
}

func TestGocloudDrivertest(t *testing.T) {
	srv := azurite(t)
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := azpremium.New(ctx, newContainer(t, srv), storeOptions(srv))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}
