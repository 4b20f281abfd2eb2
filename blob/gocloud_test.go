package blob_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

func init() {
	// A scheme of ours, as a driver package registers it: on both registries.
	blob.RegisterWithGocloud("zbtest", func(ctx context.Context, u *url.URL) (blob.Store, error) {
		q := driver.NewQuery(u)
		q.String("label", "")
		if err := q.Err(); err != nil {
			return nil, err
		}
		return blob.Open(ctx, "mem://")
	})
}

func TestGocloudAppOpensOurScheme(t *testing.T) {
	ctx := context.Background()
	b, err := gcblob.OpenBucket(ctx, "zbtest://?label=x")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "k", []byte("v"), &gcblob.WriterOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	err = b.WriteAll(ctx, "k", []byte("w"), &gcblob.WriterOptions{IfNotExist: true})
	if gcerrors.Code(err) != gcerrors.FailedPrecondition {
		t.Errorf("IfNotExist conflict through gocloud: code %v (%v), want FailedPrecondition", gcerrors.Code(err), err)
	}
	var be *blob.Error
	if !b.ErrorAs(err, &be) || !errors.Is(be, blob.ErrExists) {
		t.Errorf("ErrorAs(*blob.Error) = %v", be)
	}
	_, err = b.ReadAll(ctx, "missing")
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing key: code %v, want NotFound", gcerrors.Code(err))
	}
	var s blob.Store
	if !b.As(&s) || s == nil {
		t.Error("Bucket.As(*blob.Store) failed")
	}
	if got, err := blob.ReadAll(ctx, s, "k"); err != nil || string(got) != "v" {
		t.Errorf("store behind the bucket has %q, %v", got, err)
	}
	// Our registry knows the scheme too, and both reject unknown parameters.
	if _, err := blob.Open(ctx, "zbtest://?nope=1"); err == nil {
		t.Error("unknown parameter accepted by blob.Open")
	}
	if _, err := gcblob.OpenBucket(ctx, "zbtest://?nope=1"); err == nil {
		t.Error("unknown parameter accepted by gocloud")
	}
}

// leakyStore echoes its URL's credentials in every error, as an SDK quoting
// its request might.
type leakyStore struct {
	blob.Store
	url string
}

func (s leakyStore) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	return nil, blob.Errorf("stat", key, blob.ErrNotFound, "GET %s: 404", s.url)
}

func (s leakyStore) Delete(ctx context.Context, key string, _ *blob.DeleteOptions) error {
	return blob.Errorf("delete", key, nil, "DELETE %s: connection reset", s.url)
}

func init() {
	blob.RegisterWithGocloud("zbleak", func(ctx context.Context, u *url.URL) (blob.Store, error) {
		q := driver.NewQuery(u)
		q.String("token", "")
		q.String("replica", "")
		if err := q.Err(); err != nil {
			return nil, err
		}
		if u.Host == "fail" {
			return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "cannot reach %s", u.String())
		}
		s, err := blob.Open(ctx, "mem://")
		return leakyStore{s, u.String()}, err
	})
}

func TestGocloudBridgeRedactsErrors(t *testing.T) {
	ctx := context.Background()
	nested := url.QueryEscape("s3://AKID:NESTEDSECRET@b?region=r")
	for _, u := range []string{"zbleak://h?token=TOPSECRET&replica=" + nested, "zbleak://fail?token=TOPSECRET&replica=" + nested} {
		b, err := gcblob.OpenBucket(ctx, u)
		var errs []error
		if err != nil {
			errs = append(errs, err)
		} else {
			_, err1 := b.Attributes(ctx, "k")
			err2 := b.Delete(ctx, "k")
			errs = append(errs, err1, err2)
			if gcerrors.Code(err1) != gcerrors.NotFound {
				t.Errorf("redaction lost the error code: %v", gcerrors.Code(err1))
			}
			b.Close()
		}
		for _, err := range errs {
			if err == nil {
				t.Fatal("want an error")
			}
			for _, s := range []string{"TOPSECRET", "NESTEDSECRET"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("gocloud error shows %s: %v", s, err)
				}
			}
		}
	}
}
