package blob_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

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
		// Nested store URLs are redacted at every level.
		{"quorum://?w=1&replica=azpremium%3A%2F%2Fc%3Faccount%3Da%26key%3DSECRET", "quorum://?replica=azpremium%3A%2F%2Fc%3Faccount%3Da%26key%3DREDACTED&w=1"},
		{"tiered://?hot=s3%3A%2F%2Fu%3ASECRET%40b&cold=mem%3A%2F%2F", "tiered://?cold=mem%3A%2F%2F&hot=s3%3A%2F%2FREDACTED%40b"},
		// An endpoint's user information, with or without a scheme.
		{"gcsrapid://b?endpoint=u%3ASECRET%40127.0.0.1%3A1", "gcsrapid://b?endpoint=REDACTED%40127.0.0.1%3A1"},
		{"s3express://b?endpoint=http%3A%2F%2Fu%3ASECRET%40h", "s3express://b?endpoint=http%3A%2F%2FREDACTED%40h"},
		{"s3://b?region=r#token=SECRET", "s3://b?region=r#REDACTED"},
		{"quorum://?replica=file%3A%2F%2F%2Ft%23SECRET", "quorum://?replica=file%3A%2F%2F%2Ft%23REDACTED"},
	}
	for _, c := range cases {
		if got := blob.Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSecretsFollowNesting(t *testing.T) {
	inner := "azpremium://c?account=acct&key=" + url.QueryEscape("K3Y/with+chars")
	middle := "tiered://?hot=" + url.QueryEscape(inner) + "&cold=" + url.QueryEscape("s3://AKID:PASSW0RD@b?region=r")
	outer := "quorum://?w=1&replica=" + url.QueryEscape(middle) + "&replica=" + url.QueryEscape("gcsrapid://b?endpoint=u:EPSECRET@h:1")
	secrets := blob.Secrets(outer)
	text := "dial " + outer + " failed; key K3Y/with+chars, " + url.QueryEscape("K3Y/with+chars") + ", user AKID:PASSW0RD, endpoint u:EPSECRET@h:1"
	got := blob.RedactSecrets(text, secrets)
	for _, s := range []string{"K3Y", "PASSW0RD", "EPSECRET"} {
		if strings.Contains(got, s) {
			t.Errorf("RedactSecrets left %q in %s", s, got)
		}
		if strings.Contains(blob.Redact(outer), s) {
			t.Errorf("Redact left %q in %s", s, blob.Redact(outer))
		}
	}
	if !strings.Contains(got, "acct") || !strings.Contains(got, "region") {
		t.Errorf("RedactSecrets removed harmless text: %s", got)
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

// TestOperationChecks: what CheckDelete, CheckAppend and CheckCopy accept,
// return and refuse.
func TestOperationChecks(t *testing.T) {
	gen := blob.IfGenerationMatch("7")
	if c, err := blob.CheckDelete("k", nil); err != nil || !c.IsZero() {
		t.Errorf("CheckDelete(nil) = %v, %v", c, err)
	}
	if c, err := blob.CheckDelete("k", &blob.DeleteOptions{If: gen}); err != nil || c != gen {
		t.Errorf("CheckDelete(IfGenerationMatch) = %v, %v", c, err)
	}
	if o, err := blob.CheckAppend("k", nil); err != nil || o.IfSizeMatch != -1 || !o.If.IsZero() {
		t.Errorf("CheckAppend(nil) = %+v, %v", o, err)
	}
	if o, err := blob.CheckAppend("k", &blob.AppendOptions{If: gen, IfSizeMatch: 3}); err != nil || o.If != gen || o.IfSizeMatch != 3 {
		t.Errorf("CheckAppend(IfGenerationMatch, 3) = %+v, %v", o, err)
	}
	if c, err := blob.CheckCopy("k", nil, false); err != nil || !c.IsZero() {
		t.Errorf("CheckCopy(nil) = %v, %v", c, err)
	}
	if c, err := blob.CheckCopy("k", &blob.CopyOptions{If: blob.IfNotExist()}, false); err != nil || !c.NotExist() {
		t.Errorf("CheckCopy(IfNotExist) = %v, %v", c, err)
	}
	if c, err := blob.CheckCopy("k", &blob.CopyOptions{If: gen}, true); err != nil || c != gen {
		t.Errorf("CheckCopy(IfGenerationMatch) where enforced = %v, %v", c, err)
	}
	del := func(c blob.Condition) error {
		_, err := blob.CheckDelete("k", &blob.DeleteOptions{If: c})
		return err
	}
	app := func(c blob.Condition) error {
		_, err := blob.CheckAppend("k", &blob.AppendOptions{If: c})
		return err
	}
	cp := func(c blob.Condition, generationMatch bool) error {
		_, err := blob.CheckCopy("k", &blob.CopyOptions{If: c}, generationMatch)
		return err
	}
	for name, err := range map[string]error{
		"delete IfNotExist":                        del(blob.IfNotExist()),
		"delete empty generation":                  del(blob.IfGenerationMatch("")),
		"append IfNotExist":                        app(blob.IfNotExist()),
		"append empty generation":                  app(blob.IfGenerationMatch("")),
		"copy empty generation":                    cp(blob.IfGenerationMatch(""), true),
		"copy generation where it is not enforced": cp(gen, false),
	} {
		var be *blob.Error
		if !errors.Is(err, blob.ErrInvalidArgument) || !errors.As(err, &be) || be.Key != "k" {
			t.Errorf("%s: %v, want an ErrInvalidArgument *blob.Error for k", name, err)
		}
	}
}

func TestCondition(t *testing.T) {
	var zero blob.Condition
	if !zero.IsZero() || zero.NotExist() || zero.GenerationMatch() != "" || zero.Validate("write", "k") != nil {
		t.Errorf("zero Condition is not unconditional: %v", zero)
	}
	ne := blob.IfNotExist()
	if ne.IsZero() || !ne.NotExist() || ne.GenerationMatch() != "" {
		t.Errorf("IfNotExist: %v", ne)
	}
	gm := blob.IfGenerationMatch("7")
	if g, ok := gm.Generation(); gm.IsZero() || gm.NotExist() || !ok || g != "7" || gm.GenerationMatch() != "7" {
		t.Errorf("IfGenerationMatch: %v", gm)
	}
	if err := blob.IfGenerationMatch("").Validate("write", "k"); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("empty generation accepted: %v", err)
	}
}
