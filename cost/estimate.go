package cost

import (
	"fmt"
	"github.com/zonalblob/zonalblob/commitlog"
	"math"
	"time"

	"github.com/zonalblob/zonalblob/tiered"
)

// HoursPerMonth is the month all three clouds bill storage over.
const HoursPerMonth = 730

// month is HoursPerMonth as a duration.
const month = HoursPerMonth * time.Hour

// Workload is a steady write load: objects written at a fixed rate, kept for
// Retention, then deleted by the application.
type Workload struct {
	WritesPerSecond float64
	ObjectBytes     int64
	// Retention is how long an object lives before the application deletes it.
	Retention time.Duration
	// After is the hot window of a tiered store: the age at which its
	// compactor moves an object from the zonal tier to the regional one
	// (tiered.Options.After).
	After time.Duration
	// Interval is the time between the compactor's passes (zero:
	// tiered.DefaultInterval(After), as a tiered Store does).
	Interval time.Duration
	// Replicas is how many zonal buckets hold each hot object: a quorum's N,
	// 1 for a single bucket (zero counts as 1).
	Replicas int
	// PackObjects and PackBytes bound a pack (tiered.Options.PackMaxObjects
	// and PackMaxBytes; zero: tiered's defaults).
	PackObjects int
	PackBytes   int64
	// Processes is how many processes open the tiered store, each with its
	// compactor on (zero counts as 1): one holds the compactor lease and
	// compacts, the others check the lease (see CompactorLease).
	Processes int
}

// packObjects is how many objects one pack holds.
func (w Workload) packObjects() int64 {
	objs, size := int64(w.PackObjects), w.PackBytes
	if objs <= 0 {
		objs = tiered.DefaultPackMaxObjects
	}
	if size <= 0 {
		size = tiered.DefaultPackMaxBytes
	}
	return max(1, min(objs, size/max(w.ObjectBytes, 1)))
}

// DefaultWorkload is a commit log: 200 writes a second of 64 KiB, kept 30
// days, compacted after 15 minutes, three zones.
func DefaultWorkload() Workload {
	return Workload{WritesPerSecond: 200, ObjectBytes: 64 << 10, Retention: 30 * 24 * time.Hour, After: 15 * time.Minute, Replicas: 3}
}

// Validate reports a workload that cannot be priced.
func (w Workload) Validate() error {
	switch {
	case w.WritesPerSecond <= 0:
		return fmt.Errorf("writes per second %g: must be positive", w.WritesPerSecond)
	case w.ObjectBytes <= 0:
		return fmt.Errorf("object size %d: must be positive", w.ObjectBytes)
	case w.Retention <= 0:
		return fmt.Errorf("retention %v: must be positive", w.Retention)
	case w.After <= 0 || w.After > w.Retention:
		return fmt.Errorf("hot window %v: must be positive and at most the retention %v", w.After, w.Retention)
	case w.Interval < 0:
		return fmt.Errorf("interval %v: must not be negative", w.Interval)
	case w.Replicas < 1:
		return fmt.Errorf("replicas %d: must be at least 1", w.Replicas)
	case w.Processes < 0:
		return fmt.Errorf("processes %d: must not be negative", w.Processes)
	case w.PackObjects < 0 || w.PackBytes < 0:
		return fmt.Errorf("pack bounds %d objects, %d bytes: must not be negative", w.PackObjects, w.PackBytes)
	}
	return nil
}

// WritesPerMonth is how many objects w writes in a billing month.
func (w Workload) WritesPerMonth() float64 { return w.WritesPerSecond * HoursPerMonth * 3600 }

// StoredGiB is how much of w one copy holds in steady state.
func (w Workload) StoredGiB() float64 { return w.held(w.Retention) }

// held is the GiB, in steady state, of the objects younger than d.
func (w Workload) held(d time.Duration) float64 {
	return w.WritesPerSecond * d.Seconds() * float64(w.ObjectBytes) / (1 << 30)
}

func (w Workload) copies() float64 { return float64(max(w.Replicas, 1)) }

// Cost is a monthly bill, split by what is charged.
type Cost struct {
	Storage, Requests, Transfer float64
	// Compactor is the part of Requests and Transfer that a tiered store's
	// compactor and its pack log cost (zero for other layouts); the
	// application's own writes and deletes are not part of it.
	Compactor float64
}

// Total is the whole monthly bill.
func (c Cost) Total() float64 { return c.Storage + c.Requests + c.Transfer }

// Requests counts requests by the class they are billed in: writes (PUT,
// LIST, GCS Class A) and reads (GET, HEAD, GCS Class B), on the zonal
// buckets (summed over replicas) and on the regional one.
type Requests struct {
	ZonalWrites, ZonalReads, RegionalWrites, RegionalReads float64
}

