package cost

import (
	"fmt"
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
}

// Total is the whole monthly bill.
func (c Cost) Total() float64 { return c.Storage + c.Requests + c.Transfer }

// Estimate compares, for one month of w in steady state, keeping every object
// in hot (on w.Replicas buckets) for its whole retention against tiering:
// hot for w.After, then moved to cold by package tiered's compactor.
//
// Requests counted per compacted object: in hot, the two Stats, the marker's
// write (to every copy) and the Stat that follows it, and the read; in cold,
// the write and the verifying Stat. Deletes are free. Each pass lists hot's
// markers and then its objects: one list (priced as a write, Class A on GCS)
// per 1000 objects on every copy, as a quorum lists each of its replicas.
func Estimate(w Workload, hot, cold Price) (allHot, tiered Cost) {
	return allIn(w, hot), tieredCost(w, hot, cold)
}

// allIn prices w with every object written to w.Replicas buckets of class p
// and kept there for its retention.
func allIn(w Workload, p Price) Cost {
	copies, writes := w.copies(), w.WritesPerMonth()
	return Cost{
		Storage:  w.held(w.Retention) * copies * p.StoragePerGiBMonth,
		Requests: writes * copies * p.WritePer1000 / 1000,
		Transfer: writes * p.transferGiB(w.ObjectBytes) * copies * p.UploadPerGiB,
	}
}

// tieredCost prices w written to w.Replicas buckets of hot and moved to one
// of cold after w.After.
func tieredCost(w Workload, hot, cold Price) Cost {
	copies, writes := w.copies(), w.WritesPerMonth()
	written := allIn(w, hot)
	after := min(w.After, w.Retention)
	interval := w.Interval
	if interval == 0 {
		interval = tiered.DefaultInterval(w.After)
	}
	passes := float64(month) / float64(interval)
	// Each pass lists the markers of unfinished moves, then the objects, a
	// page at a time from every copy.
	lists := passes * (1 + math.Max(1, math.Ceil(w.WritesPerSecond*after.Seconds()/1000))) * copies
	return Cost{
		Storage: w.held(after)*copies*hot.StoragePerGiBMonth + w.held(w.Retention-after)*cold.StoragePerGiBMonth,
		Requests: written.Requests +
			writes*(copies*hot.WritePer1000+4*hot.ReadPer1000)/1000 +
			writes*(cold.WritePer1000+cold.ReadPer1000)/1000 +
			lists*hot.WritePer1000/1000,
		Transfer: written.Transfer +
			writes*(hot.transferGiB(w.ObjectBytes)*hot.RetrievalPerGiB+cold.transferGiB(w.ObjectBytes)*cold.UploadPerGiB),
	}
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
	// Tiered writes to ZonalQuorum and moves each object to one regional
	// bucket after Workload.After (Estimate).
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
			LayoutCost{RegionalOnly, p, allIn(one, p.Regional)},
			LayoutCost{OneZonal, p, allIn(one, p.Zonal)},
			LayoutCost{ZonalQuorum, p, allHot},
			LayoutCost{Tiered, p, tier},
		)
	}
	return out
}
