package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// serve prints URLs that other zonalblob commands use, and stops with its
// context.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errOut strings.Builder
		done <- runContext(ctx, []string{"serve", "--profile", "zero", "--dir", t.TempDir()}, strings.NewReader(""), pw, &errOut)
		pw.Close()
	}()
	urls := map[string]string{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() && len(urls) < 5 {
		if name, u, ok := strings.Cut(sc.Text(), ":  "); ok {
			urls[name] = u
		}
	}
	go io.Copy(io.Discard, pr)
	for _, name := range []string{"zone 0", "zone 2", "quorum", "tiered"} {
		u := urls[name]
		if u == "" {
			t.Fatalf("serve printed no %s URL: %v", name, urls)
		}
		// Keys of their own: a quorum does not serve objects written
		// around it.
		key := "greeting/" + strings.ReplaceAll(name, " ", "")
		mustZB(t, "hello "+name, "put", u, key, "-")
		if got := mustZB(t, "", "cat", u, key); got != "hello "+name {
			t.Errorf("%s: cat = %q", name, got)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d when stopped", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}
