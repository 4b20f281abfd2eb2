package cost_test

import (
	"math"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want)) }

// The arithmetic, redone by hand for 100 writes/s of 64 KiB kept 7 days in a
// 2-of-3 GCS Rapid quorum, compacted after 5 minutes into GCS Standard packs
// of 1000 objects (Class A $0.005, Class B $0.0004 per 1000 in both):
//
//	writes/month     100 * 730 h * 3600 s             = 262,800,000
//	held 7 days      100 * 604,800 s * 64 KiB         = 3691.40625 GiB
//	all hot          storage 3691.40625 * 3 * 0.110   = 1218.1640625
//	                 a write 6 A + 9 B, its delete 6 A + 9 B:
//	                 262.8e6 * (12*0.005 + 18*0.0004)/1e3 = 17660.16
//	tiered hot       100 * 300 s * 64 KiB = 1.8310546875 GiB * 3 * 0.110 = 0.604248046875
//	tiered cold      100 * 604,500 s * 64 KiB = 3689.5751953125 GiB * 0.020 = 73.79150390625
//	users' writes    262.8e6 * (6*0.005 + 9*0.0004)/1e3 = 8830.08
//	users' deletes   a grave written to hot on condition, a consensus
//	                 round as a write is: 8830.08; a listing of the pack
//	                 log shared by the deletes of a bury window (5 s: 500
//	                 at 100/s): 262.8e6/500 * 0.005/1e3 = 2.628
//	per object moved a Stat of the fastest replica 1 B, a survey of the
//	                 replicas 3 B, the read of one replica 1 B, and the
//	                 survey confirming the retirement 3 B (its deletes, like
//	                 the retirement's, are free):
//	                 262.8e6 * 8*0.0004/1e3 = 840.96
//	per grave        the Stat that finds it in hot's listing 3 B, a Stat of
//	                 cold 1 B, a survey of the replicas 3 B (the
//	                 retirement's deletes are free):
//	                 262.8e6 * 7*0.0004/1e3 = 735.84
//	per pack         4 A (the marker twice) + 4 B (the index, the pack's
//	                 Stat, the marker read twice); a pass every 75 s (After/4,
//	                 at most 5m) of 7500 objects: 8 packs; 35,040 passes:
//	                 280,320 packs * (4*0.005 + 4*0.0004)/1e3 = 6.054912
//	per pass         hot: 2 listings * 3 replicas * 30 pages = 180 A (no
//	                 tombstones to Stat: retirements leave none); cold: 2
//	                 marker listings + 61 pages of a log of 60,480 packs and
//	                 a tombstone = 63 A, and for the pass's graves a
//	                 listing of the log, 61 A, and their tombstone, 1 A:
//	                 35,040 * (180 + 63 + 62)*0.005/1e3 = 53.436
func TestEstimateArithmetic(t *testing.T) {
	w := cost.Workload{WritesPerSecond: 100, ObjectBytes: 64 << 10, Retention: 7 * 24 * time.Hour, After: 5 * time.Minute, Replicas: 3}
	allHot, tier := cost.Estimate(w, cost.GCSRapid, cost.GCSStandard)
	lease := 43800*0.005/1e3 + 2*43800*0.0004/1e3 // one process: a renewal and two Stats a minute
	compactor := 840.96 + 735.84 + 6.054912 + 53.436 + lease
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"writes a month", w.WritesPerMonth(), 262.8e6},
		{"stored GiB", w.StoredGiB(), 3691.40625},
		{"all-hot storage", allHot.Storage, 1218.1640625},
		{"all-hot requests", allHot.Requests, 17660.16},
		{"all-hot transfer", allHot.Transfer, 0},
		{"tiered storage", tier.Storage, 0.604248046875 + 73.79150390625},
		{"tiered requests", tier.Requests, 8830.08 + 8830.08 + 2.628 + compactor},
		{"tiered compactor", tier.Compactor, compactor},
		{"tiered transfer", tier.Transfer, 0},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %.6f, want %.6f", c.what, c.got, c.want)
		}
	}
	// An explicit interval of 5 minutes: 8760 passes, each with 30 packs.
	w.Interval = 5 * time.Minute
	want := 8830.08 + 8830.08 + 2.628 + 840.96 + 735.84 + 8760*30*(4*0.005+4*0.0004)/1e3 + 8760*(180+63+62)*0.005/1e3 + lease
	if _, slow := cost.Estimate(w, cost.GCSRapid, cost.GCSStandard); !near(slow.Requests, want) {
		t.Errorf("tiered requests with a pass every 5m = %.6f, want %.6f", slow.Requests, want)
	}
}

