package quorum_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/internal/emulators"
	"github.com/zonalblob/zonalblob/quorum"
)

func w2URL(replicas ...string) string {
	q := url.Values{}
	for _, r := range replicas {
		q.Add("replica", r)
	}
	q.Set("w", "2")
	return "quorum://?" + q.Encode()
}

// A quorum opens as soon as W replicas have: a zone that does not answer
// (its open would take its whole connect_timeout, a minute here) does not
// hold it up, and writes and reads go to the others.
func TestOpenWithADeadZone(t *testing.T) {
	dead := "gcsrapid://b?pool_size=0&connect_timeout=1m&endpoint=" + emulators.Blackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := blob.Open(ctx, w2URL("mem://", dead, "mem://"))
	if err != nil {
		t.Fatalf("open with one dead zone of three: %v", err)
	}
	defer s.Close()
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	b, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), s, "k")
	if err != nil || string(b) != "v" {
		t.Fatalf("read %q, %v", b, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the caller's context ran out")
	}
}

// An open that the configuration refuses fails the quorum's, naming the
// replica, however many others opened; one that cannot reach W fails too.
func TestOpenRefusedReplica(t *testing.T) {
	ctx := context.Background()
	_, err := blob.Open(ctx, w2URL("mem://", "mem://?bogus=1", "mem://"))
	if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "replica 1") {
		t.Errorf("bad replica URL: %v", err)
	}
	dead := "gcsrapid://b?pool_size=0&connect_timeout=200ms&endpoint=" + emulators.Blackhole(t)
	_, err = blob.Open(ctx, w2URL("mem://", dead, dead))
	if !errors.Is(err, quorum.ErrNoQuorum) {
		t.Errorf("two dead zones of three: %v", err)
	}
}
