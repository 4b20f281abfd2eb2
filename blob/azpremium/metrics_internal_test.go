package azpremium

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// answers serves a fixed sequence of statuses, then 200s.
type answers struct {
	statuses []int
	n        atomic.Int32
}

func (a *answers) Do(r *http.Request) (*http.Response, error) {
	i := int(a.n.Add(1)) - 1
	code := http.StatusOK
	if i < len(a.statuses) {
		code = a.statuses[i]
	}
	h := http.Header{}
	if code == http.StatusNotFound {
		h.Set("x-ms-error-code", "BlobNotFound")
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// The per-retry policy counts the SDK's attempts, so a request the service
// answered 503 once is one request and one retry.
func TestRequestMetricsCountRetries(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	m, err := newRequestMetrics("c", Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	tr := &answers{statuses: []int{http.StatusServiceUnavailable, http.StatusOK, http.StatusNotFound}}
	pl := runtime.NewPipeline("test", "v0", runtime.PipelineOptions{}, &policy.ClientOptions{
		Transport:        tr,
		Retry:            policy.RetryOptions{MaxRetries: 2, RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond},
		PerCallPolicies:  []policy.Policy{policyFunc(m.perCall)},
		PerRetryPolicies: []policy.Policy{policyFunc(m.perRetry)},
	})
	for _, u := range []string{"http://h/acct/c/key?comp=block&blockid=x", "http://h/acct/c/missing"} {
		method := http.MethodPut
		if strings.Contains(u, "missing") {
			method = http.MethodHead
		}
		req, err := runtime.NewRequest(ctx, method, u)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := pl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if d, ok := mt.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value(attribute.Key("operation"))
					out, _ := p.Attributes.Value(attribute.Key("outcome"))
					got[mt.Name+" "+op.AsString()+" "+out.AsString()] += p.Value
				}
			}
		}
	}
	for k, want := range map[string]int64{
		"zonalblob.azpremium.requests PutBlock ok":                 1,
		"zonalblob.azpremium.retries PutBlock ":                    1,
		"zonalblob.azpremium.requests GetBlobProperties not_found": 1,
	} {
		if got[k] != want {
			t.Errorf("%s = %d, want %d (all %v)", k, got[k], want, got)
		}
	}
}

func TestOperationNames(t *testing.T) {
	for _, c := range []struct{ method, url, copySource, want string }{
		{"PUT", "http://h/a/c/k", "", "PutBlob"},
		{"PUT", "http://h/a/c/k?comp=block&blockid=AA", "", "PutBlock"},
		{"PUT", "http://h/a/c/k?comp=blocklist", "", "PutBlockList"},
		{"PUT", "http://h/a/c/k?comp=appendblock", "", "AppendBlock"},
		{"PUT", "http://h/a/c/k", "http://h/a/c/src", "CopyBlob"},
		{"PUT", "http://h/a/c?restype=container", "", "CreateContainer"},
		{"GET", "http://h/a/c/k", "", "GetBlob"},
		{"GET", "http://h/a/c?restype=container&comp=list", "", "ListBlobs"},
		{"HEAD", "http://h/a/c/k", "", "GetBlobProperties"},
		{"HEAD", "http://h/a/c?restype=container", "", "GetContainerProperties"},
		{"DELETE", "http://h/a/c/k", "", "DeleteBlob"},
	} {
		r, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.copySource != "" {
			r.Header.Set("x-ms-copy-source", c.copySource)
		}
		if got := operation(r); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.method, c.url, got, c.want)
		}
	}
}
