package azuritetest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/zonalblob/zonalblob/blob/latency"
)

// Profile is the delay added to every request to the blob service, by kind
// of request. Azurite answers on loopback in well under a millisecond, which
// no Azure account does; benchmarks run through a profile to show what a
// user would see.
type Profile struct {
	Name  string
	Read  latency.Dist // GET of a blob
	Write latency.Dist // PUT: Put Blob, Put Block, Put Block List, Append Block
	Meta  latency.Dist // HEAD, DELETE, list and everything else
}

// Profiles by name. None adds nothing.
var (
	None = Profile{Name: "none"}

	// Premium is an Azure Premium block blob account.
	Premium = Profile{
		Name:  "azpremium",
		Read:  latency.Dist{P50: 3 * time.Millisecond, P99: 8 * time.Millisecond, Source: premiumSource},
		Write: latency.Dist{P50: 4 * time.Millisecond, P99: 9 * time.Millisecond, Source: premiumSource},
		Meta:  latency.Dist{P50: 3 * time.Millisecond, P99: 8 * time.Millisecond, Source: premiumSource},
	}

	// Hot is a standard general-purpose v2 account, hot tier.
	Hot = Profile{
		Name:  "hot",
		Read:  latency.Dist{P50: 15 * time.Millisecond, P99: 60 * time.Millisecond, Source: hotSource},
		Write: latency.Dist{P50: 25 * time.Millisecond, P99: 100 * time.Millisecond, Source: hotSource},
		Meta:  latency.Dist{P50: 12 * time.Millisecond, P99: 50 * time.Millisecond, Source: hotSource},
	}
)

const (
	premiumSource = "Azure docs, 'Premium block blob storage accounts' (storage-blob-block-blob-premium): " +
		"'consistently low, single-digit millisecond' latency, lower and steadier than standard; " +
		"p50 and p99 placed inside that published single-digit bound (no percentiles are published)"
	hotSource = "Azure docs, 'Performance tiers for block blob storage' (storage-blob-performance-tiers): " +
		"standard accounts have higher and more variable latency than premium; " +
		"p50 12-25 ms and a 4x p99 are assumptions consistent with that, not published figures"
)

// ByName returns the profile called name ("none", "azpremium", "hot").
func ByName(name string) (Profile, bool) {
	for _, p := range []Profile{None, Premium, Hot} {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

func (p Profile) dist(r *http.Request) latency.Dist {
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("comp") == "list" {
			return p.Meta
		}
		return p.Read
	case http.MethodPut:
		return p.Write
	}
	return p.Meta
}

// LatencyProxy is a reverse proxy in front of a Server that delays each
// request by a draw from its profile, seeded, before forwarding it.
type LatencyProxy struct {
	// Endpoint replaces Server.Endpoint() for clients that should see latency.
	Endpoint string
	srv      *httptest.Server
}

// Close stops the proxy.
func (p *LatencyProxy) Close() { p.srv.Close() }

// WithLatency starts a LatencyProxy for s with profile p and seed.
func (s *Server) WithLatency(p Profile, seed uint64) *LatencyProxy {
	target, _ := url.Parse(s.endpoint)
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	sampler := latency.NewSampler(seed)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := latency.Sleep(r.Context(), sampler.Sample(p.dist(r))); err != nil {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	return &LatencyProxy{Endpoint: proxy.URL + "/" + s.Account, srv: proxy}
}
