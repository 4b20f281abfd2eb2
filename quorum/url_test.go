package quorum_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	gcblob "gocloud.dev/blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

func quorumURL(params string) string {
	m := url.QueryEscape("mem://")
	return "quorum://?" + params + "replica=" + m + "&replica=" + m + "&replica=" + m
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	s, err := blob.Open(ctx, quorumURL("w=2&consistency=majority&hedge_delay=5ms&"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, ok := s.(*quorum.Store)
	if !ok || q.W() != 2 || len(q.Replicas()) != 3 {
		t.Fatalf("opened %T (w=%d)", s, q.W())
	}
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	// The write was acknowledged at two; the third copy lands in the background.
	deadline := time.Now().Add(5 * time.Second)
	for i, r := range q.Replicas() {
		for {
			b, err := blob.ReadAll(ctx, r, "k")
			if err == nil && string(b) == "v" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: %q, %v", i, b, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func TestOpenURLErrors(t *testing.T) {
	for name, u := range map[string]string{
		"no replicas":           "quorum://?w=2",
		"w too large":           quorumURL("w=4&"),
		"unknown parameter":     quorumURL("colour=blue&"),
		"bad consistency":       quorumURL("consistency=strong&"),
		"host":                  "quorum://host?replica=mem%3A%2F%2F",
		"short tombstone grace": quorumURL("tombstone_grace=1s&straggler_timeout=1s&"),
	} {
		if _, err := blob.Open(context.Background(), u); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := blob.Open(context.Background(), "quorum://?replica=nope%3A%2F%2Fx"); err == nil {
		t.Errorf("unknown replica scheme opened")
	}
}

func TestOpenThroughGocloud(t *testing.T) {
	ctx := context.Background()
	b, err := gcblob.OpenBucket(ctx, quorumURL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, "g", []byte("through gocloud"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadAll(ctx, "g"); err != nil || string(got) != "through gocloud" {
		t.Errorf("ReadAll = %q, %v", got, err)
	}
}

// Prewarmed creates commit through the warm handles and keep IfNotExist.
func TestPrewarm(t *testing.T) {
	q := newQuorum(t, testkit.Mems(t, 3), testOptions())
	defer q.Close()
	ctx := context.Background()
	w, err := blob.Prewarm(ctx, q, "warm/1", &blob.WriterOptions{ContentType: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("warm bytes"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := blob.ReadAll(ctx, q, "warm/1"); err != nil || string(b) != "warm bytes" {
		t.Errorf("read %q, %v", b, err)
	}
	if a, err := q.Stat(ctx, "warm/1"); err != nil || a.ContentType != "text/plain" {
		t.Errorf("Stat = %+v, %v", a, err)
	}
	if w, err := q.Prewarm(ctx, "warm/1", nil); err == nil {
		w.Write([]byte("again"))
		err = w.Close()
		if !errors.Is(err, blob.ErrExists) {
			t.Errorf("second prewarmed create: %v, want ErrExists", err)
		}
	} else if !errors.Is(err, blob.ErrExists) {
		t.Errorf("second Prewarm: %v, want ErrExists", err)
	}
}

// quorum:// with pool_size pools its creates (a pool.Creator in front of
// the quorum); pool parameters are checked before any I/O.
func TestOpenURLPooled(t *testing.T) {
	ctx := context.Background()
	s, err := blob.Open(ctx, quorumURL("pool_size=8&pool_min_idle=2&"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := blob.CapabilitiesOf(s); !c.Create {
		t.Fatalf("capabilities %+v: want pooled creates", c)
	}
	key, err := blob.CreateBytes(ctx, s, "events/", []byte("e1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := blob.ReadAll(ctx, s, key); err != nil || string(b) != "e1" {
		t.Fatalf("read of the created %s: %q, %v", key, b, err)
	}
	plain, err := blob.Open(ctx, quorumURL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if blob.CapabilitiesOf(plain).Create {
		t.Error("a quorum URL without pool_size pools its creates")
	}
	for _, bad := range []string{
		"pool_min_idle=2&",                               // without pool_size
		"pool_size=0&max_pools=3&",                       // pooling off, yet a pool parameter
		"pool_size=8&max_item_age=10m&grace_window=10m&", // could reclaim a write in flight
		"pool_size=-1&",
		"pool_size=8&pool_min_idle=9&",
	} {
		if _, err := blob.Open(ctx, quorumURL(bad)); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", bad, err)
		}
	}
}