// Deletes share tombstones (one a regional write, 20 ms) with the deletes in
// flight at once, and deletes of packed objects listings of the pack log
// (one a bury window, 5 s): one each when they are too rare to meet.
func TestDeleteShares(t *testing.T) {
	for _, c := range []struct {
		perSecond            float64
		tombstones, listings float64
	}{
		{0.1, 1, 1},
		{5, 1, 0.04},
		{50, 1, 0.004},
		{200, 0.25, 0.001},
		{1000, 0.05, 0.0002},
	} {
		if got := cost.DeleteTombstones(c.perSecond); !near(got, c.tombstones) {
			t.Errorf("%g deletes/s: %g tombstones a delete, want %g", c.perSecond, got, c.tombstones)
		}
		if got := cost.DeleteListings(c.perSecond); !near(got, c.listings) {
			t.Errorf("%g deletes/s: %g listings a delete, want %g", c.perSecond, got, c.listings)
		}
	}
}

// S3 Express charges per byte uploaded and retrieved on every byte of every
// request, as the FAQ's example prices 10 KB requests: 1 MiB objects at 1
// GiB/s are charged for all of their bytes, and so are 10 KiB ones.
func TestEstimateTransferCharges(t *testing.T) {
	w := cost.Workload{WritesPerSecond: 1024, ObjectBytes: 1 << 20, Retention: 24 * time.Hour, After: time.Minute, Replicas: 1}
	allHot, tier := cost.Estimate(w, cost.S3ExpressOneZone, cost.S3Standard)
	const gibPerMonth = 730 * 3600 // 1 GiB/s
	if want := gibPerMonth * 0.0032; math.Abs(allHot.Transfer-want) > 1e-6 {
		t.Errorf("all-hot transfer %.4f, want %.4f", allHot.Transfer, want)
	}
	if want := gibPerMonth * (0.0032 + 0.0006); math.Abs(tier.Transfer-want) > 1e-6 {
		t.Errorf("tiered transfer %.4f, want %.4f (upload, plus the compactor's read)", tier.Transfer, want)
	}
	// The FAQ's example: 1,000,000 PUTs of 10 KB cost $0.03 of upload.
	w = cost.Workload{WritesPerSecond: 1e6 / (730 * 3600), ObjectBytes: 10 << 10, Retention: 24 * time.Hour, After: time.Minute, Replicas: 1}
	if allHot, _ := cost.Estimate(w, cost.S3ExpressOneZone, cost.S3Standard); math.Abs(allHot.Transfer-10.0/1048576*1e6*0.0032) > 1e-9 {
		t.Errorf("1,000,000 writes of 10 KiB: transfer %v, want the FAQ's %v", allHot.Transfer, 10.0/1048576*1e6*0.0032)
	}
}

func TestLayouts(t *testing.T) {
	month := float64(cost.HoursPerMonth * 3600)
	w := cost.Workload{WritesPerSecond: 1, ObjectBytes: 1 << 30, Retention: cost.HoursPerMonth * time.Hour, After: time.Hour, Replicas: 3}
	est := cost.Layouts(w)
	if len(est) != 4*len(cost.Pairs()) {
		t.Fatalf("%d estimates", len(est))
	}
	writes := month
	byLayout := map[cost.Layout]cost.LayoutCost{}
	for i, e := range est {
		if e.Layout != cost.Layout(i%4) {
			t.Errorf("estimate %d is layout %d, want the order of the constants", i, e.Layout)
		}
		if e.Zonal.Cloud == "S3" {
			byLayout[e.Layout] = e
		}
	}
	// One GiB a second for a month is writes GiB stored.
	if e := byLayout[cost.RegionalOnly]; !near(e.Storage, writes*0.023) || !near(e.Total()-e.Storage, writes*0.005/1000) {
		t.Errorf("regional only: %+v", e.Cost)
	}
	// S3 Express charges per GiB uploaded, on every byte.
	upload := 0.00113/1000 + 0.0032
	if e := byLayout[cost.OneZonal]; !near(e.Storage, writes*0.11) || !near(e.Requests+e.Transfer, writes*upload) {
		t.Errorf("one zonal bucket: %+v, want requests and transfer %v", e.Cost, writes*upload)
	}
	// A quorum stores three copies and pays a consensus round (2 writes and
	// 3 reads per replica) for each write and for each delete.
	quorumReq := writes * (12*0.00113 + 18*0.00003) / 1000
	if e := byLayout[cost.ZonalQuorum]; !near(e.Storage, 3*byLayout[cost.OneZonal].Storage) || !near(e.Requests, quorumReq) ||
		!near(e.Transfer, 3*byLayout[cost.OneZonal].Transfer) {
		t.Errorf("quorum: %+v, want requests %v", e.Cost, quorumReq)
	}
	// Tiered: an hour's writes on three zonal replicas, the rest regional.
	tiered := byLayout[cost.Tiered]
	hot := writes / cost.HoursPerMonth
	if want := 3*hot*0.11 + (writes-hot)*0.023; !near(tiered.Storage, want) {
		t.Errorf("tiered storage %v, want %v", tiered.Storage, want)
	}
	if tiered.Storage >= byLayout[cost.ZonalQuorum].Storage {
		t.Errorf("tiering does not save storage: %+v", tiered.Cost)
	}
	if _, want := cost.Estimate(w, cost.S3ExpressOneZone, cost.S3Standard); tiered.Cost != want {
		t.Errorf("tiered layout %+v, Estimate %+v", tiered.Cost, want)
	}
}

