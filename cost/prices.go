// Package cost prices the storage zonalblob writes to: the list prices of
// each cloud's zonal class and of the regional class it is compared with, each
// with its source and date, and a monthly estimate of a write workload kept
// in zonal buckets, in a regional one, or tiered from the first to the second
// by package tiered's compactor, whose requests it counts.
//
// Figures are list prices in one region per cloud (GCS us-central1, AWS
// us-east-1, Azure East US), no discounts, in US dollars. The providers bill
// storage per "GB" that is 2^30 bytes, a GiB, over a month of HoursPerMonth.
package cost

// PricesChecked is when the prices below were last read off their pages
// (each Price's Read says when its own figures were).
const PricesChecked = "as published, checked 2026-12-01"

// Price is what one storage class charges, in US dollars.
type Price struct {
	// Cloud is the provider ("GCS", "S3", "Azure") and Class the storage
	// class; Zonal tells a single-zone class from a regional one.
	Cloud string
	Class string
	Zonal bool

	StoragePerGiBMonth float64
	WritePer1000       float64 // PUT, LIST, or GCS Class A (inserts, lists)
	ReadPer1000        float64 // GET and HEAD, or GCS Class B
	// UploadPerGiB and RetrievalPerGiB are charged on every byte written
	// and read (S3 Express One Zone), however small the request.
	UploadPerGiB    float64
	RetrievalPerGiB float64

	// Source is the page the figures were read on, Region where they apply,
	// AsOf when they took effect (or, failing that, when they were read),
	// and Read the date they were last read off Source (YYYY-MM-DD).
	Source string
	Region string
	AsOf   string
	Read   string
	// Assumption names the figures that are not read off the source as such.
	Assumption string
}

// Name is the cloud and the class, as in "S3 Express One Zone".
func (p Price) Name() string { return p.Cloud + " " + p.Class }

// transferGiB is the per-byte-charged GiB of one request of size bytes.
func (p Price) transferGiB(size int64) float64 { return float64(size) / (1 << 30) }

// Published prices. Deletes are free on all three clouds.
var (
	GCSRapid = Price{
		Cloud: "GCS", Class: "Rapid (zonal)", Zonal: true,
		// $0.000150685 per GiB-hour ("Rapid storage (zonal)"), x 730 hours,
		// as the page read on 2026-09-20 lists it (a verbatim transcription
		// of it was read on 2026-12-01; the page itself could not be).
		StoragePerGiBMonth: 0.110,
		// Rapid buckets must have hierarchical namespace (HNS) enabled. The
		// pricing page's operation table gives $0.005 (Class A) and $0.0004
		// (Class B) per 1,000 for flat-namespace Standard buckets; the
		// prices of operations on HNS buckets, and of Rapid's own
		// operations, were not found in any copy of the page read on
		// 2026-12-01. They are assumed equal to the flat-namespace prices
		// until read: this is an assumption, not a published figure.
		WritePer1000: 0.005, ReadPer1000: 0.0004,
		Source: "https://cloud.google.com/storage/pricing", Region: "us-central1 zone (Rapid Storage)",
		AsOf:       "storage as published 2026-09; operations unverified",
		Read:       "2026-12-01",
		Assumption: "storage $0.000150685/GiB-hour (Rapid storage, zonal); operations on HNS buckets (which Rapid needs) not found published: assumed priced as flat-namespace Standard Class A/B",
	}
	GCSStandard = Price{
		Cloud: "GCS", Class: "Standard (regional)",
		// $0.000027397 per GiB-hour, x 730 hours (same reading as Rapid's).
		StoragePerGiBMonth: 0.020,
		// Class A and B per 1,000, as listed for flat-namespace buckets: a
		// regional target bucket need not enable HNS. Also worked through
		// in https://cloud.google.com/storage/pricing-examples.
		WritePer1000: 0.005, ReadPer1000: 0.0004,
		Source: "https://cloud.google.com/storage/pricing", Region: "us-central1, us-east1",
		AsOf: "as published 2026-09",
		Read: "2026-12-01",
	}
	S3ExpressOneZone = Price{
		Cloud: "S3", Class: "Express One Zone", Zonal: true,
		StoragePerGiBMonth: 0.11,
		WritePer1000:       0.00113, ReadPer1000: 0.00003,
		// Charged on every byte: the FAQ's first S3 Express One Zone example
		// prices 1,000,000 PUTs and 9,000,000 GETs of 10 KB each as "10 KB /
		// 1,048,576 x 1,000,000 x $0.0032" upload and "x 9,000,000 x
		// $0.0006" retrieval (a GB there is 1,048,576 KB: a GiB).
		UploadPerGiB: 0.0032, RetrievalPerGiB: 0.0006,
		Source: "https://aws.amazon.com/s3/faqs/", Region: "us-east-1",
		AsOf: "price cut effective 2025-04-10",
		Read: "2026-12-01",
	}
	S3Standard = Price{
		Cloud: "S3", Class: "Standard",
		StoragePerGiBMonth: 0.023,
		WritePer1000:       0.005, ReadPer1000: 0.0004,
		Source: "https://aws.amazon.com/s3/pricing/", Region: "us-east-1",
		AsOf:       "unchanged since 2016-12-01",
		Read:       "2026-11",
		Assumption: "storage is the first-50-TB tier",
	}
	AzurePremium = Price{
		Cloud: "Azure", Class: "Premium block blob (LRS)", Zonal: true,
		StoragePerGiBMonth: 0.15,
		// Listed per 10,000 operations: $0.0228 writes, $0.00182 reads.
		WritePer1000: 0.00228, ReadPer1000: 0.000182,
		Source: "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/", Region: "East US",
		AsOf:       "read 2026-11",
		Read:       "2026-11",
		Assumption: "storage ~$0.15/GiB-month; operations ($0.0228 writes, $0.00182 reads per 10,000) as listed for East US, check your region",
	}
	AzureHot = Price{
		Cloud: "Azure", Class: "Hot (LRS)",
		StoragePerGiBMonth: 0.018,
		// Listed per 10,000 operations: $0.065 writes, $0.005 reads.
		WritePer1000: 0.0065, ReadPer1000: 0.0005,
		Source: "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/", Region: "East US",
		AsOf:       "read 2026-11",
		Read:       "2026-11",
		Assumption: "storage ~$0.018/GiB-month (first 50 TB); operations ($0.065 writes, $0.005 reads per 10,000) as listed for East US, check your region",
	}
)

// Pair is one cloud's zonal class and the regional class it is compared with.
type Pair struct {
	Zonal, Regional Price
}

// Pairs are the classes compared on each cloud: GCS, S3, Azure.
func Pairs() []Pair {
	return []Pair{
		{GCSRapid, GCSStandard},
		{S3ExpressOneZone, S3Standard},
		{AzurePremium, AzureHot},
	}
}
