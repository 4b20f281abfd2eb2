package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PricesChecked is when the prices below were read off the pricing pages.
const PricesChecked = "as published, checked 2026-11"

// Price is what one storage class charges, list price in its cheapest
// common region (us-central1, us-east-1, East US), no discounts. AWS and
// Azure price per "GB" and bill it as 2^30 bytes, which is a GiB.
type Price struct {
	Backend string `json:"backend"`
	Class   string `json:"class"`
	Zonal   bool   `json:"zonal"`
	// StorageGiBMonth is dollars per GiB stored for a month.
	StorageGiBMonth float64 `json:"storage_per_gib_month"`
	// Write1000 and Read1000 are dollars per 1,000 writes (PUT, Class A)
	// and reads (GET, Class B).
	Write1000 float64 `json:"write_per_1000"`
	Read1000  float64 `json:"read_per_1000"`
	// TransferGiBAbove is dollars per GiB of each request's bytes above
	// TransferFreeBytes, charged on uploads (and, TransferReadGiBAbove, on
	// downloads): S3 Express One Zone's charge above 512 KiB.
	TransferGiBAbove     float64 `json:"upload_per_gib_above_threshold,omitempty"`
	TransferReadGiBAbove float64 `json:"download_per_gib_above_threshold,omitempty"`
	TransferFreeBytes    int     `json:"transfer_threshold_bytes,omitempty"`
	Source               string  `json:"source"`
	Checked              string  `json:"checked"`
	// Assumption says which figures are not read off the page as such.
	Assumption string `json:"assumption,omitempty"`
}

const (
	gcsPricing   = "https://cloud.google.com/storage/pricing"
	s3Pricing    = "https://aws.amazon.com/s3/pricing/"
	azurePricing = "https://azure.microsoft.com/en-us/pricing/details/storage/blobs/"
)

// Prices are the zonal class and the regional class it is compared with,
// per cloud, zonal first.
func Prices() [][2]Price {
	return [][2]Price{
		{
			{Backend: "GCS", Class: "Rapid (zonal)", Zonal: true, StorageGiBMonth: 0.110, Write1000: 0.005, Read1000: 0.0004,
				Source: gcsPricing, Checked: PricesChecked,
				Assumption: "storage about $0.110/GiB-month (Rapid Storage, us-central1 zone); operations assumed priced as Standard Class A/B"},
			{Backend: "GCS", Class: "Standard (regional)", StorageGiBMonth: 0.020, Write1000: 0.005, Read1000: 0.0004,
				Source: gcsPricing, Checked: PricesChecked},
		},
		{
			{Backend: "S3", Class: "Express One Zone", Zonal: true, StorageGiBMonth: 0.11, Write1000: 0.00113, Read1000: 0.00003,
				TransferGiBAbove: 0.0032, TransferReadGiBAbove: 0.0006, TransferFreeBytes: 512 << 10,
				Source: s3Pricing, Checked: PricesChecked},
			{Backend: "S3", Class: "Standard", StorageGiBMonth: 0.023, Write1000: 0.005, Read1000: 0.0004,
				Source: s3Pricing, Checked: PricesChecked, Assumption: "storage is the first-50-TB tier"},
		},
		{
			{Backend: "Azure", Class: "Premium block blob (LRS)", Zonal: true, StorageGiBMonth: 0.15, Write1000: 0.00228, Read1000: 0.000182,
				Source: azurePricing, Checked: PricesChecked,
				Assumption: "storage ~$0.15/GiB-month; operations ($0.0228 writes, $0.00182 reads per 10,000) as listed for East US, check your region"},
			{Backend: "Azure", Class: "Hot (LRS)", StorageGiBMonth: 0.018, Write1000: 0.0065, Read1000: 0.0005,
				Source: azurePricing, Checked: PricesChecked,
				Assumption: "storage ~$0.018/GiB-month (first 50 TB); operations ($0.065 writes, $0.005 reads per 10,000) as listed for East US, check your region"},
		},
	}
}

// Workload is what a user writes, for a monthly estimate.
type Workload struct {
	WritesPerSec float64
	ObjectSize   int
	// Retention is how long each object is kept.
	Retention time.Duration
	// HotWindow is how long an object stays in the zonal tier before the
	// tiered store's compactor moves it to the regional one.
	HotWindow time.Duration
	// Replicas is the number of zonal buckets a quorum writes to.
	Replicas int
}

// DefaultWorkload is a commit log: 200 writes a second of 64 KiB, kept 30
// days, compacted after 15 minutes, three zones.
func DefaultWorkload() Workload {
	return Workload{WritesPerSec: 200, ObjectSize: 64 << 10, Retention: 30 * 24 * time.Hour, HotWindow: 15 * time.Minute, Replicas: 3}
}

// Validate reports a workload that cannot be priced.
func (w Workload) Validate() error {
	switch {
	case w.WritesPerSec <= 0:
		return fmt.Errorf("writes per second %g: must be positive", w.WritesPerSec)
	case w.ObjectSize <= 0:
		return fmt.Errorf("object size %d: must be positive", w.ObjectSize)
	case w.Retention <= 0:
		return fmt.Errorf("retention %v: must be positive", w.Retention)
	case w.HotWindow <= 0 || w.HotWindow > w.Retention:
		return fmt.Errorf("hot window %v: must be positive and at most the retention %v", w.HotWindow, w.Retention)
	case w.Replicas < 1:
		return fmt.Errorf("replicas %d: must be at least 1", w.Replicas)
	}
	return nil
}

