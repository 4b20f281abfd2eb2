package tiered_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestGraveRetiredPastAReplicaThatMissedIt deletes a key over a 2-of-3
// quorum while zone 2 is down: the grave is chosen on zones 0 and 1, and
// zone 2 keeps the deleted version. The pass that retires the grave runs
// while zone 2 is still down. Once it is back, a read that hears zones 1
// and 2 (zone 0 is down now) must not find the deleted version: a
// majority read that finds a version on one replica and nothing on the
// other settles it back, so a retirement that took the grave from zones 0
// and 1 while zone 2 still held the version it deleted brought that
// version back (TestLinearizable over a flaky quorum: a Delete, a read that
// found nothing, then a read of the deleted value). Once every zone
// answers, a pass retires the grave, and the key stays deleted.
func TestGraveRetiredPastAReplicaThatMissedIt(t *testing.T) {
	for _, packs := range []int{alone, 10} {
		t.Run(fmt.Sprintf("packs=%d", packs), func(t *testing.T) { graveRetiredPastAReplica(t, packs) })
	}
}

func graveRetiredPastAReplica(t *testing.T, packs int) {
	// The processes reach the zones through replicas (which go down);
	// the test looks at them through raw.
	var replicas, raw []*fault.Store
	var rs []blob.Store
	for i := range 3 {
		m, _ := memPair(t)
		f := fault.Wrap(m, fault.Options{Seed: uint64(i + 1), Name: fmt.Sprint("zone", i)})
		replicas, rs = append(replicas, f), append(rs, nopClose{f})
		raw = append(raw, fault.Wrap(m, fault.Options{Name: fmt.Sprint("raw", i)}))
	}
	_, cold := memPair(t)
	o := tiered.Options{PackMaxObjects: packs, MoveTimeout: 500 * time.Millisecond, MaxClockSkew: time.Millisecond}
	uq := newQuorum(t, rs)
	user := manualWith(t, uq, cold, o)
	ctx := ctxT(t)

	mustPut(t, user, "k", "v1")
	waitOnEveryReplica(t, uq.(quorumHot).Store, "k")
	replicas[2].SetDown(true)
	if err := user.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if n := rawCopies(t, raw, "k"); n != 1 {
		t.Fatalf("%d replicas hold the deleted version, want zone 2, which missed the grave", n)
	}
	// A compactor whose clock is past the grave's hold; zone 2 does not
	// answer its pass.
	compactor := manualWith(t, testkit.AgedBy(newQuorum(t, rs), tiered.GraveHold(o.MoveTimeout, o.MaxClockSkew)+time.Minute), cold, o)
	compactor.CompactOnce(ctx)
	replicas[2].SetDown(false)

	replicas[0].SetDown(true)
	reader := manualWith(t, newQuorum(t, rs), cold, o)
	if b, err := blob.ReadAll(ctx, reader, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read hearing zones 1 and 2 after the grave's retirement: %q, %v; want NotFound", b, err)
	}
	replicas[0].SetDown(false)

	// Every zone answers: a pass retires the grave (a survey that misses
	// a zone leaves it for the next), and the key stays deleted.
	for i := 0; compactor.Stats().GravesRetired == 0; i++ {
		if i == 20 {
			t.Fatalf("20 passes with every zone up did not retire the grave: %+v", compactor.Stats())
		}
		compactor.CompactOnce(ctx)
	}
	for name, s := range map[string]*tiered.Store{"user": user, "compactor": compactor, "reader": reader} {
		if b, err := blob.ReadAll(ctx, s, "k"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("read by the %s after the grave's retirement: %q, %v; want NotFound", name, b, err)
		}
	}
	if n := rawCopies(t, raw, "k"); n != 0 {
		t.Errorf("%d replicas still hold the deleted version", n)
	}
}