func (r Requests) plus(o Requests) Requests {
	return Requests{r.ZonalWrites + o.ZonalWrites, r.ZonalReads + o.ZonalReads, r.RegionalWrites + o.RegionalWrites, r.RegionalReads + o.RegionalReads}
}

func (r Requests) times(f float64) Requests {
	return Requests{r.ZonalWrites * f, r.ZonalReads * f, r.RegionalWrites * f, r.RegionalReads * f}
}

func (r Requests) price(zonal, regional Price) float64 {
	return (r.ZonalWrites*zonal.WritePer1000 + r.ZonalReads*zonal.ReadPer1000 +
		r.RegionalWrites*regional.WritePer1000 + r.RegionalReads*regional.ReadPer1000) / 1000
}

// What each operation issues, on n zonal replicas: one bucket when n is 1,
// else a 2-of-n quorum (package quorum). These are counted, not assumed:
// package tiered's TestCostCounts runs each operation over fault-wrapped
// stores and checks the counts below against the wrappers' counters.
//
// A quorum write or delete is a CASPaxos round: on every replica, a read of
// the state and value and a promise (a write), a read of the state left, and
// the accept (a write); a delete writes a tombstone. A quorum Stat asks every
// replica; a read asks the fastest for the value and every one for state.

// ZonalPut is one unconditional write.
func ZonalPut(n int) Requests {
	if n <= 1 {
		return Requests{ZonalWrites: 1}
	}
	return Requests{ZonalWrites: 2 * float64(n), ZonalReads: 3 * float64(n)}
}

// ZonalDelete is one delete: free on a bucket, a tombstone round on a quorum.
func ZonalDelete(n int) Requests {
	if n <= 1 {
		return Requests{}
	}
	return Requests{ZonalWrites: 2 * float64(n), ZonalReads: 3 * float64(n)}
}

// ZonalStat is one Stat, ZonalRead one read of an object.
func ZonalStat(n int) Requests { return Requests{ZonalReads: float64(max(n, 1))} }

func ZonalRead(n int) Requests {
	if n <= 1 {
		return Requests{ZonalReads: 1}
	}
	return Requests{ZonalReads: 1 + float64(n)}
}

// PackMoveObject is what the compactor issues for each object it moves into
// a pack. On one bucket: two Stats (one before its marker, where the
// listing gives no generation, as mem listings do not; one after), a read
// and a conditional delete (free). On a quorum: a Stat of the fastest
// replica before its marker, a survey of every replica after it (the Stats
// a retirement needs), the value read from one replica, the retirement (a
// conditional delete of each replica's copy, free: no consensus round, so
// no write), and at a later pass a second retirement that confirms no copy
// is left (a survey, and deletes only if some were).
func PackMoveObject(n int) Requests {
	if n <= 1 {
		return ZonalStat(n).times(2).plus(ZonalRead(n)).plus(ZonalDelete(n))
	}
	return ZonalStat(n).times(2).plus(Requests{ZonalReads: 2})
}

// PackMoveBatch is what it issues once per pack: the marker's write (and
// its delete, free), the pack log's listing, the pack's write, its verifying
// Stat and the read of its index; on a quorum, the marker is written again
// (marked packed) before the objects are retired, and lives until a later
// pass confirms the retirement: that pass's recovery reads it, and so does
// the maintenance of the pass that wrote it (markers pin what they name).
func PackMoveBatch(n int) Requests {
	r := Requests{RegionalWrites: 3, RegionalReads: 2}
	if n > 1 {
		r.RegionalWrites++
		r.RegionalReads += 2
	}
	return r
}

// PackLogInventory is what a packing pass issues for the pack log's
// inventory (the record that tells a log object lost from one the compactor
// removed): a Stat, and a read if there is one; a write if the log changed.
func PackLogInventory(exists, changed bool) Requests {
	r := Requests{RegionalReads: 1}
	if exists {
		r.RegionalReads++
	}
	if changed {
		r.RegionalWrites++
	}
	return r
}

// CompactorLease is what the compactor lease of a tiered store costs in a
// month, with processes opening the store and a lease of the given
// duration (zero: tiered's default, three of its default clock skews):
// each process acts every third of the lease, the holder renewing it (a
// Stat, the conditional write, a Stat to read its generation back) and
// every other process reading it (a Stat).
func CompactorLease(processes int, lease time.Duration) Requests {
	return ShardedCompactorLease(processes, 1, lease)
}

