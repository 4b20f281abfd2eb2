package s3expresstest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

const dirBucket = "logs--use1-az4--x-s3"

// newDirServer starts a server with one directory bucket and no delay.
func newDirServer(t *testing.T, opts s3expresstest.Options) (*s3expresstest.Server, *s3.Client) {
	t.Helper()
	opts.Buckets = append(opts.Buckets, dirBucket)
	srv := s3expresstest.Start(t, opts)
	return srv, srv.Client()
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func put(t *testing.T, c *s3.Client, key, body string) *s3.PutObjectOutput {
	t.Helper()
	out, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(dirBucket), Key: aws.String(key), Body: strings.NewReader(body),
	})
	if err != nil {
		t.Fatalf("PutObject %q: %v", key, err)
	}
	return out
}

func get(t *testing.T, c *s3.Client, key string) string {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(dirBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %q: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading %q: %v", key, err)
	}
	return string(b)
}

// TestWhatTheSDKSends records the headers and query of each operation, so a
// driver author can see what the SDK puts on the wire for S3 Express, and
// checks the parts the emulator relies on.
func TestWhatTheSDKSends(t *testing.T) {
	var mu sync.Mutex
	seen := map[s3expresstest.Op]*http.Request{}
	_, c := newDirServer(t, s3expresstest.Options{Observe: func(op s3expresstest.Op, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[op]; !ok {
			seen[op] = &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone()}
		}
	}})
	ctx := context.Background()
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(dirBucket), Key: aws.String("a/b.txt"), Body: strings.NewReader("hello"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, IfNoneMatch: aws.String("*"),
	}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, "a/b.txt"); got != "hello" {
		t.Fatalf("got %q", got)
	}
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(dirBucket), Prefix: aws.String("a/")}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, op := range []s3expresstest.Op{s3expresstest.OpCreateSession, s3expresstest.OpPutObject,
		s3expresstest.OpGetObject, s3expresstest.OpListObjects} {
		r := seen[op]
		if r == nil {
			t.Fatalf("no %s request seen", op)
		}
		var names []string
		for k := range r.Header {
			names = append(names, k)
		}
		slices.Sort(names)
		var b strings.Builder
		for _, k := range names {
			v := r.Header.Get(k)
			if k == "Authorization" {
				v = v[:min(len(v), 90)] + "..."
			}
			if k == "X-Amz-S3session-Token" {
				v = v[:12] + "..."
			}
			fmt.Fprintf(&b, "\n    %s: %s", k, v)
		}
		t.Logf("%s: %s %s%s", op, r.Method, r.URL.RequestURI(), b.String())
	}

	cs := seen[s3expresstest.OpCreateSession]
	if cs.URL.Path != "/"+dirBucket || !cs.URL.Query().Has("session") {
		t.Errorf("CreateSession went to %s, want path-style /BUCKET?session", cs.URL.RequestURI())
	}
	if cs.Header.Get("X-Amz-S3session-Token") != "" {
		t.Errorf("CreateSession carried a session token")
	}
	p := seen[s3expresstest.OpPutObject]
	if p.Header.Get("X-Amz-S3session-Token") == "" {
		t.Errorf("PutObject carried no x-amz-s3session-token")
	}
	if !strings.Contains(p.Header.Get("Authorization"), "/s3express/aws4_request") {
		t.Errorf("PutObject not signed for service s3express: %s", p.Header.Get("Authorization"))
	}
	if p.Header.Get("X-Amz-Checksum-Crc32c") == "" {
		t.Errorf("PutObject with ChecksumAlgorithmCrc32c sent no x-amz-checksum-crc32c")
	}
	if p.Header.Get("If-None-Match") != "*" {
		t.Errorf("PutObject If-None-Match = %q", p.Header.Get("If-None-Match"))
	}
}

// sharedSessions is an s3.ExpressCredentialsProvider that lets concurrent
// callers share one CreateSession per bucket. The SDK's default provider
// cannot: s3.Client clones it for every operation with a fresh
// singleflight.Group (finalizeOperationExpressCredentials in v1.114.10), so N
// concurrent first calls on a new client issue up to N CreateSessions.
type sharedSessions struct {
	plain *s3.Client // signs CreateSession with the static credentials

	mu       sync.Mutex
	sessions map[string]*sessionCall
}

type sessionCall struct {
	done  chan struct{}
	creds aws.Credentials
	err   error
}

