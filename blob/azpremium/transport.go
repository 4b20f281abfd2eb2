package azpremium

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// sharedHTTPClient is the one HTTP client of every Store in the process, so
// that stores on one account share warm connections instead of each opening
// its own.
//
// Tuned for many small requests to one host: a large idle pool per host (the
// default of 2 closes connections a busy writer needs a moment later), HTTP/1.1
// (the Blob service does not speak HTTP/2, and one connection per request
// avoids head-of-line blocking), no transparent gzip (blobs are opaque bytes).
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0,
		DisableCompression:    true,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}}
})
