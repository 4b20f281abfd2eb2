package azpremium_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/emulators"
)

// An endpoint that does not answer fails the open within connect_timeout,
// with an error that names it, instead of hanging until the caller gives up.
func TestOpenUnreachableEndpoint(t *testing.T) {
	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_KEY", "c2VjcmV0LWtleQ==")
	endpoint := "http://" + emulators.Blackhole(t) + "/acct"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := blob.Open(ctx, "azpremium://logs?account=acct&connect_timeout=300ms&endpoint="+endpoint)
	if err == nil {
		s.Close()
		t.Fatal("opened a store at an endpoint that never answers")
	}
	if ctx.Err() != nil {
		t.Fatalf("the open waited for the caller's context: %v", err)
	}
	if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "connect_timeout") {
		t.Errorf("error does not name the endpoint and the bound: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("error %v reads as the caller's deadline or a missing object", err)
	}
	if strings.Contains(err.Error(), "c2VjcmV0LWtleQ==") {
		t.Errorf("error shows the key: %v", err)
	}
	// With no warm-up, open sends nothing and so waits for nothing.
	s, err = blob.Open(ctx, "azpremium://logs?account=acct&warm_conns=0&endpoint="+endpoint)
	if err != nil {
		t.Fatalf("open with warm_conns=0: %v", err)
	}
	s.Close()
}

// A missing container fails the open of a URL, naming it and the endpoint,
// and is not a missing object.
func TestOpenMissingContainer(t *testing.T) {
	srv := azurite(t)
	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", srv.ConnectionString())
	s, err := blob.Open(context.Background(), "azpremium://nope")
	if err == nil {
		s.Close()
		t.Fatal("opened a missing container")
	}
	if !errors.Is(err, blob.ErrBucketNotFound) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("open of a missing container: %v, want ErrBucketNotFound only", err)
	}
	if !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), srv.Endpoint()) {
		t.Errorf("error does not name the container and the endpoint: %v", err)
	}
	if strings.Contains(err.Error(), srv.Key) {
		t.Errorf("error shows the key: %v", err)
	}
}