// ShardedCompactorLease is CompactorLease for a store whose keys are split
// into shards (tiered.Options.Shards), each with a lease of its own: every
// lease costs what the one lease does, and the holder of each shard but
// the first reads the first shard's lease after each renewal, as it names
// the number of shards in force.
func ShardedCompactorLease(processes, shards int, lease time.Duration) Requests {
	if lease <= 0 {
		lease = 3 * tiered.DefaultMaxClockSkew
	}
	shards = max(shards, 1)
	rounds := float64(month) / float64(lease/3)
	perLease := float64(2 + max(processes, 1) - 1)
	return Requests{RegionalReads: rounds * (float64(shards)*perLease + float64(shards-1)), RegionalWrites: rounds * float64(shards)}
}

// IdleLog is what a commit log that nobody appends to issues in a month:
// its writer's repair passes, every interval (zero: the log's default), each
// listing each of its zones twice (its segments, and the epoch claims above
// the writer's). Lists are billed as writes (Class A on GCS).
func IdleLog(zones int, interval time.Duration) Requests {
	if interval <= 0 {
		interval = commitlog.DefaultRepairInterval
	}
	return Requests{ZonalWrites: float64(month) / float64(interval) * 2 * float64(max(zones, 1))}
}

// ManualPassLease is what a pass of a manual Store (CompactOnce) issues for
// the compactor lease when it is shorter than a third of the lease: taking
// it (a Stat, the conditional write, a Stat to read its generation back)
// and giving it up after (the write and its Stat). A background compactor
// holds the lease across passes instead (CompactorLease).
func ManualPassLease() Requests {
	return Requests{RegionalWrites: 2, RegionalReads: 3}
}

// PackedDelete is what a user's Delete of an object that lives in a pack
// issues of its own: a grave, written to hot on condition that hot has
// nothing (on a quorum, a consensus round like a write). Its share of the
// regional requests is a listing of the pack log, which the deletes within
// tiered.BuryWindow of one another share (see DeleteListings); the
// tombstone and the grave's removal come later, from the compactor (see
// GraveRetirement).
func PackedDelete(n int) Requests {
	return ZonalPut(n)
}

// GraveRetirement is what the compactor issues for each grave it retires:
// the Stat that tells it from an empty object in hot's listing, a Stat of
// cold (for the object a move of a large version may have left there), and
// the grave's removal: a conditional delete on a bucket, and on a quorum a
// retirement (a Stat of every replica, then each copy's conditional
// delete), deletes being free. The tombstone that kills the packed
// versions is one per pass, shared by all of its graves.
func GraveRetirement(n int) Requests {
	r := ZonalStat(n).plus(Requests{RegionalReads: 1})
	if n > 1 {
		r = r.plus(ZonalStat(n))
	}
	return r
}

// DeleteListings is the listings of the pack log per delete, for deletes
// of packed objects at perSecond: one listing serves every delete that
// begins within tiered.BuryWindow after it.
func DeleteListings(perSecond float64) float64 {
	return min(1, 1/(perSecond*tiered.BuryWindow(0).Seconds()))
}

// RegionalWriteLatency is how long a tombstone's write to the regional
// bucket is taken to be in flight, for DeleteTombstones: a regional write's
// median, taken at the low end of what is published (a GCS regional create
// p50 39.5 ms, an S3 Standard PUT about 40 ms, an Azure Hot write 25 ms:
// the emulators' profiles cite them; the tiered benchmarks' cold profile
// has p50 20 ms). A shorter write gathers fewer deletes, so the estimate
// errs towards more tombstones.
const RegionalWriteLatency = 20 * time.Millisecond

// DeleteTombstones is the tombstones written per delete, for deletes of
// packed objects at perSecond through one Store: it writes one tombstone at
// a time, and the deletes that arrive while one is in flight share the
// next, so at a steady rate each tombstone carries the deletes of one
// regional write's latency (and at rates too low for two to meet, one
// each).
func DeleteTombstones(perSecond float64) float64 {
	return min(1, 1/(perSecond*RegionalWriteLatency.Seconds()))
}

// Requests counted for tiering: the application's writes (ZonalPut) and
// deletes (PackedDelete, with its share of listings, DeleteListings: at the
// end of retention the object is in a pack);
// the compactor's retirement of their graves (GraveRetirement, and a
// tombstone per pass);
// the compactor's, per object moved, PackMoveObject; per pack,
// PackMoveBatch; per pass, the listings of hot (objects and markers, a page
// per 1000 objects on every replica; a quorum's listing also Stats the
// tombstones it keeps, but retirements leave none, and the application's
// deletes find its objects packed) and of the regional store
// (the marker prefix twice, for recovery and maintenance, and the whole pack
// log for maintenance).
func Estimate(w Workload, hot, cold Price) (allHot, tiered Cost) {
	return allIn(w, hot, true), tieredCost(w, hot, cold)
}