func TestWorkloadValidate(t *testing.T) {
	if err := cost.DefaultWorkload().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*cost.Workload){
		"rate":      func(w *cost.Workload) { w.WritesPerSecond = 0 },
		"size":      func(w *cost.Workload) { w.ObjectBytes = 0 },
		"retention": func(w *cost.Workload) { w.Retention = 0 },
		"hot":       func(w *cost.Workload) { w.After = 2 * w.Retention },
		"no hot":    func(w *cost.Workload) { w.After = 0 },
		"interval":  func(w *cost.Workload) { w.Interval = -time.Second },
		"replicas":  func(w *cost.Workload) { w.Replicas = 0 },
	} {
		w := cost.DefaultWorkload()
		mutate(&w)
		if w.Validate() == nil {
			t.Errorf("%s: invalid workload accepted", name)
		}
	}
}

// TestCostTable prints the comparison the READMEs quote.
func TestCostTable(t *testing.T) {
	for _, pair := range cost.Pairs() {
		for _, p := range []cost.Price{pair.Zonal, pair.Regional} {
			t.Logf("%-30s $%.4f/GiB-month  write $%.5f/1k  read $%.5f/1k  upload $%.4f/GiB  retrieval $%.4f/GiB  (%s, %s; %s)",
				p.Name(), p.StoragePerGiBMonth, p.WritePer1000, p.ReadPer1000, p.UploadPerGiB, p.RetrievalPerGiB, p.Source, p.Region, p.AsOf)
		}
	}
	big := cost.Workload{WritesPerSecond: 1000, ObjectBytes: 1 << 20, Retention: 30 * 24 * time.Hour, After: 5 * time.Minute, Replicas: 3}
	small := cost.Workload{WritesPerSecond: 100, ObjectBytes: 64 << 10, Retention: 7 * 24 * time.Hour, After: 5 * time.Minute, Replicas: 3}
	for _, c := range []struct {
		name      string
		w         cost.Workload
		hot, cold cost.Price
	}{
		{"1k writes/s of 1 MiB, 30 days, 3 zonal copies", big, cost.GCSRapid, cost.GCSStandard},
		{"1k writes/s of 1 MiB, 30 days, 3 zonal copies", big, cost.S3ExpressOneZone, cost.S3Standard},
		{"1k writes/s of 1 MiB, 30 days, 3 zonal copies", big, cost.AzurePremium, cost.AzureHot},
		{"100 writes/s of 64 KiB, 7 days, 3 zonal copies", small, cost.GCSRapid, cost.GCSStandard},
	} {
		allHot, tier := cost.Estimate(c.w, c.hot, c.cold)
		if allHot.Total() <= 0 || tier.Total() <= 0 {
			t.Fatalf("%s: empty estimate", c.name)
		}
		t.Logf("%s, %s -> %s after %v: all hot $%.0f/month (storage %.0f, requests %.0f, transfer %.0f); tiered $%.0f/month (storage %.0f, requests %.0f, transfer %.0f): %.1fx",
			c.name, c.hot.Name(), c.cold.Name(), c.w.After, allHot.Total(), allHot.Storage, allHot.Requests, allHot.Transfer,
			tier.Total(), tier.Storage, tier.Requests, tier.Transfer, allHot.Total()/tier.Total())
	}
}