// month is the billing month the clouds use: 730 hours.
const month = 730 * time.Hour

// Estimate is one layout's monthly cost.
type Estimate struct {
	Backend  string  `json:"backend"`
	Layout   string  `json:"layout"`
	Storage  float64 `json:"storage_per_month"`
	Requests float64 `json:"requests_per_month"`
}

// Total is the monthly cost.
func (e Estimate) Total() float64 { return e.Storage + e.Requests }

// Estimates prices w on each cloud in four layouts: regional only (what a
// user has today), one zonal bucket, a quorum of zonal buckets without
// tiering, and tiered (quorum hot, compacted object by object into
// regional after HotWindow; deletes are free on all three clouds).
func Estimates(w Workload) []Estimate {
	writes := w.WritesPerSec * month.Seconds()
	gib := float64(w.ObjectSize) / (1 << 30)
	stored := func(d time.Duration) float64 { return w.WritesPerSec * d.Seconds() * gib }
	var out []Estimate
	for _, pair := range Prices() {
		zonal, regional := pair[0], pair[1]
		put := func(p Price) float64 {
			return writes * (p.Write1000/1000 + p.transfer(w.ObjectSize, p.TransferGiBAbove))
		}
		get := func(p Price) float64 {
			return writes * (p.Read1000/1000 + p.transfer(w.ObjectSize, p.TransferReadGiBAbove))
		}
		n := float64(w.Replicas)
		out = append(out,
			Estimate{zonal.Backend, "regional only: " + regional.Class, stored(w.Retention) * regional.StorageGiBMonth, put(regional)},
			Estimate{zonal.Backend, "one zonal bucket: " + zonal.Class, stored(w.Retention) * zonal.StorageGiBMonth, put(zonal)},
			Estimate{zonal.Backend, fmt.Sprintf("quorum of %d zonal, no tiering", w.Replicas), n * stored(w.Retention) * zonal.StorageGiBMonth, n * put(zonal)},
			Estimate{zonal.Backend, fmt.Sprintf("tiered: quorum of %d zonal for %s, then regional", w.Replicas, Days(w.HotWindow)),
				n*stored(w.HotWindow)*zonal.StorageGiBMonth + stored(w.Retention-w.HotWindow)*regional.StorageGiBMonth,
				n*put(zonal) + get(zonal) + put(regional)},
		)
	}
	return out
}

// transfer is the per-request charge for the bytes of one object above the
// free threshold.
func (p Price) transfer(size int, perGiB float64) float64 {
	if perGiB == 0 || size <= p.TransferFreeBytes {
		return 0
	}
	return float64(size-p.TransferFreeBytes) / (1 << 30) * perGiB
}

// WritePrices prints the price table with sources.
func WritePrices(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tclass\tper GiB-month\tper 1,000 writes\tper 1,000 reads\tsource ("+PricesChecked+")")
	var notes []string
	for _, pair := range Prices() {
		for _, p := range pair {
			write, read := dollars(p.Write1000), dollars(p.Read1000)
			if p.TransferGiBAbove > 0 {
				write += fmt.Sprintf(" +%s/GiB above %s", dollars(p.TransferGiBAbove), SizeString(p.TransferFreeBytes))
				read += fmt.Sprintf(" +%s/GiB above %s", dollars(p.TransferReadGiBAbove), SizeString(p.TransferFreeBytes))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Backend, p.Class, dollars(p.StorageGiBMonth), write, read, p.Source)
			if p.Assumption != "" {
				notes = append(notes, fmt.Sprintf("%s %s: %s", p.Backend, p.Class, p.Assumption))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nAssumptions:")
		for _, n := range notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	return nil
}

func dollars(v float64) string { return "$" + strconv.FormatFloat(v, 'f', -1, 64) }

// WriteEstimates prints the monthly estimates for w.
func WriteEstimates(out io.Writer, w Workload) error {
	fmt.Fprintf(out, "Workload: %g writes/s of %s, kept %s, compacted after %s, quorum of %d zones: %.0f writes a month, %.0f GiB stored at steady state.\n\n",
		w.WritesPerSec, SizeString(w.ObjectSize), Days(w.Retention), Days(w.HotWindow), w.Replicas,
		w.WritesPerSec*month.Seconds(), w.WritesPerSec*w.Retention.Seconds()*float64(w.ObjectSize)/(1<<30))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tlayout\tstorage/month\trequests/month\ttotal/month\t")
	for _, e := range Estimates(w) {
		fmt.Fprintf(tw, "%s\t%s\t$%.0f\t$%.0f\t$%.0f\t\n", e.Backend, e.Layout, e.Storage, e.Requests, e.Total())
	}
	return tw.Flush()
}

// Days renders a duration as 30d, 36h or 15m.
func Days(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// ParseDays parses a duration that may also be given in days ("30d").
func ParseDays(s string) (time.Duration, error) {
	if v, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(s)
}
