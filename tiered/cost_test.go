package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/cost"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// requestsOf sums what fault wrappers counted, in the classes providers
// bill: commits and listings are writes (Class A), Stats and reads are
// reads (Class B); deletes are free.
func requestsOf(zonal []*fault.Store, regional *fault.Store) cost.Requests {
	var r cost.Requests
	for _, f := range zonal {
		st := f.Stats()
		r.ZonalWrites += float64(st[fault.OpCommit].Calls + st[fault.OpList].Calls)
		r.ZonalReads += float64(st[fault.OpStat].Calls + st[fault.OpRead].Calls)
	}
	st := regional.Stats()
	r.RegionalWrites = float64(st[fault.OpCommit].Calls + st[fault.OpList].Calls)
	r.RegionalReads = float64(st[fault.OpStat].Calls + st[fault.OpRead].Calls)
	return r
}

func minus(a, b cost.Requests) cost.Requests {
	return cost.Requests{ZonalWrites: a.ZonalWrites - b.ZonalWrites, ZonalReads: a.ZonalReads - b.ZonalReads,
		RegionalWrites: a.RegionalWrites - b.RegionalWrites, RegionalReads: a.RegionalReads - b.RegionalReads}
}

func per(r cost.Requests, n float64) cost.Requests {
	return cost.Requests{ZonalWrites: r.ZonalWrites / n, ZonalReads: r.ZonalReads / n, RegionalWrites: r.RegionalWrites / n, RegionalReads: r.RegionalReads / n}
}

// near allows a quorum's occasional extra round (a hedge, a repair): half a
// request per operation.
func nearRequests(got, want cost.Requests) bool {
	return math.Abs(got.ZonalWrites-want.ZonalWrites) <= 0.5 && math.Abs(got.ZonalReads-want.ZonalReads) <= 0.5 &&
		math.Abs(got.RegionalWrites-want.RegionalWrites) <= 0.5 && math.Abs(got.RegionalReads-want.RegionalReads) <= 0.5
}