func (p *sharedSessions) Retrieve(ctx context.Context, bucket string) (aws.Credentials, error) {
	p.mu.Lock()
	c, ok := p.sessions[bucket]
	if !ok || (c.err == nil && isClosed(c.done) && c.creds.Expires.Before(time.Now().Add(time.Minute))) {
		c = &sessionCall{done: make(chan struct{})}
		p.sessions[bucket] = c
		go func() {
			defer close(c.done)
			out, err := p.plain.CreateSession(context.WithoutCancel(ctx), &s3.CreateSessionInput{Bucket: aws.String(bucket)})
			if err != nil {
				c.err = err
				return
			}
			cr := out.Credentials
			c.creds = aws.Credentials{AccessKeyID: aws.ToString(cr.AccessKeyId), SecretAccessKey: aws.ToString(cr.SecretAccessKey),
				SessionToken: aws.ToString(cr.SessionToken), CanExpire: true, Expires: aws.ToTime(cr.Expiration)}
		}()
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.creds, c.err
	case <-ctx.Done():
		return aws.Credentials{}, ctx.Err()
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func concurrentFirstPuts(t *testing.T, c *s3.Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(dirBucket), Key: aws.String(fmt.Sprintf("k%02d", i)), Body: strings.NewReader("x"),
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestOneCreateSessionForConcurrentFirstCalls(t *testing.T) {
	const n = 32
	// CreateSession is slowed down so that all first calls overlap it.
	slowSession := s3expresstest.Profile{CreateSession: latency.Fixed(50 * time.Millisecond)}

	t.Run("shared provider", func(t *testing.T) {
		srv := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{dirBucket}, Profile: slowSession})
		provider := &sharedSessions{plain: srv.Client(), sessions: map[string]*sessionCall{}}
		c := srv.Client(func(o *s3.Options) { o.ExpressCredentials = provider })
		concurrentFirstPuts(t, c, n)
		st := srv.Stats()
		if st.CreateSession != 1 {
			t.Errorf("CreateSession calls = %d, want 1 for %d concurrent first calls", st.CreateSession, n)
		}
		if st.PutObject != n {
			t.Errorf("PutObject = %d, want %d", st.PutObject, n)
		}
		get(t, c, "k00")
		if st := srv.Stats(); st.CreateSession != 1 {
			t.Errorf("CreateSession calls = %d after a later GetObject, want 1", st.CreateSession)
		}
	})

	t.Run("SDK default provider", func(t *testing.T) {
		// Documents the SDK: its default provider deduplicates CreateSession
		// only within one operation, so concurrent first calls each create a
		// session. A driver must prewarm the session or share a provider.
		srv := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{dirBucket}, Profile: slowSession})
		c := srv.Client()
		concurrentFirstPuts(t, c, n)
		st := srv.Stats()
		t.Logf("SDK default provider: %d CreateSession calls for %d concurrent first calls", st.CreateSession, n)
		if st.CreateSession < 2 || st.CreateSession > n {
			t.Errorf("CreateSession calls = %d; the SDK's per-operation provider was expected to issue 2..%d", st.CreateSession, n)
		}
		// Once one session is cached, new calls reuse it.
		before := st.CreateSession
		concurrentFirstPuts(t, c, n)
		if st := srv.Stats(); st.CreateSession != before {
			t.Errorf("CreateSession calls grew from %d to %d with a cached session", before, st.CreateSession)
		}
	})
}

func TestRequestsWithoutSessionAreRefused(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{})
	put(t, c, "present", "data")

	send := func(method, path string, hdr map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL()+path, bytes.NewReader([]byte("raw")))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !bytes.Contains(body, []byte("<Code>AccessDenied</Code>")) {
			t.Errorf("%s %s: got %d %s, want 403 AccessDenied", method, path, resp.StatusCode, body)
		}
		return resp
	}
	send(http.MethodPut, "/"+dirBucket+"/raw", nil)
	send(http.MethodGet, "/"+dirBucket+"/present", nil)
	send(http.MethodGet, "/"+dirBucket+"?list-type=2", nil)
	send(http.MethodPut, "/"+dirBucket+"/raw", map[string]string{"x-amz-s3session-token": "forged"})

	st := srv.Stats()
	if st.RejectedMissingToken != 3 || st.RejectedInvalidToken != 1 {
		t.Errorf("rejected missing=%d invalid=%d, want 3 and 1", st.RejectedMissingToken, st.RejectedInvalidToken)
	}
	if _, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("raw")}); err == nil {
		t.Errorf("a refused PUT stored an object")
	}
}

func TestSessionExpiryMakesTheSDKRefresh(t *testing.T) {
	// The SDK refreshes session credentials shortly before they expire; with
	// a TTL that is already inside its refresh window, every call must get a
	// new session rather than use an expired one.
	srv, c := newDirServer(t, s3expresstest.Options{SessionTTL: 2 * time.Second})
	put(t, c, "a", "1")
	time.Sleep(2100 * time.Millisecond)
	if got := get(t, c, "a"); got != "1" {
		t.Fatalf("got %q", got)
	}
	if st := srv.Stats(); st.CreateSession < 2 {
		t.Errorf("CreateSession = %d, want a refresh after expiry", st.CreateSession)
	}
	if st := srv.Stats(); st.RejectedInvalidToken != 0 {
		t.Logf("expired-token answers before refresh: %d", st.RejectedInvalidToken)
	}
}

