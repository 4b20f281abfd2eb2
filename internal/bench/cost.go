package bench

import (
	"fmt"

	"github.com/zonalblob/zonalblob/tiered"
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

	tiered tiered.Price
}

// Prices are the zonal class and the regional class it is compared with,
// per cloud, zonal first. The figures are package tiered's, whose cost model
// prices the compactor's own requests: one table for both.
func Prices() [][2]Price {
	return [][2]Price{
		{view("GCS", "Rapid (zonal)", true, tiered.GCSRapid), view("GCS", "Standard (regional)", false, tiered.GCSStandard)},
		{view("S3", "Express One Zone", true, tiered.S3ExpressOneZone), view("S3", "Standard", false, tiered.S3Standard)},
		{view("Azure", "Premium block blob (LRS)", true, tiered.AzurePremium), view("Azure", "Hot (LRS)", false, tiered.AzureHot)},
	}
}

func view(backend, class string, zonal bool, p tiered.Price) Price {
	source, _, _ := strings.Cut(p.Source, " ")
	return Price{
		Backend: backend, Class: class, Zonal: zonal,
		StorageGiBMonth: p.StoragePerGiBMonth, Write1000: p.WritePer1000, Read1000: p.ReadPer1000,
		TransferGiBAbove: p.UploadPerGiB, TransferReadGiBAbove: p.RetrievalPerGiB, TransferFreeBytes: int(p.TransferFreeBytes),
		Source: source, Checked: PricesChecked, Assumption: p.Assumption, tiered: p,
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
		n := float64(w.Replicas)
		out = append(out,
			Estimate{zonal.Backend, "regional only: " + regional.Class, stored(w.Retention) * regional.StorageGiBMonth, put(regional)},
			Estimate{zonal.Backend, "one zonal bucket: " + zonal.Class, stored(w.Retention) * zonal.StorageGiBMonth, put(zonal)},
			Estimate{zonal.Backend, fmt.Sprintf("quorum of %d zonal, no tiering", w.Replicas), n * stored(w.Retention) * zonal.StorageGiBMonth, n * put(zonal)},
			tieredEstimate(w, zonal, regional),
		)
	}
	return out
}

// tieredEstimate prices the tiered layout with package tiered's model, which
// counts the compactor's requests (its Stats, move marker, read and verify).
func tieredEstimate(w Workload, zonal, regional Price) Estimate {
	_, t := tiered.Estimate(tiered.Workload{
		WritesPerSecond: w.WritesPerSec, ObjectBytes: int64(w.ObjectSize), Retention: w.Retention,
		After: w.HotWindow, HotCopies: w.Replicas,
	}, zonal.tiered, regional.tiered)
	return Estimate{zonal.Backend, fmt.Sprintf("tiered: quorum of %d zonal for %s, then regional", w.Replicas, Days(w.HotWindow)),
		t.Storage, t.Requests + t.Transfer}
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