// TestCostCounts runs each operation package cost prices, on one zonal
// bucket and on a 2-of-3 quorum of them, in front of a regional store, all
// fault-wrapped, and checks the requests the wrappers counted against the
// model's: a user's write, the compactor's work per object and per pack and
// per pass, a user's delete of a packed object (with the listings and
// tombstones the deletes in flight share), and (for the untiered layout) a
// delete in hot.
func TestCostCounts(t *testing.T) {
	const objects, perPack = 1000, 100
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			var zonal []*fault.Store
			var hot blob.Store
			if n == 1 {
				m, _ := memPair(t)
				f := fault.Wrap(m, fault.Options{Seed: 1})
				zonal, hot = []*fault.Store{f}, f
			} else {
				var rs []blob.Store
				for i := range n {
					m, _ := memPair(t)
					f := fault.Wrap(m, fault.Options{Seed: uint64(i + 1)})
					zonal, rs = append(zonal, f), append(rs, nopClose{f})
				}
				hot = newQuorum(t, rs)
			}
			_, coldMem := memPair(t)
			cold := fault.Wrap(coldMem, fault.Options{Seed: 9})
			// MoveTimeout bounds each pack move (a hundred objects surveyed,
			// read and retired: generous, for a busy machine under -race)
			// and sets the hot-delete delay each delete waits (a tenth, at
			// most 200ms).
			const moveTimeout = 4 * time.Second
			// The lease in cold, where it is by default, and long enough
			// that no pass renews it: each takes and gives it up
			// (cost.ManualPassLease).
			s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: perPack, MoveTimeout: moveTimeout, MaxClockSkew: 10 * time.Millisecond, LeaseDuration: time.Hour, LeaseStore: cold})
			count := func() cost.Requests { return requestsOf(zonal, cold) }
			check := func(what string, got, want cost.Requests) {
				t.Helper()
				if !nearRequests(got, want) {
					t.Errorf("%s: counted %+v, the model says %+v", what, got, want)
				}
			}

			before := count()
			for i := range objects {
				mustPut(t, s, fmt.Sprintf("k%04d", i), "value")
			}
			check("a write", per(minus(count(), before), objects), cost.ZonalPut(n))

			// Older than the quorum's in-flight bound, as objects older
			// than After are in any deployment: the pass retires them.
			time.Sleep(quorumInFlight)
			before = count()
			if res := s.CompactOnce(ctxT(t)); res.Moved != objects || s.Stats().Packs != objects/perPack {
				t.Fatalf("pass %+v, stats %+v", res, s.Stats())
			}
			pass := minus(count(), before)
			// The pass's own listings: hot's objects and markers on every
			// replica, and the regional marker prefix (for recovery and for
			// maintenance) and pack log.
			listings := cost.Requests{ZonalWrites: 2 * float64(n), RegionalWrites: 3}
			passes := 1.0
			if n > 1 {
				// A quorum's retirements are confirmed by a pass that comes
				// once writes in flight meanwhile have landed: its requests
				// count with the move's, less its own listings.
				if st := s.Stats(); st.Retired != objects*int64(n) {
					t.Fatalf("the pass retired %d replica copies, want %d", st.Retired, objects*n)
				}
				time.Sleep(moveTimeout + quorumInFlight + 100*time.Millisecond)
				before = count()
				s.CompactOnce(ctxT(t))
				pass = addRequests(pass, minus(count(), before))
				passes++
				if st := s.Stats(); st.Recovered != objects/perPack || st.Retired != objects*int64(n) || st.Unretired != 0 {
					t.Fatalf("the confirming pass: stats %+v", st)
				}
			}
			model := addRequests(scale(cost.PackMoveObject(n), objects), scale(cost.PackMoveBatch(n), objects/perPack), scale(listings, passes),
				scale(cost.ManualPassLease(), passes),
				cost.PackLogInventory(false, true),
				// The new Store's first look at the pack log is a full
				// refresh too, which reads the inventory (none yet).
				cost.PackLogInventory(false, false))
			if n > 1 {
				model = addRequests(model, cost.PackLogInventory(true, false))
			}
			check("a pass moving 1000 objects in 10 packs", per(pass, objects), per(model, objects))
			if pass.RegionalWrites != model.RegionalWrites || pass.RegionalReads != model.RegionalReads {
				t.Errorf("the pass's regional requests: counted %+v, the model says %+v", pass, model)
			}
			t.Logf("a pass over %d replicas moving %d objects in %d packs: %+v", n, objects, objects/perPack, pass)

			// 100 deletes at once, as an application deleting at a steady
			// rate runs them: each writes a grave to hot on condition
			// that hot has nothing (cost.PackedDelete), and they share
			// listings of the pack log (at most one per bury window) and
			// write no tombstone.
			time.Sleep(tiered.BuryWindow(moveTimeout)) // the last listing is too old for them
			before = count()
			lists, tombs := cold.Stats()[fault.OpList].Calls, s.Stats().Tombstones
			var wg sync.WaitGroup
			for i := range 100 {
				wg.Go(func() {
					if err := s.Delete(ctxT(t), fmt.Sprintf("k%04d", i), nil); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			lists = cold.Stats()[fault.OpList].Calls - lists
			tombs = s.Stats().Tombstones - tombs
			deletes := minus(count(), before)
			deletes.RegionalWrites -= float64(lists)
			// A round that meets a write still landing on a third replica
			// reads it again (on a busy machine, often: under make test with
			// go test ./... beside it, 1.19 reads more a delete were seen):
			// on a quorum, three reads of slack.
			got, want := per(deletes, 100), cost.PackedDelete(n)
			slack := 0.5
			if n > 1 {
				slack = 3
			}
			if d := minus(got, want); math.Abs(d.ZonalWrites) > slack || math.Abs(d.ZonalReads) > slack || math.Abs(d.RegionalWrites) > 0.5 || math.Abs(d.RegionalReads) > 0.5 {
				t.Errorf("a delete of a packed object: counted %+v, the model says %+v", got, want)
			}
			if lists < 1 || lists > 3 {
				t.Errorf("100 deletes at once listed the pack log %d times: they share listings", lists)
			}
			if tombs != 0 {
				t.Errorf("100 deletes wrote %d tombstones: a delete writes only its grave", tombs)
			}
			for i := range 100 {
				if _, err := s.Stat(ctxT(t), fmt.Sprintf("k%04d", i)); !errors.Is(err, blob.ErrNotFound) {
					t.Fatalf("a deleted object: %v", err)
				}
			}

			// A pass once the graves are old enough retires them, with a
			// listing of the pack log and one tombstone (cost.GraveRetirement
			// each); the rest of the pass is its listings and the
			// inventory's update.
			time.Sleep(tiered.GraveHold(moveTimeout, 10*time.Millisecond))
			before = count()
			retired := s.Stats().GravesRetired
			if res := s.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Fatalf("retiring pass: %+v", res)
			}
			if r := s.Stats().GravesRetired - retired; r != 100 {
				t.Fatalf("the pass retired %d graves, want 100", r)
			}
			retirement := minus(count(), before)
			model = addRequests(scale(cost.GraveRetirement(n), 100), listings, cost.Requests{RegionalWrites: 2}, cost.PackLogInventory(true, true), cost.ManualPassLease())
			if d := minus(retirement, model); math.Abs(d.RegionalWrites) > 0.5 || math.Abs(d.RegionalReads) > 0.5 || math.Abs(d.ZonalWrites) > 2 || math.Abs(d.ZonalReads) > 0.5*100 {
				t.Errorf("a pass retiring 100 graves: counted %+v, the model says %+v", retirement, model)
			}
			t.Logf("100 deletes at once listed the pack log %d times; retiring their graves: %+v", lists, retirement)

			for i := range 100 {
				mustPut(t, hot, fmt.Sprintf("h%04d", i), "value")
			}
			// The model is a delete of a settled key: a put's write to
			// its third replica may land in the background, and a delete
			// racing it reads that replica twice (on a busy machine, often).
			if q, ok := hot.(quorumHot); ok {
				for i := range 100 {
					waitOnEveryReplica(t, q.Store, fmt.Sprintf("h%04d", i))
				}
			}
			before = count()
			for i := range 100 {
				if err := hot.Delete(ctxT(t), fmt.Sprintf("h%04d", i), nil); err != nil {
					t.Fatal(err)
				}
			}
			// A delete whose third replica misses the round's late grace
			// (a busy machine) is finished by repair: a survey of every
			// replica and a commit more, counted here as they are billed.
			// At load 8 on 2 cores that came to 0.7 reads a delete, so a
			// quorum's deletes get a read of slack.
			del := per(minus(count(), before), 100)
			if want := cost.ZonalDelete(n); n > 1 && del.ZonalReads > want.ZonalReads && del.ZonalReads-want.ZonalReads <= 1 {
				del.ZonalReads = want.ZonalReads
			}
			check("a delete in hot", del, cost.ZonalDelete(n))
		})
	}
}

