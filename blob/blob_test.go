package blob_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

// sdkError stands in for a backend's own error type.
type sdkError struct{ code int }

func (e *sdkError) Error() string { return fmt.Sprintf("sdk error %d", e.code) }

func TestErrorUnwrapsToSentinelAndCause(t *testing.T) {
	cause := &sdkError{404}
	err := blob.WrapError("stat", "k", cause, func(error) error { return blob.ErrNotFound })
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("errors.Is(ErrNotFound) false for %v", err)
	}
	var se *sdkError
	if !errors.As(err, &se) || se.code != 404 {
		t.Errorf("errors.As(*sdkError) failed for %v", err)
	}
	var be *blob.Error
	if !errors.As(err, &be) || be.Op != "stat" || be.Key != "k" {
		t.Errorf("errors.As(*blob.Error) = %+v", be)
	}
	if want := `blob: stat "k": object not found: sdk error 404`; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if blob.WrapError("x", "k", nil, nil) != nil {
		t.Error("WrapError(nil) != nil")
	}
	canceled := blob.WrapError("read", "k", context.Canceled, func(error) error { return blob.ErrNotFound })
	if errors.Is(canceled, blob.ErrNotFound) || !errors.Is(canceled, context.Canceled) {
		t.Errorf("context errors must not be classified: %v", canceled)
	}
}

func TestValidateKey(t *testing.T) {
	for _, c := range []struct {
		name, key string
		ok        bool
	}{
		{"plain", "a/b/c", true},
		{"unicode", "日本語/🙂", true},
		{"max", strings.Repeat("k", blob.MaxKeyLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("k", blob.MaxKeyLen+1), false},
		{"invalid utf8", "\xff", false},
		{"surrogate", "\xed\xa0\x80", false},
		{"nul", "a\x00", false},
	} {
		err := blob.ValidateKey("write", c.key)
		if (err == nil) != c.ok {
			t.Errorf("%s: ValidateKey = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("%s: %v does not wrap ErrInvalidKey", c.name, err)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("%s: message of %d bytes is not readable", c.name, len(err.Error()))
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, url string
		want      []string // substrings of the message
		secrets   []string // must not appear
	}{
		{"no scheme", "just-a-bucket", []string{"no scheme", "mem"}, nil},
		{"unknown scheme", "ftp://bucket", []string{`unknown scheme "ftp"`, "file", "mem"}, nil},
		{"malformed", "mem://a b%zz", []string{"malformed URL"}, nil},
		{"malformed with password", "ftp://user:hunter22@host/%zz", []string{"malformed URL"}, []string{"hunter22"}},
		{"unknown scheme with password", "ftp://user:hunter22@host/b", []string{"unknown scheme"}, []string{"hunter22"}},
		{"unknown parameter", "mem://?colour=blue", []string{"colour"}, nil},
		{"unknown parameter with token", "mem://?sas_token=s3cr3tvalue", []string{"sas_token"}, []string{"s3cr3tvalue"}},
		{"file unknown parameter", "file:///tmp/zb?nope=1", []string{"nope"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := blob.Open(ctx, c.url)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", c.url)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, secret := range c.secrets {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q leaks %q", err, secret)
				}
			}
		})
	}
}

