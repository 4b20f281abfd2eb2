package quorum_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
)

// damage rewrites key on one replica behind the quorum's back: f gets its
// bytes and metadata and returns what to put there instead.
func damage(t *testing.T, replica blob.Store, key string, f func(b []byte, md map[string]string) ([]byte, map[string]string)) {
	t.Helper()
	ctx := context.Background()
	a, err := replica.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.ReadAll(ctx, replica, key)
	if err != nil {
		t.Fatal(err)
	}
	nb, md := f(b, maps.Clone(a.Metadata))
	if err := blob.Put(ctx, replica, key, nb, &blob.WriterOptions{Metadata: md}); err != nil {
		t.Fatal(err)
	}
}

func setKey(k, v string) func([]byte, map[string]string) ([]byte, map[string]string) {
	return func(b []byte, md map[string]string) ([]byte, map[string]string) {
		md[k] = v
		return b, md
	}
}

// One damaged replica of three loses nothing: every read, fastest or
// majority, in a process that never saw the damage, returns the
// acknowledged value or nothing it did not write; conditional writes and
// deletes go on; and repair rewrites the damaged replica from the others.
func TestDamagedReplica(t *testing.T) {
	cases := map[string]func([]byte, map[string]string) ([]byte, map[string]string){
		"garbage ballot":        setKey(quorum.BallotKey, strings.Repeat("z", 24)),
		"garbage promise":       setKey(quorum.PromiseKey, "garbage"),
		"promise far ahead":     setKey(quorum.PromiseKey, "7fffffffffffffff00000000"),
		"garbage version":       setKey(quorum.VersionKey, "zz"),
		"unknown state":         setKey(quorum.StateKey, "maybe"),
		"garbage checksum":      setKey(quorum.ChecksumKey, "xyz"),
		"garbage chain":         setKey(quorum.ChainKey, "not-a-token"),
		"foreign object":        func([]byte, map[string]string) ([]byte, map[string]string) { return []byte("foreign"), nil },
		"bytes changed":         func(b []byte, md map[string]string) ([]byte, map[string]string) { return []byte("VALUE-2"), md },
		"bytes truncated":       func(b []byte, md map[string]string) ([]byte, map[string]string) { return b[:3], md },
		"bytes emptied":         func(b []byte, md map[string]string) ([]byte, map[string]string) { return nil, md },
		"older version's bytes": func(b []byte, md map[string]string) ([]byte, map[string]string) { return []byte("v1"), md },
	}
	for name, hurt := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 3, 1, testOptions(), 3)
			p := c.procs[0]
			for _, v := range []string{"v1", "value-2"} {
				if err := blob.Put(ctx, p.q, "k", []byte(v), nil); err != nil {
					t.Fatal(err)
				}
			}
			waitUntracked(t, p.q)
			damage(t, c.mems[0], "k", hurt)

			// Part of the value is verified too: a process to which the
			// damaged replica answers first never serves its bytes.
			first := c.start()
			for _, f := range first.faults[1:] {
				f.Add(fault.Rule{Op: fault.OpRead, Effect: fault.Delay, Latency: latency.Fixed(time.Second)})
			}
			if got, err := blob.ReadRange(ctx, first.q, "k", 1, 6); err != nil || string(got) != "alue-2" {
				t.Fatalf("range read with replica 0 the fastest: %q, %v", got, err)
			}

			q := c.start().q // a process that never saw the damage
			var gen string
			for _, cons := range []quorum.Consistency{quorum.ReadFastest, quorum.ReadMajority, quorum.ReadFastest} {
				for range 4 {
					got, a, err := readAttrs(quorum.WithConsistency(ctx, cons), q, "k")
					if err != nil || got != "value-2" {
						t.Fatalf("%v read: %q, %v", cons, got, err)
					}
					gen = a.Generation
				}
			}
			// The damage is counted: by those reads, by the writer's
			// own repair (on a busy machine a repair of its write may
			// run after the damage, find it and rewrite it), or, where
			// the reads all chose other replicas (the fastest, on a busy
			// machine not always replica 0) and so left it in place, by a
			// process that can read replica 0 only, which serves nothing
			// of it.
			if q.Stats().Damaged+first.q.Stats().Damaged+p.q.Stats().Damaged == 0 {
				d := c.start()
				for _, f := range d.faults[1:] {
					f.Add(fault.Rule{Op: fault.OpRead})
					f.Add(fault.Rule{Op: fault.OpReaderAt})
				}
				if got, _, err := readAttrs(ctx, d.q, "k"); err == nil && got != "value-2" {
					t.Fatalf("read of replica 0 alone: %q", got)
				}
				if st := d.q.Stats(); st.Damaged == 0 {
					t.Errorf("the damage was not counted: %+v", st)
				}
			}
			// Part of the value is verified too: from any replica, and
			// from replica 0 alone never its damaged bytes.
			for _, cons := range []quorum.Consistency{quorum.ReadFastest, quorum.ReadMajority} {
				if got, err := blob.ReadRange(quorum.WithConsistency(ctx, cons), q, "k", 1, 4); err != nil || string(got) != "alue" {
					t.Fatalf("%v range read: %q, %v", cons, got, err)
				}
			}
			if err := blob.Put(ctx, q, "k", []byte("value-3"), &blob.WriterOptions{If: blob.IfGenerationMatch(gen)}); err != nil {
				t.Fatalf("conditional write over the acknowledged value: %v", err)
			}
			if got, _, err := readAttrs(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "k"); err != nil || got != "value-3" {
				t.Fatalf("read after the conditional write: %q, %v", got, err)
			}
			if err := q.Delete(ctx, "k", nil); err != nil {
				t.Fatal(err)
			}
			if got, _, err := readAttrs(quorum.WithConsistency(ctx, quorum.ReadMajority), c.start().q, "k"); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("majority read after the delete, new process: %q, %v", got, err)
			}
			// Repair rewrites the damaged replica: it ends up holding the
			// tombstone the others hold, so that fastest reads, which may
			// lag another process's writes until then, find it too.
			for i := 0; ; i++ {
				deleted := 0
				for _, m := range c.mems {
					if a, err := m.Stat(ctx, "k"); err == nil && a.Metadata[quorum.StateKey] == "deleted" {
						deleted++
					}
				}
				if deleted == len(c.mems) {
					break
				}
				if i > 1000 {
					a, err := c.mems[0].Stat(ctx, "k")
					t.Fatalf("the replicas were never repaired: replica 0 %+v, %v; stats %+v", a, err, q.Stats())
				}
				q.AntiEntropy(ctx)
				time.Sleep(5 * time.Millisecond)
			}
			for range 4 {
				if got, _, err := readAttrs(ctx, c.start().q, "k"); !errors.Is(err, blob.ErrNotFound) {
					t.Fatalf("fastest read after the repair, new process: %q, %v", got, err)
				}
			}
		})
	}
}
