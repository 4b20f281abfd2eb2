package azpremium_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
)

// clearAzureEnv keeps the developer's own Azure settings out of URL tests.
func clearAzureEnv(t *testing.T) {
	for _, k := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING"} {
		t.Setenv(k, "")
	}
}

func TestOpenErrors(t *testing.T) {
	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_KEY", "c2VjcmV0LWtleQ==")
	ctx := context.Background()
	cases := []struct{ url, want string }{
		{"azpremium://logs?account=acct&bogus=1", "unknown parameter(s) bogus"},
		{"azpremium://logs", "no storage account"},
		{"azpremium://Bad_Name?account=acct", "container"},
		{"azpremium://logs?account=acct&endpoint=ftp://x", "not an http(s) URL"},
		{"azpremium://logs?account=acct&endpoint=http://h/acct?sig=abc", "must not carry credentials"},
		{"azpremium://logs?account=acct&multipart_threshold=6000MiB", "multipart_threshold"},
		{"azpremium://logs?account=acct&part_size=lots", "part_size"},
		{"azpremium://logs?account=acct&concurrency=0", "concurrency"},
		{"azpremium://logs?account=acct&warm_conns=many", "warm_conns"},
		{"azpremium://logs?account=acct&retries=x", "retries"},
		{"azpremium://logs?account=acct&connect_timeout=-1s", "connect_timeout"},
		{"azpremium://logs?account=acct&warmup=false", "unknown parameter(s) warmup"},
		{"azpremium://user:pw@logs?account=acct", "carry no credentials"},
		{"azpremium://logs/sub?account=acct", "has a path"},
	}
	for _, c := range cases {
		// An endpoint nothing listens on: if open made a request, the
		// error would be a connection error, not the one wanted.
		_, err := blob.Open(ctx, c.url)
		if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v, want ErrInvalidArgument mentioning %q", c.url, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "c2VjcmV0LWtleQ==") || strings.Contains(err.Error(), ":pw@")) {
			t.Errorf("Open(%s) error shows a credential: %v", c.url, err)
		}
	}
}

func TestOpenURL(t *testing.T) {
	srv := azurite(t)
	name := newContainer(t, srv)
	clearAzureEnv(t)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", srv.ConnectionString())
	ctx := context.Background()
	// The endpoint comes from the connection string.
	s, err := blob.Open(ctx, "azpremium://"+name+"?multipart_threshold=1MiB&part_size=256KiB&concurrency=2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := blob.Put(ctx, s, "via-url", []byte("hello"), nil); err != nil {
		t.Fatal(err)
	}
	// gocloud applications reach the same store through the DefaultURLMux.
	b, err := gcblob.OpenBucket(ctx, "azpremium://"+name+"?account="+srv.Account)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.ReadAll(ctx, "via-url")
	if err != nil || string(got) != "hello" {
		t.Fatalf("gocloud read = %q, %v", got, err)
	}
	if str := fmt.Sprint(s); strings.Contains(str, srv.Key) {
		t.Errorf("store prints its key: %s", str)
	}
}

// TestCredentialsNeverShown drives every failure path it can reach with a
// wrong key, a wrong SAS token and a missing container, with the SDK's own
// logging on, and greps errors, printed options and logs for the secrets.
func TestCredentialsNeverShown(t *testing.T) {
	srv := azurite(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	azlog.SetListener(func(ev azlog.Event, msg string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&logs, "%s: %s\n", ev, msg)
	})
	defer azlog.SetListener(nil)
	wrongKey := "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
	sas := "sv=2024-08-04&ss=b&srt=sco&sp=rwdl&se=2099-01-01T00:00:00Z&sig=U2VjcmV0U2lnbmF0dXJlVmFsdWUxMjM0NTY3ODkwYWI%3D"
	secrets := []string{srv.Key, wrongKey, "U2VjcmV0U2lnbmF0dXJlVmFsdWUxMjM0NTY3ODkwYWI"}
	ctx := context.Background()
	var shown []string
	for _, o := range []azpremium.Options{
		{Account: srv.Account, Endpoint: srv.Endpoint(), AccountKey: azpremium.Secret(wrongKey)},
		{Account: srv.Account, Endpoint: srv.Endpoint(), SASToken: azpremium.Secret(sas)},
		{Account: srv.Account, Endpoint: srv.Endpoint(), AccountKey: azpremium.Secret(srv.Key)},
		{ConnectionString: azpremium.Secret(strings.Replace(srv.ConnectionString(), srv.Key, wrongKey, 1))},
	} {
		o.Retry.MaxRetries = -1
		shown = append(shown, fmt.Sprintf("%v %+v %#v", o, o, o))
		s, err := azpremium.New(ctx, "no-such-container", o)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, s.String())
		_, err = s.Stat(ctx, "k")
		shown = append(shown, fmt.Sprint(err))
		if err == nil {
			t.Errorf("Stat with %v succeeded", o)
		}
		shown = append(shown, fmt.Sprint(blob.Put(ctx, s, "k", []byte("x"), nil)))
		_, err = s.List(ctx, nil)
		shown = append(shown, fmt.Sprint(err))
		shown = append(shown, fmt.Sprint(s.Delete(ctx, "k", nil)))
		_, err = s.NewAppender(ctx, "k", nil)
		shown = append(shown, fmt.Sprint(err))
		s.Close()
	}
	_, err := azpremium.New(ctx, "abc", azpremium.Options{Account: "a", AccountKey: "not base64 " + azpremium.Secret(srv.Key)})
	shown = append(shown, fmt.Sprint(err))
	_, err = azpremium.New(ctx, "abc", azpremium.Options{ConnectionString: azpremium.Secret("AccountName=a;" + srv.Key)})
	shown = append(shown, fmt.Sprint(err))
	mu.Lock()
	shown = append(shown, logs.String())
	mu.Unlock()
	if logs.Len() == 0 {
		t.Errorf("the SDK logged nothing; the log check proves nothing")
	}
	all := strings.Join(shown, "\n")
	for _, sec := range secrets {
		if strings.Contains(all, sec) {
			t.Errorf("secret %.8s... appears in errors or logs:\n%s", sec, all)
		}
	}
	// The SDK's error stays reachable for callers that need its code.
	s := newStore(t, azpremium.Options{})
	defer s.Close()
	_, err = s.Stat(ctx, "missing")
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 404 || !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat(missing) = %v; want ErrNotFound wrapping a 404 *azcore.ResponseError", err)
	}
}