// TestTLSStreamsChecksumTrailers runs the SDK over HTTPS, where it sends
// bodies aws-chunked with the checksum in a trailer, as it does against AWS.
func TestTLSStreamsChecksumTrailers(t *testing.T) {
	var mu sync.Mutex
	var sha, enc, trailer string
	srv, err := s3expresstest.NewTLSServer(s3expresstest.Options{Buckets: []string{dirBucket},
		Observe: func(op s3expresstest.Op, r *http.Request) {
			if op == s3expresstest.OpPutObject {
				mu.Lock()
				sha, enc, trailer = r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("Content-Encoding"), r.Header.Get("X-Amz-Trailer")
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("URL %s", srv.URL())
	}
	c := srv.Client()
	ctx := context.Background()
	body := strings.Repeat("0123456789", 10000)
	// An io.Reader that is not an io.Seeker: over HTTP the SDK refuses it.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("t"),
		Body: io.MultiReader(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Logf("PutObject over TLS: X-Amz-Content-Sha256=%s Content-Encoding=%s X-Amz-Trailer=%s", sha, enc, trailer)
	if !strings.HasPrefix(sha, "STREAMING-") || !strings.Contains(enc, "aws-chunked") || trailer != "x-amz-checksum-crc32c" {
		t.Errorf("expected an aws-chunked body with a crc32c trailer")
	}
	mu.Unlock()
	if got := get(t, c, "t"); got != body {
		t.Errorf("content differs after aws-chunked decoding (len %d)", len(got))
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("t"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(head.ChecksumCRC32C) != crc32c(body) || aws.ToString(head.ContentEncoding) != "" {
		t.Errorf("HeadObject: crc %q encoding %q err %v", aws.ToString(head.ChecksumCRC32C), aws.ToString(head.ContentEncoding), err)
	}

	plainHTTP := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{dirBucket}})
	_, err = plainHTTP.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("t"),
		Body: io.MultiReader(strings.NewReader(body)), ContentLength: aws.Int64(int64(len(body)))})
	if err == nil || !strings.Contains(err.Error(), "not seekable") {
		t.Errorf("unseekable body over HTTP: got %v, want the SDK to refuse an unseekable body over HTTP", err)
	}
}

// wrongSecret hands out real session credentials with a corrupted secret.
type wrongSecret struct{ *sharedSessions }

func (w wrongSecret) Retrieve(ctx context.Context, bucket string) (aws.Credentials, error) {
	c, err := w.sharedSessions.Retrieve(ctx, bucket)
	c.SecretAccessKey += "x"
	return c, err
}

func TestSignaturesAreVerified(t *testing.T) {
	srv := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{dirBucket, "plain"},
		Credentials: map[string]string{"AKIDOTHER": "other-secret"}})
	ctx := context.Background()
	noRetry := func(o *s3.Options) { o.RetryMaxAttempts = 1 }
	withCreds := func(ak, secret string) func(*s3.Options) {
		return func(o *s3.Options) {
			o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: ak, SecretAccessKey: secret}, nil
			})
		}
	}
	putPlain := func(c *s3.Client) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("k"),
			Body: strings.NewReader("v")}, noRetry)
		return err
	}
	if err := putPlain(srv.Client(withCreds("AKIDOTHER", "other-secret"))); err != nil {
		t.Errorf("configured credentials: %v", err)
	}
	if err := putPlain(srv.Client(withCreds(s3expresstest.DefaultAccessKeyID, "wrong"))); apiCode(err) != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret: got %v, want SignatureDoesNotMatch", err)
	}
	if err := putPlain(srv.Client(withCreds("AKIDUNKNOWN", "x"))); apiCode(err) != "InvalidAccessKeyId" {
		t.Errorf("unknown access key: got %v, want InvalidAccessKeyId", err)
	}
	// CreateSession is signed with the static credentials too.
	_, err := srv.Client(withCreds(s3expresstest.DefaultAccessKeyID, "wrong")).CreateSession(ctx,
		&s3.CreateSessionInput{Bucket: aws.String(dirBucket)}, noRetry)
	if apiCode(err) != "SignatureDoesNotMatch" {
		t.Errorf("CreateSession with a wrong secret: got %v, want SignatureDoesNotMatch", err)
	}
	// Data-plane requests are signed with the session secret.
	provider := wrongSecret{&sharedSessions{plain: srv.Client(), sessions: map[string]*sessionCall{}}}
	c := srv.Client(func(o *s3.Options) { o.ExpressCredentials = provider })
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("k"),
		Body: strings.NewReader("v")}, noRetry)
	if apiCode(err) != "SignatureDoesNotMatch" {
		t.Errorf("session token with a wrong session secret: got %v, want SignatureDoesNotMatch", err)
	}
	// Anonymous requests to a general purpose bucket are refused.
	resp, err := http.Get(srv.URL() + "/plain/k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous GET: %d, want 403", resp.StatusCode)
	}
	if st := srv.Stats(); st.RejectedSignature != 5 {
		t.Errorf("RejectedSignature = %d, want 5", st.RejectedSignature)
	}
}