func scale(r cost.Requests, f float64) cost.Requests {
	return cost.Requests{ZonalWrites: r.ZonalWrites * f, ZonalReads: r.ZonalReads * f, RegionalWrites: r.RegionalWrites * f, RegionalReads: r.RegionalReads * f}
}

func addRequests(rs ...cost.Requests) cost.Requests {
	var out cost.Requests
	for _, r := range rs {
		out = cost.Requests{ZonalWrites: out.ZonalWrites + r.ZonalWrites, ZonalReads: out.ZonalReads + r.ZonalReads,
			RegionalWrites: out.RegionalWrites + r.RegionalWrites, RegionalReads: out.RegionalReads + r.RegionalReads}
	}
	return out
}

// waitOnEveryReplica waits until every replica of q holds key's version.
func waitOnEveryReplica(t *testing.T, q *quorum.Store, key string) {
	t.Helper()
	for i := 0; ; i++ {
		vers := map[string]bool{}
		for _, r := range q.Replicas() {
			a, err := r.Stat(context.Background(), key)
			if err != nil {
				vers[""] = true
				continue
			}
			vers[a.Metadata[quorum.VersionKey]] = true
		}
		if len(vers) == 1 && !vers[""] {
			return
		}
		if i > 2000 {
			t.Fatalf("%s never reached every replica", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
