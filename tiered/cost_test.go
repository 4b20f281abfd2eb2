package tiered_test

import (
	"math"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/tiered"
)

// The arithmetic, redone by hand for 100 writes/s of 64 KiB kept 7 days in a
// 3-copy GCS Rapid quorum, compacted after 5 minutes to GCS Standard:
//
//	writes/month     100 * 730 h * 3600 s           = 262,800,000
//	held 7 days      100 * 604,800 s * 64 KiB       = 3691.40625 GiB
//	all hot          storage 3691.40625 * 3 * 0.110 = 1218.1640625
//	                 writes  262.8e6 * 3 * 0.005/1e3 = 3942
//	tiered hot       100 * 300 s * 64 KiB = 1.8310546875 GiB * 3 * 0.110 = 0.604248046875
//	tiered cold      100 * 604,500 s * 64 KiB = 3689.5751953125 GiB * 0.020 = 73.79150390625
//	move requests    262.8e6 * (3*0.005 + 4*0.0004)/1e3 = 4362.48 in hot
//	                 262.8e6 * (0.005 + 0.0004)/1e3     = 1419.12 in cold
//	lists            a pass a minute (After/4, at most 1m), each 1 page of
//	                 markers + 30 of objects: (730 h / 60 s) * 31 * 0.005/1e3 = 6.789
func TestEstimateArithmetic(t *testing.T) {
	w := tiered.Workload{WritesPerSecond: 100, ObjectBytes: 64 << 10, Retention: 7 * 24 * time.Hour, After: 5 * time.Minute, HotCopies: 3}
	allHot, tier := tiered.Estimate(w, tiered.GCSRapid, tiered.GCSStandard)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"all-hot storage", allHot.Storage, 1218.1640625},
		{"all-hot requests", allHot.Requests, 3942},
		{"all-hot transfer", allHot.Transfer, 0},
		{"tiered storage", tier.Storage, 0.604248046875 + 73.79150390625},
		{"tiered requests", tier.Requests, 3942 + 4362.48 + 1419.12 + 6.789},
		{"tiered transfer", tier.Transfer, 0},
	} {
		if math.Abs(c.got-c.want) > 1e-6*math.Max(1, c.want) {
			t.Errorf("%s = %.6f, want %.6f", c.what, c.got, c.want)
		}
	}
	// Small objects kept a week: each move costs more in requests than it
	// saves in storage, and the estimate must say so.
	if tier.Total() <= allHot.Total() {
		t.Errorf("tiering 64 KiB objects kept 7 days costs %.2f, all hot %.2f: want tiering dearer", tier.Total(), allHot.Total())
	}
}

// S3 Express charges per byte uploaded and retrieved above 512 KB of each
// request: 1 MiB objects at 1 GiB/s are charged for half their bytes.
func TestEstimateTransferCharges(t *testing.T) {
	w := tiered.Workload{WritesPerSecond: 1024, ObjectBytes: 1 << 20, Retention: 24 * time.Hour, After: time.Minute, HotCopies: 1}
	allHot, tier := tiered.Estimate(w, tiered.S3ExpressOneZone, tiered.S3Standard)
	const gibPerMonth = 730 * 3600 / 2 // 1 GiB/s, half of it above 512 KiB
	if want := gibPerMonth * 0.0032; math.Abs(allHot.Transfer-want) > 1e-6 {
		t.Errorf("all-hot transfer %.4f, want %.4f", allHot.Transfer, want)
	}
	if want := gibPerMonth * (0.0032 + 0.0006); math.Abs(tier.Transfer-want) > 1e-6 {
		t.Errorf("tiered transfer %.4f, want %.4f (upload, plus the compactor's read)", tier.Transfer, want)
	}
}

// TestCostTable prints the comparison the README quotes.
func TestCostTable(t *testing.T) {
	for _, p := range []tiered.Price{tiered.GCSRapid, tiered.GCSStandard, tiered.S3ExpressOneZone, tiered.S3Standard, tiered.AzurePremium, tiered.AzureHot} {
		t.Logf("%-26s $%.4f/GiB-month  write $%.5f/1k  read $%.5f/1k  upload $%.4f/GiB  retrieval $%.4f/GiB  (%s; %s)",
			p.Name, p.StoragePerGiBMonth, p.WritePer1000, p.ReadPer1000, p.UploadPerGiB, p.RetrievalPerGiB, p.Source, p.AsOf)
	}
	for _, c := range []struct {
		name      string
		w         tiered.Workload
		hot, cold tiered.Price
	}{
		{"1k writes/s of 1 MiB, 30 days, 3 zonal copies", tiered.Workload{WritesPerSecond: 1000, ObjectBytes: 1 << 20, Retention: 30 * 24 * time.Hour, After: 5 * time.Minute, HotCopies: 3}, tiered.GCSRapid, tiered.GCSStandard},
		{"1k writes/s of 1 MiB, 30 days, 3 zonal copies", tiered.Workload{WritesPerSecond: 1000, ObjectBytes: 1 << 20, Retention: 30 * 24 * time.Hour, After: 5 * time.Minute, HotCopies: 3}, tiered.S3ExpressOneZone, tiered.S3Standard},
		{"100 writes/s of 64 KiB, 7 days, 3 zonal copies", tiered.Workload{WritesPerSecond: 100, ObjectBytes: 64 << 10, Retention: 7 * 24 * time.Hour, After: 5 * time.Minute, HotCopies: 3}, tiered.GCSRapid, tiered.GCSStandard},
	} {
		allHot, tier := tiered.Estimate(c.w, c.hot, c.cold)
		if allHot.Total() <= 0 || tier.Total() <= 0 {
			t.Fatalf("%s: empty estimate", c.name)
		}
		t.Logf("%s, %s -> %s after %v: all hot $%.0f/month (storage %.0f, requests %.0f, transfer %.0f); tiered $%.0f/month (storage %.0f, requests %.0f, transfer %.0f): %.1fx",
			c.name, c.hot.Name, c.cold.Name, c.w.After, allHot.Total(), allHot.Storage, allHot.Requests, allHot.Transfer,
			tier.Total(), tier.Storage, tier.Requests, tier.Transfer, allHot.Total()/tier.Total())
	}
}
