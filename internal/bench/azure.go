package bench

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob/azureblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/regional"
)

// runAzure compares a Premium block blob account, written by our azpremium
// driver, with a standard hot-tier account written by gocloud's azureblob,
// on one Azurite behind two latency proxies. Azurite is an npm tool that
// `make tools` installs; without it the scenario is skipped, not failed.
func runAzure(ctx context.Context, env *Env) error {
	srv, err := azuritetest.NewServer(azuritetest.Options{})
	if err != nil {
		return &SkipError{Reason: fmt.Sprintf("Azurite unavailable (%v); `make tools` installs it into tools/node_modules", err)}
	}
	defer srv.Close()
	premium, hot := azuritetest.None, azuritetest.None
	if !env.Zero {
		premium, hot = azuritetest.Premium, azuritetest.Hot
	}
	profileName := func(p azuritetest.Profile) string { return env.ProfileName(p.Name) }

	premiumEP, premiumReqs, closeP, err := azureEndpoint(srv, premium, env.Seed)
	if err != nil {
		return err
	}
	defer closeP()
	hotEP, hotReqs, closeH, err := azureEndpoint(srv, hot, env.Seed)
	if err != nil {
		return err
	}
	defer closeH()

	opts := azpremium.Options{Account: srv.Account, Endpoint: premiumEP, AccountKey: azpremium.Secret(srv.Key)}
	ours, err := azpremium.New(ctx, "premium", opts)
	if err != nil {
		return err
	}
	defer ours.Close()
	if _, err := ours.Client().Create(ctx, nil); err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	cred, err := container.NewSharedKeyCredential(srv.Account, srv.Key)
	if err != nil {
		return err
	}
	client, err := container.NewClientWithSharedKeyCredential(hotEP+"/hot", cred, nil)
	if err != nil {
		return err
	}
	if _, err := client.Create(ctx, nil); err != nil {
		return fmt.Errorf("create container: %w", err)
	}
	b, err := azureblob.OpenBucket(ctx, client, nil)
	if err != nil {
		return err
	}
	// gocloud v0.47's azureblob writer panics when a streamed upload fails;
	// blob/regional buffers for it, as azblob:// URLs do.
	theirs := regional.New(b, regional.Options{BufferedUploads: true})
	defer theirs.Close()
	env.Measure(ctx,
		Path{Name: "azpremium-put", Profile: profileName(premium), Requests: premiumReqs,
			Write: func(ctx context.Context, n int, data []byte) error {
				return blob.Put(ctx, ours, fmt.Sprintf("put/%07d", n), data, nil)
			}},
		Path{Name: "azure-hot-put", Profile: profileName(hot), Requests: hotReqs,
			Write: func(ctx context.Context, n int, data []byte) error {
				return blob.Put(ctx, theirs, fmt.Sprintf("put/%07d", n), data, nil)
			}},
	)
	return nil
}

// azureEndpoint returns an endpoint for srv that delays requests by profile
// and counts them, since Azurite keeps no request count.
func azureEndpoint(srv *azuritetest.Server, p azuritetest.Profile, seed uint64) (endpoint string, requests func() int64, closeFn func(), err error) {
	target := srv.Endpoint()
	closeLatency := func() {}
	if p.Name != azuritetest.None.Name {
		lp := srv.WithLatency(p, seed)
		target, closeLatency = lp.Endpoint, lp.Close
	}
	u, err := url.Parse(target)
	if err != nil {
		closeLatency()
		return "", nil, nil, err
	}
	u.Path = ""
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	// A request the client gave up on (a reader stopped at the end of a
	// row) is no news; the client sees any other failure as a 502.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	return counter.URL + "/" + srv.Account, n.Load, func() { counter.Close(); closeLatency() }, nil
}
