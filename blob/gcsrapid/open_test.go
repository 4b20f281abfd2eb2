package gcsrapid_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// An endpoint that does not answer fails the open within connect_timeout,
// with an error that names it, instead of hanging until the caller gives up.
func TestOpenUnreachableEndpoint(t *testing.T) {
	// A listener that accepts and never speaks: the client connects and
	// then waits for an HTTP/2 preface that never comes.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := blob.Open(ctx, "gcsrapid://b?connect_timeout=300ms&pool_size=0&endpoint="+l.Addr().String())
	if err == nil {
		s.Close()
		t.Fatal("opened a store at an endpoint that never answers")
	}
	if ctx.Err() != nil {
		t.Fatalf("the open waited for the caller's context: %v", err)
	}
	if !strings.Contains(err.Error(), l.Addr().String()) || !strings.Contains(err.Error(), "connect_timeout") {
		t.Errorf("error does not name the endpoint and the bound: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("error %v reads as the caller's deadline or a missing object", err)
	}
}
