package gcsrapid_test

import (
	"context"
	"errors"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

func TestAppendStreams(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{})
	defer s.Close()
	if !blob.ServesAppendStreams(s) {
		t.Fatal("gcsrapid does not report append streams")
	}
	a, err := s.CreateAppendStream(ctx, "log", []byte("head|"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAppendStream(ctx, "log", []byte("again")); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	before := srv.Stats()
	for _, p := range []string{"one|", "two|"} {
		if err := a.Append(ctx, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	after := srv.Stats()
	if a.Size() != 13 || after.Flushes-before.Flushes != 2 || after.ObjectsCreated != before.ObjectsCreated {
		t.Errorf("size %d; %d flushes, %d creates for two appends", a.Size(), after.Flushes-before.Flushes, after.ObjectsCreated-before.ObjectsCreated)
	}
	// A takeover fences the first stream and starts at the persisted size.
	b, err := s.TakeOverAppendStream(ctx, "log")
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != 13 {
		t.Errorf("taken over at %d, want 13", b.Size())
	}
	if err := a.Append(ctx, []byte("stale|")); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("append on a stream taken over: %v, want ErrPrecondition", err)
	}
	if err := b.Append(ctx, []byte("three")); err != nil {
		t.Fatal(err)
	}
	got, err := blob.ReadAll(ctx, s, "log")
	if err != nil || string(got) != "head|one|two|three" {
		t.Errorf("object holds %q, %v", got, err)
	}
	a.Close()
	b.Close()
	if _, err := s.TakeOverAppendStream(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("take over a missing object: %v, want ErrNotFound", err)
	}
}
