package tiered_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestIdleCatalogMissesATombstone lets a process's catalog sit idle while
// the compactor, in another process, deletes what it holds from the pack
// log: a pack the idle catalog loaded loses its only entry to a Delete, the
// grave's retirement kills it in a tombstone, the pack is rewritten away
// and, once no pack holds the version, the tombstone is removed. The idle
// process never saw the tombstone, and still holds the removed pack (with
// its index cached): a refresh of its catalog that lists only the log
// objects named since its last one (less a window) finds nothing new, and
// served the dead version again: Stat and List showed the key, and a
// Delete of it succeeded, after a Delete that returned and reads that
// found nothing (TestLinearizable with a process paused past its lease: a
// Delete that succeeds after one that found nothing). Reads are right
// either way: they read the removed pack, find it gone and relist all.
//
// The steps are taken one after another, on synctest's clock, so the
// interleaving is the same every run.
func TestIdleCatalogMissesATombstone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hot, cold := memPair(t)
		opts := tiered.Options{PackMaxObjects: 10, MoveTimeout: 50 * time.Millisecond, MaxClockSkew: time.Millisecond}
		compactor := manualWith(t, hot, cold, opts)
		idle := manualWith(t, hot, cold, opts)
		ctx := ctxT(t)
		pass := func(what string) {
			t.Helper()
			if res := compactor.CompactOnce(ctx); res.Failed != 0 {
				t.Fatalf("pass %s: %+v (%s)", what, res, compactor.Stats().LastError)
			}
		}
		mustPut(t, idle, "k", "v1")
		time.Sleep(time.Millisecond) // older than After
		pass("packing k")
		if got := compactor.Stats().Packs; got != 1 {
			t.Fatalf("%d packs: want k packed", got)
		}
		// The idle process loads the pack (its index stays cached) and
		// deletes k: a grave over nothing in hot, which shadows the pack's
		// entry.
		if got, err := blob.ReadAll(ctx, idle, "k"); err != nil || string(got) != "v1" {
			t.Fatalf("read: %q, %v", got, err)
		}
		if err := idle.Delete(ctx, "k", nil); err != nil {
			t.Fatal(err)
		}
		// The compactor retires the grave (a tombstone kills the packed v1),
		// then, once they are older than the log window, rewrites the pack
		// (nothing in it is live: it is removed) and removes the tombstone
		// (no pack holds v1 any more). No pass of the idle process runs,
		// and none of its operations.
		time.Sleep(tiered.GraveHold(opts.MoveTimeout, opts.MaxClockSkew))
		pass("retiring the grave")
		if st := compactor.Stats(); st.GravesRetired != 1 || st.Tombstones != 1 {
			t.Fatalf("stats %+v: want the grave retired by a tombstone", st)
		}
		window := 2*opts.MoveTimeout + opts.MaxClockSkew
		for range 3 {
			time.Sleep(4 * window)
			pass("maintaining the packs")
		}
		if st := compactor.Stats(); st.Rewrites == 0 {
			t.Fatalf("stats %+v: want the pack rewritten", st)
		}
		if logs := listKeys(t, cold); len(logs) != 1 {
			// The inventory alone is left.
			t.Fatalf("cold holds %q: want the pack and the tombstone removed", logs)
		}
		// The idle process wakes: k is gone for every operation.
		if a, err := idle.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("stat: %+v, %v; want not found", a, err)
		}
		if keys := listKeys(t, idle); len(keys) != 0 {
			t.Errorf("listing: %q; want none", keys)
		}
		if err := idle.Delete(ctx, "k", nil); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("delete: %v; want not found", err)
		}
		if got, err := blob.ReadAll(ctx, idle, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("read: %q, %v; want not found", got, err)
		}
	})
}
