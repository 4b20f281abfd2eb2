package blob_test

import (
	"context"
	"errors"
	"net/url"
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
