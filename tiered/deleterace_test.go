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
// read it and not yet committed its pack, and holds the Delete just before
// it writes its tombstone: a reader that found the key gone must not find
// it again once the pack lands, and after the Delete returns the key is
// gone. (A Delete that removed the key from hot first, and killed the
// packed copy after, let a reader see it come back in between.)
func TestDeleteDuringAPackMove(t *testing.T) {
	hot, cold := memPair(t)
	opts := tiered.Options{PackMaxObjects: 10, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond}
	packHeld, packGo := make(chan struct{}), make(chan struct{})
	tombHeld, tombGo := make(chan struct{}), make(chan struct{})
	holdOnce := func(held, release chan struct{}) func() {
		done := false
		return func() {
			if !done {
				done = true
				close(held)
				<-release
			}
		}
	}
	holdPack, holdTomb := holdOnce(packHeld, packGo), holdOnce(tombHeld, tombGo)
	compactorCold := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if step == "cold:write" && strings.HasPrefix(key, markerPrefix+"log/") && strings.Contains(key, "-p-") {
			holdPack()
		}
	}}
	userCold := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if step == "cold:write" && strings.Contains(key, "-t-") {
			holdTomb()
		}
	}}
	compactor := manualWith(t, hot, compactorCold, opts)
	user := manualWith(t, hot, userCold, opts)
	reader := manualWith(t, hot, cold, opts)
	ctx := ctxT(t)
	mustPut(t, user, "k", "v1")

	moved := make(chan tiered.PassResult, 1)
	go func() { moved <- compactor.CompactOnce(ctx) }()
	<-packHeld // the move read k and is about to write its pack
	deleted := make(chan error, 1)
	go func() { deleted <- user.Delete(ctx, "k", nil) }()
	select {
	case <-tombHeld: // the Delete is about to write a tombstone
	case err := <-deleted:
		t.Fatalf("the delete returned (%v) without a tombstone, with a move of its key under way", err)
	}
	_, err := blob.ReadAll(ctx, reader, "k")
	goneBefore := errors.Is(err, blob.ErrNotFound)
	close(packGo)
	if res := <-moved; res.Failed != 0 {
		t.Fatalf("pass %+v", res)
	}
	got, err := blob.ReadAll(ctx, reader, "k")
	if goneBefore && !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("read after the pack landed: %q, %v; want not found (a reader saw the key gone before)", got, err)
	}
	close(tombGo)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, err := blob.ReadAll(ctx, reader, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read after the delete returned: %v, want not found", err)
	}
}