// allIn prices w with every object written to w.Replicas buckets of class p
// and kept there for its retention, then deleted.
func allIn(w Workload, p Price, zonal bool) Cost {
	copies, writes := w.copies(), w.WritesPerMonth()
	per := ZonalPut(w.Replicas).plus(ZonalDelete(w.Replicas))
	var req float64
	if zonal {
		req = per.price(p, p)
	} else {
		req = Requests{RegionalWrites: 1}.price(p, p)
	}
	return Cost{
		Storage:  w.held(w.Retention) * copies * p.StoragePerGiBMonth,
		Requests: writes * req,
		Transfer: writes * p.transferGiB(w.ObjectBytes) * copies * p.UploadPerGiB,
	}
}

// TombstoneGrace is how long a quorum keeps a delete's tombstones
// (quorum.Options.TombstoneGrace's default): its listings Stat them.
const TombstoneGrace = 10 * time.Minute

// tieredCost prices w written to w.Replicas buckets of hot and moved in
// packs to one of cold after w.After.
func tieredCost(w Workload, hot, cold Price) Cost {
	n, copies, writes := w.Replicas, w.copies(), w.WritesPerMonth()
	after := min(w.After, w.Retention)
	interval := w.Interval
	if interval == 0 {
		interval = tiered.DefaultInterval(w.After)
	}
	passes := float64(month) / float64(interval)
	perPack := float64(w.packObjects())
	packsPerPass := math.Ceil(w.WritesPerSecond * interval.Seconds() / perPack)
	// Packs live about as long as their objects; tombstones, each shared
	// by the deletes of a regional write, until their packs are rewritten
	// away.
	logObjects := w.WritesPerSecond*w.Retention.Seconds()/perPack + 1
	hotObjects := w.WritesPerSecond * after.Seconds()
	perPass := Requests{
		ZonalWrites:    2 * copies * math.Max(1, math.Ceil(hotObjects/1000)),
		RegionalWrites: 2 + math.Max(1, math.Ceil(logObjects/1000)),
	}
	// Each pass also retires the graves of the application's deletes, with
	// one tombstone, after a listing of the pack log of its own.
	compactor := PackMoveObject(n).times(writes).
		plus(PackMoveBatch(n).times(passes * packsPerPass)).
		plus(perPass.times(passes)).
		plus(GraveRetirement(n).times(writes)).
		plus(Requests{RegionalWrites: 1 + math.Max(1, math.Ceil(logObjects/1000))}.times(passes)).
		plus(CompactorLease(w.Processes, 0))
	// The application's requests: its writes, and its deletes at the end
	// of retention, which find each object in a pack and share tombstones
	// and listings of the pack log with the deletes in flight with them.
	users := ZonalPut(n).times(writes).plus(PackedDelete(n).times(writes)).
		plus(Requests{RegionalWrites: DeleteListings(w.WritesPerSecond)}.times(writes))
	// The compactor reads every object from hot once: retrieval is charged
	// on it; packs are written regionally, where bytes are not charged.
	moveTransfer := writes * (hot.transferGiB(w.ObjectBytes)*hot.RetrievalPerGiB + cold.transferGiB(w.ObjectBytes)*cold.UploadPerGiB)
	written := allIn(w, hot, true)
	c := Cost{
		Storage:  w.held(after)*copies*hot.StoragePerGiBMonth + w.held(w.Retention-after)*cold.StoragePerGiBMonth,
		Requests: users.price(hot, cold) + compactor.price(hot, cold),
		Transfer: written.Transfer + moveTransfer,
	}
	c.Compactor = compactor.price(hot, cold) + moveTransfer
	return c
}

// Layout is a way of storing a workload on one cloud.
type Layout int

const (
	// RegionalOnly keeps every object in one regional bucket: what a user
	// has without zonal buckets.
	RegionalOnly Layout = iota
	// OneZonal keeps every object in one zonal bucket.
	OneZonal
	// ZonalQuorum keeps every object on Workload.Replicas zonal buckets.
	ZonalQuorum
	// Tiered writes to ZonalQuorum and moves objects in packs to one
	// regional bucket after Workload.After (Estimate).
	Tiered
)

// LayoutCost is the monthly cost of a workload in one layout on one cloud.
type LayoutCost struct {
	Layout Layout
	Pair   // the cloud's classes
	Cost
}

// Layouts prices w in every layout on each cloud of Pairs, in the order of
// the Layout constants.
func Layouts(w Workload) []LayoutCost {
	one := w
	one.Replicas = 1
	var out []LayoutCost
	for _, p := range Pairs() {
		allHot, tier := Estimate(w, p.Zonal, p.Regional)
		out = append(out,
			LayoutCost{RegionalOnly, p, allIn(one, p.Regional, false)},
			LayoutCost{OneZonal, p, allIn(one, p.Zonal, true)},
			LayoutCost{ZonalQuorum, p, allHot},
			LayoutCost{Tiered, p, tier},
		)
	}
	return out
}
