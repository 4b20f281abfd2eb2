package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/quorum"
)

// A write whose accept reached one replica of three, and then failed, may
// take effect later: a majority read that hears that replica finishes it.
// Resolve ends that: after it, the failed write has either taken effect
// (Resolve heard it) or never will. Each case fails a write in one process
// (its replicas 1 and 2 refuse every replica write after its promises), and
// reads in another through each pair of replicas; the control shows the
// late effect Resolve exists to prevent.
func TestResolveEndsAFailedWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		base    bool // the key holds "base" before the failed write
		del     bool // the failed write is a Delete, not a Put of "late"
		resolve bool
		hear0   bool // replica 0, which holds the failed write, is up for Resolve
		// want is what every read after it returns; with hear0 it may
		// instead be or (Resolve's round may complete on replicas 1 and 2
		// before replica 0 answers), but all reads agree.
		want, or string
	}{
		{name: "unresolved", base: true, del: true, want: ""},
		{name: "delete", base: true, del: true, resolve: true, want: "base"},
		{name: "delete-up", base: true, del: true, resolve: true, hear0: true, want: "", or: "base"},
		{name: "create", resolve: true, want: ""},
		{name: "create-up", resolve: true, hear0: true, want: "late", or: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions()
			o.StragglerTimeout = 300 * time.Millisecond
			o.TombstoneGrace = time.Hour
			c := newCluster(t, 3, 2, o, 9)
			a, b := c.procs[0], c.procs[1]
			h := &history{}
			ctx := majority(context.Background())
			const key = "k"
			if tc.base {
				if err := h.put(ctx, 0, b.q, key, "base"); err != nil {
					t.Fatal(err)
				}
				waitAll(t, c, key, "base")
			}
			for _, f := range a.faults[1:] {
				// Slower than replica 0, so that its promise is among the
				// round's and the accept goes to it.
				f.AddLatency(fault.OpCommit, latency.Dist{P50: 20 * time.Millisecond, P99: 20 * time.Millisecond})
				f.FailFrom(fault.OpCommit, 2, 0, nil)
			}
			var err error
			if tc.del {
				err = h.del(ctx, 1, a.q, key)
			} else {
				err = h.put(ctx, 1, a.q, key, "late")
			}
			if err == nil {
				t.Fatal("the write with two replicas refusing its accepts succeeded")
			}
			c.stop(a)
			if got := replicaBytes(c, key)[0]; tc.del && got == "base" || !tc.del && got != "late" {
				t.Fatalf("replica 0 holds %q: the failed write's accept did not land there", got)
			}
			b.faults[0].SetDown(!tc.hear0)
			if tc.base && !tc.hear0 {
				if v, _, err := h.read(ctx, 2, b.q, key); err != nil || v != "base" {
					t.Fatalf("read through replicas 1 and 2: %q, %v", v, err)
				}
			}
			if tc.resolve {
				if err := b.q.Resolve(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			b.faults[0].SetDown(false)
			// Every pair of replicas, the one holding the failed write first.
			want, first := tc.want, true
			for _, down := range []int{1, 2, 0, 1} {
				b.faults[down].SetDown(true)
				v, _, err := h.read(ctx, 2, b.q, key)
				for try := 0; errors.Is(err, quorum.ErrNoQuorum) && try < 100; try++ {
					// The replica just back up is not yet probed healthy.
					time.Sleep(10 * time.Millisecond)
					v, _, err = h.read(ctx, 2, b.q, key)
				}
				b.faults[down].SetDown(false)
				switch {
				case errors.Is(err, blob.ErrNotFound):
					v = ""
				case err != nil:
					t.Fatalf("read with replica %d down: %v", down, err)
				}
				// Unresolved, the first read (it hears replica 0) finishes
				// the delete.
				if first && tc.hear0 && v == tc.or {
					want = tc.or
					t.Logf("Resolve's round completed without replica 0: the failed write never takes effect")
				}
				first = false
				if v != want {
					t.Fatalf("read with replica %d down: %q, want %q (replicas %q)", down, v, want, replicaBytes(c, key))
				}
			}
			h.Check(t, checkTimeout)
		})
	}
}