func TestOpenBadKeysBeforeIO(t *testing.T) {
	ctx := context.Background()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, key := range []string{"", "\xff", "a\x00b", strings.Repeat("x", 1025)} {
		if err := blob.Put(ctx, s, key, []byte("x"), nil); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q): %v, want ErrInvalidKey", key, err)
		}
		if _, _, err := blob.Create(ctx, s, key+"\x00", nil); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Create(%q): %v, want ErrInvalidKey", key+"\x00", err)
		}
	}
}

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"mem://", "mem://"},
		{"s3://user:pass@bucket?region=eu", "s3://REDACTED@bucket?region=eu"},
		{"azblob://c?sas_token=abc&domain=x", "azblob://c?domain=x&sas_token=REDACTED"},
		{"gs://b?access_key_id=AKID&Signature=zzz", "gs://b?Signature=REDACTED&access_key_id=REDACTED"},
		{"weird://u:p@h/%zz?token=t", "weird://REDACTED@h/%zz?token=REDACTED"},
		{"file:///tmp/a@b", "file:///tmp/a@b"},
		{"x://h?a=%zz&token=t", "x://h?REDACTED"},
	}
	for _, c := range cases {
		if got := blob.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestQuery(t *testing.T) {
	u, _ := url.Parse("x://b?pool_size=8&age=5s&on=true&replica=a&replica=b&bad=zz")
	q := blob.NewQuery(u)
	if got := q.Int("pool_size", 1); got != 8 {
		t.Errorf("Int = %d", got)
	}
	if got := q.Duration("age", 0); got != 5*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if got := q.Bool("on", false); !got {
		t.Errorf("Bool = %v", got)
	}
	if got := q.Strings("replica"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Strings = %v", got)
	}
	if got := q.Int("missing", 7); got != 7 {
		t.Errorf("default = %d", got)
	}
	q.Int("bad", 0)
	err := q.Err()
	if err == nil || !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), `"zz" is not an integer`) {
		t.Errorf("Err = %v", err)
	}
	u2, _ := url.Parse("x://b?known=1&typo=2")
	q2 := blob.NewQuery(u2)
	q2.String("known", "")
	if err := q2.Err(); err == nil || !strings.Contains(err.Error(), "typo") || !strings.Contains(err.Error(), "known") {
		t.Errorf("unknown parameter error = %v", err)
	}
}

func TestNewNameOrderedAndParsable(t *testing.T) {
	before := time.Now()
	var names []string
	for range 1000 {
		names = append(names, blob.NewName("p/"))
	}
	after := time.Now()
	if !slices.IsSorted(names) {
		t.Fatal("names from one process are not in creation order")
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Fatal("duplicate names")
	}
	// The name carries the time it was made: between the two clock readings
	// around it, in that order, whatever time it took.
	ts, ok := blob.NameTime(names[0])
	if !ok || ts.Before(before) || ts.After(after) {
		t.Errorf("NameTime(%q) = %v, %v; want a time between %v and %v", names[0], ts, ok, before, after)
	}
	for _, bad := range []string{"", "p/short", "p/20261129T205253.123456789Z_9f86d081884c7d65", "p/2026112XT205253.123456789Z-9f86d081884c7d65"} {
		if _, ok := blob.NameTime(bad); ok {
			t.Errorf("NameTime(%q) parsed", bad)
		}
	}
}

func TestPaginate(t *testing.T) {
	var objs []blob.ListObject
	for _, k := range []string{"b", "a/2", "a/1", "c", "a-", "a/x/y"} {
		objs = append(objs, blob.ListObject{Key: k})
	}
	var got []string
	opts := &blob.ListOptions{Delimiter: "/", PageSize: 2}
	for {
		p, err := blob.Paginate(objs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Objects {
			got = append(got, o.Key)
		}
		if p.NextPageToken == "" {
			break
		}
		opts.PageToken = p.NextPageToken
	}
	if want := []string{"a-", "a/", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Paginate = %q, want %q", got, want)
	}
	if _, err := blob.Paginate(objs, &blob.ListOptions{PageToken: "!!"}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("bad token: %v", err)
	}
}

// plainStore hides the mem store's optional interfaces, to exercise fallbacks.
type plainStore struct{ blob.Store }

func TestHelperFallbacks(t *testing.T) {
	ctx := context.Background()
	mem, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	s := plainStore{mem}
	defer s.Close()
	if _, err := blob.Append(ctx, s, "k", nil); !errors.Is(err, blob.ErrUnsupported) {
		t.Errorf("Append fallback: %v", err)
	}
	w, err := blob.Prewarm(ctx, s, "warm", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("w"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.Prewarm(ctx, s, "warm", nil); err == nil {
		// The fallback is an IfNotExist write: the conflict shows at Close.
		w, _ := blob.Prewarm(ctx, s, "warm", nil)
		w.Write([]byte("again"))
		if err := w.Close(); !errors.Is(err, blob.ErrExists) {
			t.Errorf("second prewarmed write of one key: %v, want ErrExists", err)
		}
	}
	if err := blob.Copy(ctx, s, "copy", "warm", nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := blob.ReadAll(ctx, s, "copy"); string(b) != "w" {
		t.Errorf("copy fallback read %q", b)
	}
}
