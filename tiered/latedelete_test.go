package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/register"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestMoveWhoseHotDeleteFailed fails a move's delete from a quorum hot tier
// with its tombstone accepted on replica 0 only: the move reports the
// failure and leaves its pack. That tombstone is not dead:
// a quorum operation that hears replica 0 before a newer version is chosen
// finishes it, so the move takes effect later. Two processes, each with
// its own quorum client of the three replicas, then meet it:
//
//   - delete: a user's Delete whose Stat does not hear replica 0 (it sees
//     the object in hot) and whose grave over it does: the grave's round
//     finishes the move's delete, and the Delete then deletes the version
//     where the move put it. The object existed, so the Delete must
//     succeed, and nothing may serve the version after it.
//   - recovery: the compactor's next pass does not hear replica 0 while it
//     looks at the key (hot still shows the object, so the move did not
//     happen) and moves the object again, whose delete from hot does hear
//     it. The tombstone must not be taken for a user's delete: the object
//     is in both packs, and must stay readable.
//
// Reads and writes are recorded and checked against a register.
func TestMoveWhoseHotDeleteFailed(t *testing.T) {
	for _, name := range []string{"delete", "recovery"} {
		t.Run(name, func(t *testing.T) { moveWhoseHotDeleteFailed(t, name) })
	}
}

func moveWhoseHotDeleteFailed(t *testing.T, name string) {
	const key, v1 = "k", "v1"
	var mems []blob.Store
	for range 3 {
		m, _ := memPair(t)
		mems = append(mems, m)
	}
	_, cold := memPair(t)
	tune := func(o *quorum.Options) {
		// Replicas that fail are not set aside: the test says which one
		// each call hears.
		o.FailureThreshold = 1 << 20
		o.StragglerTimeout = 300 * time.Millisecond
	}
	process := func(name string, at func(step, key string)) (*tiered.Store, []*fault.Store, *quorum.Store) {
		var fs []*fault.Store
		var rs []blob.Store
		for i, m := range mems {
			f := fault.Wrap(m, fault.Options{Seed: uint64(i), Name: fmt.Sprintf("%s-%d", name, i)})
			fs = append(fs, f)
			rs = append(rs, nopClose{f})
		}
		q := newQuorum(t, rs, tune)
		hot := &hooked{Store: q, name: "hot", at: at}
		return manualWith(t, hot, cold, tiered.Options{PackMaxObjects: alone, MoveTimeout: 2 * time.Second, MaxClockSkew: time.Millisecond}), fs, q.(quorumHot).Store
	}
	// hearOnly0And2 is set when a process's delete of key from hot (or its
	// grave over it) must hear replica 0: its replica 0 comes back and
	// replica 1 goes down.
	var hearOnly0And2 []*fault.Store
	at := func(step, k string) {
		if (step == "hot:delete" || step == "hot:write") && k == key && hearOnly0And2 != nil {
			hearOnly0And2[0].SetDown(false)
			hearOnly0And2[1].SetDown(true)
			hearOnly0And2 = nil
		}
	}
	failing, ff, fq := process("failing", at)
	user, fu, uq := process("user", at)
	h := &history{}
	ctx := ctxT(t)
	h.write(0, register.Input{Kind: register.Put, Key: key, Value: v1}, func() error {
		return blob.Put(ctx, user, key, []byte(v1), nil)
	})
	// The Put's last replica may commit late (a busy machine): its repair,
	// run after the move's tombstone landed on replica 0, would settle the
	// key and so finish that delete. Every replica holds v1 first.
	for i := 0; ; i++ {
		if st := uq.Stats(); st.TrackedKeys == 0 && st.RepairPending == 0 {
			break
		}
		if i > 2000 {
			t.Fatalf("the Put never reached every replica: %+v", uq.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The move's delete from hot: replicas 1 and 2 promise (slower than
	// replica 0, so that its promise is among the round's) and refuse the
	// accept.
	for _, f := range ff[1:] {
		f.Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: key, Effect: fault.Delay, Latency: latency.Dist{P50: 20 * time.Millisecond, P99: 20 * time.Millisecond}})
		f.Add(fault.Rule{Op: fault.OpCommit, KeyPrefix: key, Skip: 1})
	}
	if res := failing.CompactOnce(ctx); res.Failed == 0 || res.Moved != 0 {
		t.Fatalf("pass %+v: the move's delete from hot did not fail", res)
	}
	// The process whose move failed stops (as a crashed one would), its
	// faults in place, so that its repair of the key cannot finish the
	// delete: the compactor that follows shares its Owner, and recovers.
	fq.Close()
	compactor, fc, _ := process("compactor", at)
	held := replicaStates(t, mems, key)
	if held != "[tombstone v1 v1]" {
		t.Fatalf("replicas hold %s, want the move's tombstone on replica 0 only", held)
	}

	switch name {
	case "delete":
		fu[0].SetDown(true)
		h.read(ctx, 1, user, key)
		hearOnly0And2 = fu
		call := h.Tick()
		err := user.Delete(ctx, key, nil)
		ret := h.Tick()
		fu[1].SetDown(false)
		if hearOnly0And2 != nil {
			t.Fatal("the Delete did not write to hot")
		}
		res := register.OK
		switch {
		case errors.Is(err, blob.ErrNotFound):
			res = register.NotFound
		case err != nil:
			t.Fatal(err)
		}
		h.add(1, register.Input{Kind: register.Delete, Key: key}, call, register.Output{Res: res}, ret)
		if err != nil {
			t.Errorf("Delete of an object that existed: %v", err)
		}
	case "recovery":
		fc[0].SetDown(true)
		hearOnly0And2 = fc
		res := compactor.CompactOnce(ctx)
		fc[1].SetDown(false)
		if hearOnly0And2 != nil {
			t.Fatalf("pass %+v: the second move did not delete from hot", res)
		}
		if res.Failed != 0 {
			t.Fatalf("pass %+v: the second move failed", res)
		}
		t.Logf("second pass %+v; replicas hold %s", res, replicaStates(t, mems, key))
	}
	for range 3 {
		h.read(ctx, 1, user, key)
		h.read(ctx, 2, compactor, key)
	}
	h.Check(t, time.Minute)
}

// replicaStates describes what each replica holds for key: "absent",
// "tombstone" (or placeholder), or the value.
func replicaStates(t *testing.T, mems []blob.Store, key string) string {
	t.Helper()
	var out []string
	for _, m := range mems {
		b, err := blob.ReadAll(context.Background(), m, key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			out = append(out, "absent")
		case err != nil:
			t.Fatal(err)
		case bytes.Contains(b, []byte("zonalblob-quorum")):
			out = append(out, "tombstone")
		default:
			out = append(out, string(b))
		}
	}
	return fmt.Sprint(out)
}
