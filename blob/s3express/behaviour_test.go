package s3express_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// recorder keeps a copy of the requests the emulator sees.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

type seen struct {
	op     s3expresstest.Op
	method string
	query  map[string][]string
	header http.Header
}

func (r *recorder) observe(op s3expresstest.Op, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, seen{op: op, method: req.Method, query: req.URL.Query(), header: req.Header.Clone()})
}

func (r *recorder) of(op s3expresstest.Op) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seen
	for _, s := range r.reqs {
		if s.op == op {
			out = append(out, s)
		}
	}
	return out
}

func TestOneCreateSessionForConcurrentFirstCalls(t *testing.T) {
	const n = 32
	// A slow CreateSession makes every first call overlap it.
	srv := newServer(t, s3expresstest.Options{Profile: s3expresstest.Profile{CreateSession: latency.Fixed(50 * time.Millisecond)}})
	s := newStore(t, srv, s3express.Options{WarmConns: -1})
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := blob.Put(ctx, s, fmt.Sprintf("k%02d", i), []byte("x"), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if st := srv.Stats(); st.CreateSession != 1 || st.PutObject != n {
		t.Errorf("CreateSession = %d, PutObject = %d; want 1 session for %d concurrent first writes", st.CreateSession, st.PutObject, n)
	}

	// The same holds without the warm-up's head start: a second store over
	// a fresh client whose calls all start together with its warm-up.
	// Counted from before the store opens: its warm-up's CreateSession,
	// the one expected, may reach the server before the store is returned.
	before := srv.Stats().CreateSession
	s2 := newStore(t, srv, s3express.Options{WarmConns: -1})
	defer s2.Close()
	for i := range n {
		wg.Go(func() {
			if _, err := s2.Stat(ctx, fmt.Sprintf("k%02d", i)); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Stat of a missing key: %v", err)
			}
		})
	}
	wg.Wait()
	if got := srv.Stats().CreateSession - before; got != 1 {
		t.Errorf("second store: %d CreateSessions for %d concurrent first calls, want 1", got, n)
	}
}

