package tiered_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestDeleteDuringAPackMove deletes a key from hot while a pack move has
// read it and not yet committed its pack: the Delete replaces the version
// in hot with a grave and returns without waiting for the move; a reader
// finds the key gone from then on, before the pack lands, after it, and
// after the grave is retired with the packed copy. (A Delete that removed
// the key from hot first, and killed the packed copy after, let a reader
// see it come back in between.)
func TestDeleteDuringAPackMove(t *testing.T) {
	hot, cold := memPair(t)
	opts := tiered.Options{PackMaxObjects: 10, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond}
	packHeld, packGo := make(chan struct{}), make(chan struct{})
	held := false
	compactorCold := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if step == "cold:write" && strings.HasPrefix(key, markerPrefix+"log/") && strings.Contains(key, "-p-") && !held {
			held = true
			close(packHeld)
			<-packGo
		}
	}}
	compactor := manualWith(t, hot, compactorCold, opts)
	user := manualWith(t, hot, cold, opts)
	reader := manualWith(t, hot, cold, opts)
	ctx := ctxT(t)
	mustPut(t, user, "k", "v1")

	moved := make(chan tiered.PassResult, 1)
	go func() { moved <- compactor.CompactOnce(ctx) }()
	<-packHeld // the move read k and is about to write its pack
	if err := user.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if st := user.Stats(); st.Graves != 1 {
		t.Fatalf("stats %+v: want the Delete's grave", st)
	}
	gone := func(when string) {
		t.Helper()
		if got, err := blob.ReadAll(ctx, reader, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("read %s: %q, %v; want not found", when, got, err)
		}
		if a, err := reader.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("stat %s: %+v, %v; want not found", when, a, err)
		}
		if keys := listKeys(t, reader); len(keys) != 0 {
			t.Errorf("listing %s: %q", when, keys)
		}
	}
	gone("after the delete")
	close(packGo)
	if res := <-moved; res.Failed != 0 || res.Moved != 0 {
		t.Fatalf("pass %+v: want the move to find k deleted", res)
	}
	if packs := listKeys(t, cold); len(packs) == 0 {
		t.Fatal("the move wrote no pack: the test does not test")
	}
	gone("after the pack landed")
	retireGraves(t, hot, cold, opts)
	gone("after the grave was retired")
	if left := listKeys(t, hot); len(left) != 0 {
		t.Errorf("hot holds %q", left)
	}
}
