package objstore_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/thanos-io/objstore"

	zobjstore "github.com/zonalblob/zonalblob/adapters/objstore"
	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	_ "github.com/zonalblob/zonalblob/quorum"
	_ "github.com/zonalblob/zonalblob/tiered"
)

// quorumURL is a 2-of-3 quorum of mem:// replicas.
var quorumURL = "quorum://?w=2&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F"

// stores are the Stores the adapter is checked over, by URL.
var stores = []struct{ name, url string }{
	{"mem", "mem://"},
	{"quorum", quorumURL},
	{"tiered", "tiered://?hot=" + url.QueryEscape(quorumURL) + "&cold=mem%3A%2F%2F&after=0"},
}

func open(t *testing.T, rawURL string) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAcceptance runs objstore's own acceptance test over each store, and
// over a gcsrapid bucket on the in-process emulator.
func TestAcceptance(t *testing.T) {
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{
		Buckets: []gcsrapidtest.Bucket{{Name: "zonal", Zonal: true}},
		Profile: gcsrapidtest.Zero(),
	})
	all := append(slices.Clone(stores), struct{ name, url string }{"gcsrapid", "gcsrapid://zonal?endpoint=" + srv.Endpoint()})
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			b := zobjstore.New(open(t, tc.url), tc.name)
			defer func() {
				if err := b.Close(); err != nil {
					t.Error(err)
				}
			}()
			objstore.AcceptanceTest(t, b)
		})
	}
}

// TestErrorClassification checks that objstore's error predicates follow
// blob's sentinels, whichever call returns them.
func TestErrorClassification(t *testing.T) {
	ctx := context.Background()
	f := fault.Wrap(open(t, "mem://"), fault.Options{})
	b := zobjstore.New(f, "b")
	defer b.Close()
	if err := b.Upload(ctx, "k", strings.NewReader("v")); err != nil {
		t.Fatal(err)
	}

	f.FailNth(fault.OpStat, 1, blob.ErrPermission)
	_, err := b.Attributes(ctx, "k")
	if !b.IsAccessDeniedErr(err) || b.IsObjNotFoundErr(err) {
		t.Errorf("Attributes with permission denied: %v, access denied %v, not found %v", err, b.IsAccessDeniedErr(err), b.IsObjNotFoundErr(err))
	}
	f.FailNth(fault.OpRead, 1, blob.ErrBucketNotFound)
	if _, err := b.Get(ctx, "k"); err == nil || b.IsObjNotFoundErr(err) {
		t.Errorf("Get of a missing bucket: %v, want an error that is not a missing object", err)
	}
	// A store that reports a missing object only at the first Read.
	f.Add(fault.Rule{Op: fault.OpReadData, Count: 1, Err: blob.ErrNotFound})
	if _, err := b.Get(ctx, "k"); !b.IsObjNotFoundErr(err) {
		t.Errorf("Get with a late not-found: %v, want not found", err)
	}
	if err := b.Delete(ctx, "missing"); !b.IsObjNotFoundErr(err) {
		t.Errorf("Delete of a missing object: %v, want not found", err)
	}
	if _, err := b.GetRange(ctx, "missing", 0, 1); !b.IsObjNotFoundErr(err) {
		t.Errorf("GetRange of a missing object: %v, want not found", err)
	}
	if _, err := b.Get(ctx, ""); err == nil || !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Get of an empty name: %v, want ErrInvalidKey", err)
	}
}

// TestUploadFailedReadCommitsNothing checks that an Upload whose reader fails
// leaves no object behind.
func TestUploadFailedReadCommitsNothing(t *testing.T) {
	ctx := context.Background()
	b := zobjstore.New(open(t, "mem://"), "b")
	defer b.Close()
	broken := io.MultiReader(strings.NewReader("partial"), errReader{})
	if err := b.Upload(ctx, "k", broken); err == nil {
		t.Fatal("Upload of a failing reader succeeded")
	}
	if ok, err := b.Exists(ctx, "k"); ok || err != nil {
		t.Errorf("after a failed Upload: exists %v, %v", ok, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source failed") }

// TestIterWithAttributes checks modification times and the options that
// are refused.
func TestIterWithAttributes(t *testing.T) {
	ctx := context.Background()
	b := zobjstore.New(open(t, "mem://"), "b")
	defer b.Close()
	for _, k := range []string{"d/a", "d/e/f", "d/"} {
		if err := b.Upload(ctx, k, strings.NewReader(k)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := b.IterWithAttributes(ctx, "d", func(a objstore.IterObjectAttributes) error {
		_, ok := a.LastModified()
		if ok == strings.HasSuffix(a.Name, "/") {
			t.Errorf("%s: has a modification time %v", a.Name, ok)
		}
		got = append(got, a.Name)
		return nil
	}, objstore.WithUpdatedAt())
	if err != nil {
		t.Fatal(err)
	}
	if want := "d/a d/e/"; strings.Join(got, " ") != want {
		t.Errorf("entries %q, want %q", got, want)
	}
	stop := errors.New("stop")
	if err := b.Iter(ctx, "", func(string) error { return stop }, objstore.WithRecursiveIter()); err != stop {
		t.Errorf("Iter returned %v, want the callback's error", err)
	}
	if err := b.Iter(ctx, "", func(string) error { return nil }, objstore.IterOption{Type: -1, Apply: func(*objstore.IterParams) {}}); !errors.Is(err, objstore.ErrOptionNotSupported) {
		t.Errorf("Iter with an unknown option: %v", err)
	}
}
