package tiered

import (
	"math"
	"time"
)

// Price is what one storage class charges, in US dollars. Per-GiB figures
// treat the providers' "GB" of storage billing as 2^30 bytes, as both bill.
type Price struct {
	Name               string
	StoragePerGiBMonth float64
	WritePer1000       float64 // PUT, or GCS Class A (inserts, lists)
	ReadPer1000        float64 // GET and HEAD, or GCS Class B
	UploadPerGiB       float64 // per byte written (S3 Express)
	RetrievalPerGiB    float64 // per byte read (S3 Express)
	// TransferFreeBytes of each request are not charged per byte: S3 Express
	// One Zone charges UploadPerGiB and RetrievalPerGiB only for the part of
	// a request above 512 KB.
	TransferFreeBytes int64
	// Assumption names the figures that are not read off the source as such.
	Assumption string
	// Source and AsOf say where the figures were read and when they took
	// effect (or, failing that, when they were read).
	Source string
	AsOf   string
}

// Published prices, single region us-east1 / us-central1 / us-east-1. Deletes
// are free on both providers.
var (
	GCSRapid = Price{
		Name: "GCS Rapid (zonal bucket)", StoragePerGiBMonth: 0.110,
		// Not found in a published table at the time of writing: Rapid
		// operations are assumed to cost what Standard's do.
		WritePer1000: 0.005, ReadPer1000: 0.0004,
		Source:     "https://cloud.google.com/storage/pricing (Rapid Storage, us-central1 zone; operations assumed equal to GCS Standard)",
		AsOf:       "2026-11 (unverified)",
		Assumption: "storage about $0.110/GiB-month (Rapid Storage, us-central1 zone); operations assumed priced as Standard Class A/B",
	}
	GCSStandard = Price{
		Name: "GCS Standard (regional)", StoragePerGiBMonth: 0.020,
		WritePer1000: 0.005, ReadPer1000: 0.0004,
		Source: "https://cloud.google.com/storage/pricing and /storage/pricing-examples (us-central1, us-east1)",
		AsOf:   "read 2026-11",
	}
	S3ExpressOneZone = Price{
		Name: "S3 Express One Zone", StoragePerGiBMonth: 0.11,
		WritePer1000: 0.00113, ReadPer1000: 0.00003,
		UploadPerGiB: 0.0032, RetrievalPerGiB: 0.0006, TransferFreeBytes: 512 << 10,
		Source: "https://aws.amazon.com/s3/faqs/ (S3 Express One Zone pricing examples, us-east-1)",
		AsOf:   "price cut effective 2025-04-10",
	}
	S3Standard = Price{
		Name: "S3 Standard", StoragePerGiBMonth: 0.023,
		WritePer1000: 0.005, ReadPer1000: 0.0004,
		Source:     "https://aws.amazon.com/s3/pricing/ (first 50 TB/month, us-east-1)",
		AsOf:       "unchanged since 2016-12-01",
		Assumption: "storage is the first-50-TB tier",
	}
	AzurePremium = Price{
		Name: "Azure Premium block blob (LRS)", StoragePerGiBMonth: 0.15,
		WritePer1000: 0.00228, ReadPer1000: 0.000182,
		Source:     "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/ (East US)",
		AsOf:       "read 2026-11",
		Assumption: "storage ~$0.15/GiB-month; operations ($0.0228 writes, $0.00182 reads per 10,000) as listed for East US, check your region",
	}
	AzureHot = Price{
		Name: "Azure Hot (LRS)", StoragePerGiBMonth: 0.018,
		WritePer1000: 0.0065, ReadPer1000: 0.0005,
		Source:     "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/ (East US)",
		AsOf:       "read 2026-11",
		Assumption: "storage ~$0.018/GiB-month (first 50 TB); operations ($0.065 writes, $0.005 reads per 10,000) as listed for East US, check your region",
	}
)

// transferGiB is the per-byte-charged GiB of one request of size bytes.
func (p Price) transferGiB(size int64) float64 {
	return float64(max(size-p.TransferFreeBytes, 0)) / (1 << 30)
}

// hoursPerMonth is the month both providers bill storage over.
const hoursPerMonth = 730

// Workload describes a steady write load for Estimate.
type Workload struct {
	WritesPerSecond float64
	ObjectBytes     int64
	// Retention is how long an object lives before the application deletes it.
	Retention time.Duration
	// After is the compaction age (Options.After); Interval, the time between
	// passes (zero: the Store's default for After).
	After, Interval time.Duration
	// HotCopies is how many zonal buckets hold each hot object (a quorum's N;
	// 1 for a single bucket).
	HotCopies int
}

// Cost is a monthly bill, split by what is charged.
type Cost struct {
	Storage, Requests, Transfer float64
}

// Total is the whole monthly bill.
func (c Cost) Total() float64 { return c.Storage + c.Requests + c.Transfer }

// Estimate compares, for one month of w in steady state, keeping every object
// in the hot tier against tiering with the compactor.
//
// Requests counted per compacted object: in hot, the two Stats, the marker's
// write (to every copy) and the Stat that follows it, and the read; in cold,
// the write and the verifying Stat. Deletes are free. Each pass lists hot's
// markers and then its objects: one list (Class A on GCS) per 1000 objects.
func Estimate(w Workload, hot, cold Price) (allHot, tiered Cost) {
	const gib = 1 << 30
	copies := float64(max(w.HotCopies, 1))
	writes := w.WritesPerSecond * hoursPerMonth * 3600
	size := float64(w.ObjectBytes)
	held := func(d time.Duration) float64 { return w.WritesPerSecond * d.Seconds() * size / gib } // GiB in steady state

	allHot.Storage = held(w.Retention) * copies * hot.StoragePerGiBMonth
	allHot.Requests = writes * copies * hot.WritePer1000 / 1000
	allHot.Transfer = writes * hot.transferGiB(w.ObjectBytes) * copies * hot.UploadPerGiB

	after := min(w.After, w.Retention)
	interval := w.Interval
	if interval == 0 {
		interval = Options{After: w.After}.withDefaults().Interval
	}
	passes := float64(hoursPerMonth*time.Hour) / float64(interval)
	// Each pass lists the markers of unfinished moves, then the objects.
	lists := passes * (1 + math.Max(1, math.Ceil(w.WritesPerSecond*after.Seconds()/1000)))
	tiered.Storage = held(after)*copies*hot.StoragePerGiBMonth + held(w.Retention-after)*cold.StoragePerGiBMonth
	tiered.Requests = allHot.Requests +
		writes*(copies*hot.WritePer1000+4*hot.ReadPer1000)/1000 +
		writes*(cold.WritePer1000+cold.ReadPer1000)/1000 +
		lists*hot.WritePer1000/1000
	tiered.Transfer = allHot.Transfer +
		writes*(hot.transferGiB(w.ObjectBytes)*hot.RetrievalPerGiB+cold.transferGiB(w.ObjectBytes)*cold.UploadPerGiB)
	return allHot, tiered
}