func TestEveryRequestCarriesTheSession(t *testing.T) {
	var rec recorder
	srv := newServer(t, s3expresstest.Options{Observe: rec.observe})
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	if err := blob.Put(ctx, s, "dir/a", []byte("data"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.ReadAll(ctx, s, "dir/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, &blob.ListOptions{Prefix: "dir/a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "dir/a", nil); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	for _, r := range rec.reqs {
		if r.op != s3expresstest.OpCreateSession && r.header.Get("X-Amz-S3session-Token") == "" {
			t.Errorf("%s %s sent without a session token", r.op, r.method)
		}
	}
	rec.mu.Unlock()

	// The emulator refuses the same kind of request without a token, so
	// the check above is what makes the store work at all.
	req, _ := http.NewRequest(http.MethodPut, srv.URL()+"/"+s.Bucket()+"/raw", strings.NewReader("raw"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := srv.Stats(); resp.StatusCode != http.StatusForbidden || st.RejectedMissingToken != 1 {
		t.Errorf("PUT without a token: %d, %d rejected; want 403 and 1", resp.StatusCode, st.RejectedMissingToken)
	}
	if ok, err := blob.Exists(ctx, s, "raw"); ok || err != nil {
		t.Errorf("refused PUT stored an object: %v, %v", ok, err)
	}
}

func TestWritesSendCRC32C(t *testing.T) {
	var rec recorder
	srv := newServer(t, s3expresstest.Options{Observe: rec.observe})
	s := newStore(t, srv, s3express.Options{MultipartThreshold: 5 << 20, PartSize: 5 << 20})
	defer s.Close()
	ctx := context.Background()
	small := []byte("small object")
	large := bytes.Repeat([]byte("0123456789abcdef"), (12<<20)/16+3)
	if err := blob.Put(ctx, s, "small", small, nil); err != nil {
		t.Fatal(err)
	}
	if err := blob.Put(ctx, s, "large", large, nil); err != nil {
		t.Fatal(err)
	}
	for _, op := range []s3expresstest.Op{s3expresstest.OpPutObject, s3expresstest.OpUploadPart} {
		reqs := rec.of(op)
		if len(reqs) == 0 {
			t.Fatalf("no %s seen", op)
		}
		for _, r := range reqs {
			if r.header.Get("X-Amz-Checksum-Crc32c") == "" || r.header.Get("X-Amz-Checksum-Crc32") != "" {
				t.Errorf("%s: x-amz-checksum-crc32c %q, x-amz-checksum-crc32 %q; want CRC32C only", op,
					r.header.Get("X-Amz-Checksum-Crc32c"), r.header.Get("X-Amz-Checksum-Crc32"))
			}
			if got := r.header.Get("X-Amz-Sdk-Checksum-Algorithm"); got != "CRC32C" {
				t.Errorf("%s: x-amz-sdk-checksum-algorithm %q, want CRC32C", op, got)
			}
		}
	}
	if c := rec.of(s3expresstest.OpCreateMultipart); len(c) != 1 || c[0].header.Get("X-Amz-Checksum-Algorithm") != "CRC32C" {
		t.Errorf("CreateMultipartUpload: %d requests, want 1 with x-amz-checksum-algorithm CRC32C", len(c))
	}
	st := srv.Stats()
	if st.PutObject != 1 || st.MultipartCreate != 1 || st.UploadPart != 3 || st.MultipartDone != 1 {
		t.Errorf("stats %+v: want 1 PutObject for the small object, 1 multipart upload of 3 parts for the large one", st)
	}
	for key, want := range map[string][]byte{"small": small, "large": large} {
		if got, err := blob.ReadAll(ctx, s, key); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes, %v; want %d identical bytes", key, len(got), err, len(want))
		}
	}
	if g := rec.of(s3expresstest.OpGetObject); len(g) == 0 || g[0].header.Get("X-Amz-Checksum-Mode") != "ENABLED" {
		t.Errorf("whole-object GetObject does not ask for checksum validation")
	}
}

func TestTLSStreamsChecksumTrailer(t *testing.T) {
	var mu sync.Mutex
	var trailer string
	srv, err := s3expresstest.NewTLSServer(s3expresstest.Options{Observe: func(op s3expresstest.Op, r *http.Request) {
		if op == s3expresstest.OpPutObject {
			mu.Lock()
			trailer = r.Header.Get("X-Amz-Trailer")
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	data := bytes.Repeat([]byte("tls"), 100000)
	if err := blob.Put(ctx, s, "t", data, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := blob.ReadAll(ctx, s, "t"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back over TLS: %d bytes, %v", len(got), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if trailer != "x-amz-checksum-crc32c" {
		t.Errorf("PutObject over TLS: x-amz-trailer %q, want x-amz-checksum-crc32c", trailer)
	}
}

func TestIfNotExistRaceWithConflicts(t *testing.T) {
	// S3 may answer 409 ConditionalRequestConflict to racing conditional
	// writes; the store retries them until each learns whether it won.
	srv := newServer(t, s3expresstest.Options{ConflictOnConcurrentWrite: true,
		Profile: s3expresstest.Profile{Put: latency.Dist{P50: 2 * time.Millisecond, P99: 5 * time.Millisecond}}})
	s := newStore(t, srv, s3express.Options{Retries: 10})
	defer s.Close()
	ctx := context.Background()
	for round := range 5 {
		key := fmt.Sprintf("race/%d", round)
		const writers = 16
		errs := make([]error, writers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = blob.Put(ctx, s, key, fmt.Appendf(nil, "writer %d", i), &blob.WriterOptions{If: blob.IfNotExist()})
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		for i, err := range errs {
			switch {
			case err == nil:
				winners++
				if got, _ := blob.ReadAll(ctx, s, key); string(got) != fmt.Sprintf("writer %d", i) {
					t.Errorf("%s holds %q, not the winner %d's data", key, got, i)
				}
			case !errors.Is(err, blob.ErrExists):
				t.Errorf("%s: writer %d: %v, want ErrExists", key, i, err)
			}
		}
		if winners != 1 {
			t.Errorf("%s: %d winners, want exactly 1", key, winners)
		}
	}
	t.Logf("409 answers retried: %d", srv.Stats().Conflicts)

	// A 409 on an uncontended write is retried to success.
	srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpPutObject, Nth: srv.Stats().PutObject + 1, Status: http.StatusConflict})
	if err := blob.Put(ctx, s, "after-conflict", []byte("v"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		t.Errorf("write after one injected 409: %v", err)
	}
	if srv.Stats().FaultsInjected != 1 {
		t.Errorf("the injected 409 was not hit")
	}
}

func TestCanceledMultipartIsAborted(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	s := newStore(t, srv, s3express.Options{MultipartThreshold: 5 << 20, PartSize: 5 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.NewWriter(ctx, "big", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 11<<20)); err != nil {
		t.Fatal(err)
	}
	if srv.Stats().UploadPart != 2 {
		t.Fatalf("parts sent before Close: %d, want 2", srv.Stats().UploadPart)
	}
	cancel()
	if err := w.Close(); !errors.Is(err, context.Canceled) {
		t.Errorf("Close after cancel = %v, want context.Canceled", err)
	}
	s.Close() // waits for the abort
	st := srv.Stats()
	if st.MultipartAbort != 1 || st.MultipartDone != 0 {
		t.Errorf("aborts %d, completes %d; want 1 and 0", st.MultipartAbort, st.MultipartDone)
	}
	s2, err := s3express.New(context.Background(), srv.Client(), s.Bucket(), s3express.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if ok, err := blob.Exists(context.Background(), s2, "big"); ok || err != nil {
		t.Errorf("canceled multipart write committed: %v, %v", ok, err)
	}
}

func TestErrorsKeepTheSDKError(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	_, err := blob.ReadAll(ctx, s, "missing")
	var nsk *types.NoSuchKey
	if !errors.Is(err, blob.ErrNotFound) || !errors.As(err, &nsk) {
		t.Errorf("read of a missing key = %v; want ErrNotFound and *types.NoSuchKey", err)
	}
	_, err = s.Stat(ctx, "missing")
	var ae smithy.APIError
	if !errors.Is(err, blob.ErrNotFound) || !errors.As(err, &ae) {
		t.Errorf("Stat of a missing key = %v; want ErrNotFound and a smithy.APIError", err)
	}
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	err = blob.Put(ctx, s, "k", []byte("v2"), &blob.WriterOptions{If: blob.IfNotExist()})
	if !errors.Is(err, blob.ErrExists) || !errors.As(err, &ae) || ae.ErrorCode() != "PreconditionFailed" {
		t.Errorf("IfNotExist onto an existing key = %v; want ErrExists wrapping PreconditionFailed", err)
	}
}

func TestAppend(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	if err := blob.Put(ctx, s, "log", []byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats()
	// Appending at a known size costs one request, no HeadObject.
	for i, part := range []string{"b", "cd", "efg"} {
		w, err := blob.Append(ctx, s, "log", &blob.AppendOptions{IfSizeMatch: int64(1 + i*(i+1)/2)})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(part))
		if err := w.Close(); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	st := srv.Stats()
	if st.Appends-before.Appends != 3 || st.HeadObject != before.HeadObject {
		t.Errorf("3 appends at known sizes made %d appends and %d HEADs", st.Appends-before.Appends, st.HeadObject-before.HeadObject)
	}
	if got, _ := blob.ReadAll(ctx, s, "log"); string(got) != "abcdefg" {
		t.Errorf("after appends: %q", got)
	}
	// A backend without appends answers 501: the error says so.
	srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpPutObject, Nth: srv.Stats().PutObject + 1, Status: http.StatusNotImplemented, Code: "NotImplemented"})
	w, err := blob.Append(ctx, s, "log", &blob.AppendOptions{IfSizeMatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("h"))
	if err := w.Close(); !errors.Is(err, blob.ErrUnsupported) {
		t.Errorf("append answered 501 = %v, want ErrUnsupported", err)
	}
}

func TestDeleteMany(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	var keys []string
	for i := range 2500 {
		keys = append(keys, fmt.Sprintf("d/%04d", i))
	}
	var wg sync.WaitGroup
	for chunk := range slices.Chunk(keys, 250) {
		wg.Go(func() {
			for _, k := range chunk {
				if err := blob.Put(ctx, s, k, nil, nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.DeleteMany(ctx, append(keys, "d/missing")); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.DeleteObjects != 3 || st.DeletedKeys != 2501 {
		t.Errorf("%d DeleteObjects requests for %d keys, want 3 for 2501", st.DeleteObjects, st.DeletedKeys)
	}
	page, err := s.List(ctx, &blob.ListOptions{Prefix: "d/"})
	if err != nil || len(page.Objects) != 0 {
		t.Errorf("after DeleteMany: %d objects listed, %v", len(page.Objects), err)
	}
	if err := s.DeleteMany(ctx, []string{"ok", "bad\x00"}); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("DeleteMany with an invalid key = %v, want ErrInvalidKey before any request", err)
	}
}

// TestListHonoursTheContract checks what goes on the wire: only prefixes
// that end in "/", never start-after, and a paged listing listed once.
func TestListHonoursTheContract(t *testing.T) {
	var rec recorder
	srv := newServer(t, s3expresstest.Options{Observe: rec.observe, Seed: 42})
	s := newStore(t, srv, s3express.Options{})
	defer s.Close()
	ctx := context.Background()
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("logs/seg-%02d", i)
		want = append(want, k)
		if err := blob.Put(ctx, s, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"logs/sub/x", "logsx", "other"} {
		if err := blob.Put(ctx, s, k, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := srv.Stats().List
	var got []string
	for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "logs/seg-", StartAfter: "logs/seg-04", PageSize: 4}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o.Key)
	}
	if !slices.Equal(got, want[5:]) {
		t.Errorf("listed %q, want %q", got, want[5:])
	}
	if n := srv.Stats().List - before; n != 1 {
		t.Errorf("a paged listing of 5 pages made %d ListObjectsV2 calls, want 1 (later pages from the snapshot)", n)
	}
	for _, r := range rec.of(s3expresstest.OpListObjects) {
		if p := r.query["prefix"]; len(p) > 0 && !strings.HasSuffix(p[0], "/") {
			t.Errorf("sent prefix %q, which a directory bucket refuses", p[0])
		}
		if _, ok := r.query["start-after"]; ok {
			t.Errorf("sent start-after, which a directory bucket refuses")
		}
	}
}

func TestWarmUpErrorSurfacesAtFirstCall(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	s, err := s3express.New(context.Background(), srv.Client(), "absent--use1-az4--x-s3", s3express.Options{})
	if err != nil {
		t.Fatalf("New made a request or failed: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ready(ctx); err == nil {
		t.Errorf("Ready on a missing bucket: no error")
	}
	ok, err := blob.Exists(ctx, s, "k")
	if err == nil || ok || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("first call on a missing bucket = %v, %v; want an error that is not ErrNotFound", ok, err)
	}
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"s3express://logs?region=us-east-1", "not a directory bucket name"},
		{"s3express://logs--use1-az4--x-s3", "region is required"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&regoin=x", "regoin"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&part_size=1024", "minimum part size"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&warm_conns=many", "not an integer"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&multipart_threshold=16MB", "not a size"},
		{"s3express://logs--use1-az4--x-s3/extra?region=us-east-1", "s3express://BUCKET"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&endpoint=127.0.0.1:9", "endpoint must be"},
		{"s3express://AKIDX:topsecret99@logs--use1-az4--x-s3?region=us-east-1", "credentials do not belong"},
		{"s3express://logs--use1-az4--x-s3?region=us-east-1&endpoint=http%3A%2F%2FAKIDX%3Atopsecret99%40127.0.0.1%3A9", "must not carry credentials"},
	} {
		_, err := blob.Open(ctx, c.url)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want an invalid-argument error mentioning %q", c.url, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret99") {
			t.Errorf("Open(%q) error shows the secret: %v", c.url, err)
		}
	}

	setEmulatorCredentials(t)
	srv := newServer(t, s3expresstest.Options{})
	bucket := newBucket(t, srv)
	u := "s3express://" + bucket + "?region=us-east-1&endpoint=" + srv.URL() + "&warm_conns=2&multipart_threshold=8MiB&part_size=5242880"
	s, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	// The same URL through gocloud's default mux reaches our Store.
	b, err := gcblob.OpenBucket(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.ReadAll(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("gocloud ReadAll = %q, %v", got, err)
	}
	r, err := b.NewReader(ctx, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	r.Close()
	if st := srv.Stats(); st.CreateSession != 2 {
		t.Errorf("%d CreateSessions for two stores, want one each", st.CreateSession)
	}
}

// setEmulatorCredentials gives the SDK's default chain static credentials
// for the emulator, from the environment only.
func setEmulatorCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_ACCESS_KEY_ID", s3expresstest.DefaultAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3expresstest.DefaultSecretAccessKey)
}

// TestConflictRetries counts the attempts of a conditional write that S3
// answers with 409 every time: the first, then Retries more.
func TestConflictRetries(t *testing.T) {
	for _, c := range []struct {
		name     string
		retries  int
		attempts int64
	}{
		{"default", 0, 1 + s3express.DefaultRetries},
		{"none", -1, 1},
		{"five", 5, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, s3expresstest.Options{})
			s := newStore(t, srv, s3express.Options{Retries: c.retries})
			defer s.Close()
			ctx := context.Background()
			if err := s.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			before := srv.Stats().PutObject
			for i := range c.attempts + 1 {
				srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpPutObject, Nth: before + 1 + i, Status: http.StatusConflict})
			}
			err := blob.Put(ctx, s, "k", []byte("v"), &blob.WriterOptions{If: blob.IfNotExist()})
			if err == nil {
				t.Fatalf("write that met only 409s succeeded")
			}
			if got := srv.Stats().PutObject - before; got != c.attempts {
				t.Errorf("%d PutObject attempts, want %d", got, c.attempts)
			}
		})
	}
}

// TestURLZeroMeansNone: in a URL, retries=0 sends a conflicted write once and
// warm_conns=0 opens no connection beyond the session's.
func TestURLZeroMeansNone(t *testing.T) {
	setEmulatorCredentials(t)
	srv := newServer(t, s3expresstest.Options{})
	bucket := newBucket(t, srv)
	ctx := context.Background()
	base := srv.Stats().Other
	s, err := blob.Open(ctx, "s3express://"+bucket+"?region=us-east-1&endpoint="+srv.URL()+"&retries=0&warm_conns=0")
	if err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().PutObject
	srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpPutObject, Nth: before + 1, Status: http.StatusConflict})
	if err := blob.Put(ctx, s, "k", []byte("v"), &blob.WriterOptions{If: blob.IfNotExist()}); err == nil {
		t.Errorf("write that met a 409 with retries=0 succeeded")
	}
	if got := srv.Stats().PutObject - before; got != 1 {
		t.Errorf("%d PutObject attempts with retries=0, want 1", got)
	}
	if err := s.Close(); err != nil { // waits for the warm-up
		t.Fatal(err)
	}
	if got := srv.Stats().Other - base; got != 1 {
		t.Errorf("%d bucket requests at open with warm_conns=0, want 1 (the session's)", got)
	}
}

func TestValidateBucket(t *testing.T) {
	for name, ok := range map[string]bool{
		"logs--use1-az4--x-s3":      true,
		"a1-b2--usw2-az1--x-s3":     true,
		"zb--usw2-lax1-az1--x-s3":   true,
		"logs":                      false,
		"logs--x-s3":                false,
		"Logs--use1-az4--x-s3":      false,
		"logs--use1-az4--x-s3x":     false,
		"-logs--use1-az4--x-s3":     false,
		"lo--gs--use1-az4--x-s3":    false,
		"logs--use1--x-s3":          false,
		"logs.dots--use1-az4--x-s3": false,
	} {
		if err := s3express.ValidateBucket(name); (err == nil) != ok {
			t.Errorf("ValidateBucket(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestExpiredSessionIsRenewed(t *testing.T) {
	// The store keeps the SDK's session cache and refresh: after the
	// session expires, calls still succeed on a new one.
	srv := newServer(t, s3expresstest.Options{SessionTTL: 1500 * time.Millisecond})
	s := newStore(t, srv, s3express.Options{WarmConns: -1})
	defer s.Close()
	ctx := context.Background()
	if err := blob.Put(ctx, s, "a", []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1600 * time.Millisecond)
	if got, err := blob.ReadAll(ctx, s, "a"); err != nil || string(got) != "1" {
		t.Fatalf("read after expiry = %q, %v", got, err)
	}
	if st := srv.Stats(); st.CreateSession < 2 {
		t.Errorf("CreateSession = %d, want a new session after expiry", st.CreateSession)
	}
}