// TestWarmupErrorAtFirstCall: open does no request in the foreground; the
// background warm-up's failure (no such container) is what the first call
// returns.
func TestWarmupErrorAtFirstCall(t *testing.T) {
	srv := azurite(t)
	s, err := azpremium.New(context.Background(), "never-created", storeOptions(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.List(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "warm-up") || !strings.Contains(err.Error(), "ContainerNotFound") {
		t.Errorf("first call = %v, want the warm-up's ContainerNotFound", err)
	}
}

func TestIfNotExistRaceOneWinner(t *testing.T) {
	s := newStore(t, azpremium.Options{})
	defer s.Close()
	ctx := context.Background()
	for round := range 5 {
		key := fmt.Sprintf("commit/%d", round)
		const n = 24
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = blob.Put(ctx, s, key, fmt.Appendf(nil, "w%d", i), &blob.WriterOptions{If: blob.IfNotExist()})
			})
		}
		close(start)
		wg.Wait()
		var winners []int
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, i)
			case !errors.Is(err, blob.ErrExists):
				t.Errorf("writer %d: %v, want ErrExists", i, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%s: winners %v, want exactly one", key, winners)
		}
		got, err := blob.ReadAll(ctx, s, key)
		if err != nil || string(got) != fmt.Sprintf("w%d", winners[0]) {
			t.Errorf("%s = %q, %v; want the winner's bytes", key, got, err)
		}
	}
}

func TestETagPreconditions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts azpremium.Options
		size int
	}{
		{"put-blob", azpremium.Options{}, 100},
		{"staged", azpremium.Options{MultipartThreshold: 1 << 10, PartSize: 700}, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.opts)
			defer s.Close()
			ctx := context.Background()
			v1 := bytes.Repeat([]byte("1"), tc.size)
			if err := blob.Put(ctx, s, "k", v1, nil); err != nil {
				t.Fatal(err)
			}
			a1, err := s.Stat(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(a1.Generation, `"`) || a1.Generation != a1.ETag {
				t.Errorf("Generation %q, want the quoted ETag %q", a1.Generation, a1.ETag)
			}
			if err := blob.Put(ctx, s, "k", []byte("v2"), &blob.WriterOptions{If: blob.IfGenerationMatch(a1.Generation)}); err != nil {
				t.Fatalf("write at the current ETag: %v", err)
			}
			err = blob.Put(ctx, s, "k", []byte("v3"), &blob.WriterOptions{If: blob.IfGenerationMatch(a1.Generation)})
			var re *azcore.ResponseError
			if !errors.Is(err, blob.ErrPrecondition) || !errors.As(err, &re) || re.StatusCode != 412 {
				t.Errorf("write at a stale ETag = %v, want ErrPrecondition over a 412", err)
			}
			err = blob.Put(ctx, s, "absent", []byte("v"), &blob.WriterOptions{If: blob.IfGenerationMatch(a1.Generation)})
			if !errors.Is(err, blob.ErrPrecondition) {
				t.Errorf("conditional write of an absent key = %v, want ErrPrecondition", err)
			}
			if got, _ := blob.ReadAll(ctx, s, "k"); string(got) != "v2" {
				t.Errorf("content %q, want v2", got)
			}
		})
	}
}