// TestTieringBySize prices the default workload (200 writes/s, 30 days, 15
// minutes hot, 3 zones) at object sizes from 1 KiB to 1 MiB on each cloud,
// tiered into packs against the untiered quorum. A pack move retires its
// objects from the quorum with free deletes; the application's delete of a
// packed object is a grave written to hot (a consensus round, as the
// untiered quorum's delete is), retired later with free deletes. So
// requests cost about the same either way, tiering saves storage: it is
// cheaper from 16 KiB on S3 and Azure and from 64 KiB on GCS, at most 0.6x
// from 256 KiB and 0.3x at 1 MiB, and where requests dominate (1-4 KiB) at
// most a tenth dearer; the compactor is at most a tenth of the tiered bill.
func TestTieringBySize(t *testing.T) {
	for _, p := range cost.Pairs() {
		for _, size := range []int64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
			w := cost.DefaultWorkload()
			w.ObjectBytes = size
			allHot, tier := cost.Estimate(w, p.Zonal, p.Regional)
			ratio := tier.Total() / allHot.Total()
			t.Logf("%-5s %7d B: quorum $%.0f, tiered $%.0f (%.2fx), compactor %.0f%% of tiered",
				p.Zonal.Cloud, size, allHot.Total(), tier.Total(), ratio, 100*tier.Compactor/tier.Total())
			want := map[int64]float64{1 << 10: 1.1, 4 << 10: 1.1, 16 << 10: 1, 64 << 10: 1, 256 << 10: 0.6, 1 << 20: 0.3}[size]
			if size == 16<<10 && p.Zonal.Cloud == "GCS" {
				want = 1.1
			}
			if ratio >= want {
				t.Errorf("%s, %d B objects: tiering costs %.2fx, want below %.1fx", p.Zonal.Cloud, size, ratio, want)
			}
			if tier.Compactor <= 0 || tier.Compactor > tier.Total()/10 {
				t.Errorf("%s, %d B objects: compactor $%.0f of $%.0f, want at most a tenth", p.Zonal.Cloud, size, tier.Compactor, tier.Total())
			}
		}
	}
}

// The compactor lease at tiered's defaults (a 3-minute lease, acted on
// every minute) costs a month 43,800 regional writes by the holder and a
// Stat by each process and the holder's read-back each minute: cents on
// every cloud, whatever the number of processes within reason.
func TestShardedCompactorLease(t *testing.T) {
	one := cost.CompactorLease(3, 0)
	if r := cost.ShardedCompactorLease(3, 1, 0); r != one {
		t.Fatalf("one shard: %+v, want the lease's %+v", r, one)
	}
	// Four leases, and three renewals a round that read shard 0's lease.
	r := cost.ShardedCompactorLease(3, 4, 0)
	rounds := one.RegionalWrites
	if !near(r.RegionalWrites, 4*rounds) || !near(r.RegionalReads, 4*one.RegionalReads+3*rounds) {
		t.Fatalf("four shards: %+v; one lease %+v", r, one)
	}
}

func TestCompactorLease(t *testing.T) {
	r := cost.CompactorLease(3, 0)
	if !near(r.RegionalWrites, 43800) || !near(r.RegionalReads, 4*43800) || r.ZonalWrites != 0 || r.ZonalReads != 0 {
		t.Fatalf("lease requests a month with 3 processes: %+v", r)
	}
	if one := cost.CompactorLease(1, 0); !near(one.RegionalReads, 2*43800) {
		t.Fatalf("lease reads a month with 1 process: %+v", one)
	}
	for _, p := range cost.Pairs() {
		usd := (r.RegionalWrites*p.Regional.WritePer1000 + r.RegionalReads*p.Regional.ReadPer1000) / 1000
		t.Logf("%s: the lease of 3 processes costs $%.3f a month", p.Regional.Cloud, usd)
		if usd > 1 {
			t.Errorf("%s: the lease costs $%.2f a month", p.Regional.Cloud, usd)
		}
	}
	w := cost.DefaultWorkload()
	w.Processes = -1
	if err := w.Validate(); err == nil {
		t.Error("a negative number of processes was accepted")
	}
}

func TestIdleLog(t *testing.T) {
	r := cost.IdleLog(3, 0)
	if !near(r.ZonalWrites, 6*43800) || r.ZonalReads != 0 || r.RegionalWrites != 0 || r.RegionalReads != 0 {
		t.Fatalf("an idle log's requests a month over 3 zones: %+v", r)
	}
	if r10 := cost.IdleLog(3, 10*time.Minute); !near(r10.ZonalWrites, r.ZonalWrites/10) {
		t.Fatalf("a 10-minute repair interval: %+v", r10)
	}
	for _, p := range cost.Pairs() {
		t.Logf("%s: an idle log on 3 zones costs $%.2f a month in requests (repair every minute), $%.3f every 10 minutes",
			p.Zonal.Name(), r.ZonalWrites*p.Zonal.WritePer1000/1000, r.ZonalWrites*p.Zonal.WritePer1000/10000)
	}
}
