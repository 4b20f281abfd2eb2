package azpremium_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
)

// countingProxy forwards to Azurite, counts the requests for each blob name
// and answers 503 for the names in fail.
type countingProxy struct {
	endpoint string
	mu       sync.Mutex
	seen     map[string]int
	fail     map[string]bool
	warmups  chan struct{} // one send per request for the warm-up's blob
}

func newCountingProxy(t *testing.T, srv *azuritetest.Server) *countingProxy {
	t.Helper()
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // Close cancels warm-up requests in flight
	p := &countingProxy{seen: map[string]int{}, fail: map[string]bool{}, warmups: make(chan struct{}, 64)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		p.mu.Lock()
		p.seen[name]++
		fail := p.fail[name]
		p.mu.Unlock()
		if name == ".zonalblob-warmup" {
			p.warmups <- struct{}{}
		}
		if fail {
			http.Error(w, "injected", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	p.endpoint = hs.URL + "/" + srv.Account
	return p
}

func (p *countingProxy) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[name]
}

// expectWarmups waits for n warm-up requests, then makes sure no other came.
// It waits for the requests themselves, with no deadline of its own: a
// warm-up that never comes shows as the test binary's timeout, with this
// function in the goroutine dump, not as a failure on a slow machine.
func (p *countingProxy) expectWarmups(t *testing.T, s blob.Store, n int) {
	t.Helper()
	for range n {
		<-p.warmups
	}
	if err := s.Close(); err != nil { // waits for the warm-up to end
		t.Fatal(err)
	}
	if extra := len(p.warmups); extra > 0 {
		t.Errorf("%d warm-up requests, want %d", n+extra, n)
	}
}

// TestWarmConns counts the warm-up's requests: one by default, which also
// proves the credentials and container; with more connections one request
// each after it; none when WarmConns is negative, or warm_conns=0 in a URL.
func TestWarmConns(t *testing.T) {
	srv := azurite(t)
	name := newContainer(t, srv)
	p := newCountingProxy(t, srv)
	ctx := context.Background()
	for _, c := range []struct {
		warmConns int
		want      int
	}{{0, 1}, {1, 1}, {3, 4}, {-1, 0}} {
		s, err := azpremium.New(ctx, name, azpremium.Options{Account: srv.Account, Endpoint: p.endpoint, AccountKey: azpremium.Secret(srv.Key), WarmConns: c.warmConns})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("WarmConns %d: Stat = %v", c.warmConns, err)
		}
		p.expectWarmups(t, s, c.want)
	}

	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_KEY", srv.Key)
	base := "azpremium://" + name + "?account=" + srv.Account + "&endpoint=" + url.QueryEscape(p.endpoint)
	for _, c := range []struct {
		param string
		want  int
	}{{"", 1}, {"&warm_conns=0", 0}, {"&warm_conns=2", 3}} {
		s, err := blob.Open(ctx, base+c.param)
		if err != nil {
			t.Fatal(err)
		}
		p.expectWarmups(t, s, c.want)
	}
}

// TestURLRetries counts the attempts of a request the service keeps failing
// with 503: retries counts the retries after the first attempt, and 0 means
// none.
func TestURLRetries(t *testing.T) {
	srv := azurite(t)
	name := newContainer(t, srv)
	p := newCountingProxy(t, srv)
	p.fail["flaky"] = true
	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_KEY", srv.Key)
	ctx := context.Background()
	for _, c := range []struct {
		retries  string
		attempts int
	}{{"0", 1}, {"1", 2}} {
		s, err := blob.Open(ctx, "azpremium://"+name+"?account="+srv.Account+"&warm_conns=0&endpoint="+url.QueryEscape(p.endpoint)+"&retries="+c.retries)
		if err != nil {
			t.Fatal(err)
		}
		before := p.count("flaky")
		if _, err := s.Stat(ctx, "flaky"); err == nil {
			t.Errorf("retries=%s: Stat of a failing blob succeeded", c.retries)
		}
		if got := p.count("flaky") - before; got != c.attempts {
			t.Errorf("retries=%s: %d attempts, want %d", c.retries, got, c.attempts)
		}
		s.Close()
	}
}