// TestCanceledStagedWrite: blocks already staged when ctx is canceled stay
// uncommitted, and an earlier version survives.
func TestCanceledStagedWrite(t *testing.T) {
	s := newStore(t, azpremium.Options{MultipartThreshold: 1 << 10, PartSize: 1 << 10})
	defer s.Close()
	ctx := context.Background()
	if err := blob.Put(ctx, s, "k", []byte("old"), nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.NewWriter(wctx, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("n"), 10<<10)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.Close(); !errors.Is(err, context.Canceled) {
		t.Errorf("Close after cancel = %v, want context.Canceled", err)
	}
	if got, _ := blob.ReadAll(ctx, s, "k"); string(got) != "old" {
		t.Errorf("content %q after a canceled staged write, want old", got)
	}
}

func TestAppendBlobOffsets(t *testing.T) {
	s := newStore(t, azpremium.Options{})
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateAppendBlob(ctx, "log", &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	err := s.CreateAppendBlob(ctx, "log", &blob.WriterOptions{If: blob.IfNotExist()})
	if !errors.Is(err, blob.ErrExists) {
		t.Errorf("second CreateAppendBlob = %v, want ErrExists", err)
	}
	// Each round, several appenders race for the same offset: exactly one
	// wins, and the record lands at that offset.
	var want bytes.Buffer
	for round := range 6 {
		var wg sync.WaitGroup
		const n = 6
		errs := make([]error, n)
		offset := int64(want.Len())
		for i := range n {
			wg.Go(func() {
				w, err := s.NewAppender(ctx, "log", &blob.AppendOptions{IfSizeMatch: offset})
				if err != nil {
					errs[i] = err
					return
				}
				fmt.Fprintf(w, "r%d-w%d;", round, i)
				errs[i] = w.Close()
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both appended at %d", round, winner, i, offset)
			case err == nil:
				winner = i
			case !errors.Is(err, blob.ErrPrecondition):
				t.Errorf("round %d writer %d: %v, want ErrPrecondition", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		fmt.Fprintf(&want, "r%d-w%d;", round, winner)
	}
	got, err := blob.ReadAll(ctx, s, "log")
	if err != nil || got == nil || string(got) != want.String() {
		t.Errorf("log = %q, %v; want %q", got, err, want.String())
	}
	// An unconditional append goes to the end, and the attributes survive.
	w, err := s.NewAppender(ctx, "log", &blob.AppendOptions{IfSizeMatch: -1})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 5<<20)
	w.Write(big)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := s.Stat(ctx, "log")
	if err != nil || a.Size != int64(want.Len()+len(big)) || a.ContentType != "text/plain" {
		t.Errorf("after a 5 MiB append: %+v, %v", a, err)
	}
	tail, err := blob.ReadRange(ctx, s, "log", int64(want.Len())-3, 4)
	if err != nil || string(tail) != string(want.Bytes()[want.Len()-3:])+"x" {
		t.Errorf("bytes around the append boundary = %q, %v", tail, err)
	}
}

func TestAppendToBlockBlobKeepsAttributes(t *testing.T) {
	s := newStore(t, azpremium.Options{})
	defer s.Close()
	ctx := context.Background()
	opts := &blob.WriterOptions{ContentType: "application/x-seg", Metadata: map[string]string{"Owner-ID": "ä 1"}}
	if err := blob.Put(ctx, s, "seg", []byte("head"), opts); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"+a", "+b"} {
		w, err := s.NewAppender(ctx, "seg", nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(part))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := blob.ReadAll(ctx, s, "seg")
	a, err := s.Stat(ctx, "seg")
	if string(got) != "head+a+b" || err != nil || a.ContentType != "application/x-seg" || a.Metadata["Owner-ID"] != "ä 1" {
		t.Errorf("after appends: %q, %+v, %v", got, a, err)
	}
}

func TestBackslashKeysDoNotAlias(t *testing.T) {
	s := newStore(t, azpremium.Options{})
	defer s.Close()
	ctx := context.Background()
	keys := []string{`a\b`, "a/b", "a__0x5c__b", "c\x01d"}
	for _, k := range keys {
		if err := blob.Put(ctx, s, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if got, err := blob.ReadAll(ctx, s, k); err != nil || string(got) != k {
			t.Errorf("%q read %q, %v", k, got, err)
		}
	}
	page, err := s.List(ctx, nil)
	if err != nil || len(page.Objects) != len(keys) {
		t.Fatalf("List = %+v, %v", page, err)
	}
}

// TestRegionalOverAzureblob runs gocloud's own azureblob driver against
// Azurite through blob/regional: the path a tiered store compacts into.
func TestRegionalOverAzureblob(t *testing.T) {
	srv := azurite(t)
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			name := newContainer(t, srv)
			client, err := srv.Client(nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := azureblob.OpenBucket(ctx, client.ServiceClient().NewContainerClient(name), nil)
			if err != nil {
				t.Fatal(err)
			}
			// BufferedUploads is what an azblob:// URL sets: gocloud's
			// streaming azureblob writer panics when an upload fails.
			return regional.New(b, regional.Options{BufferedUploads: true})
		},
		// regional refuses generation preconditions on cloud buckets and
		// has no appends; azureblob passes delimiters through.
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}
