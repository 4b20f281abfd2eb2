package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

// WritePrices prints the price table of package cost with sources.
func WritePrices(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tclass\tper GiB-month\tper 1,000 writes\tper 1,000 reads\tsource ("+cost.PricesChecked+")")
	var notes []string
	for _, pair := range cost.Pairs() {
		for _, p := range []cost.Price{pair.Zonal, pair.Regional} {
			write, read := dollars(p.WritePer1000), dollars(p.ReadPer1000)
			if p.UploadPerGiB > 0 {
				write += fmt.Sprintf(" +%s/GiB", dollars(p.UploadPerGiB))
				read += fmt.Sprintf(" +%s/GiB", dollars(p.RetrievalPerGiB))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (read %s)\n", p.Cloud, p.Class, dollars(p.StoragePerGiBMonth), write, read, p.Source, p.Read)
			if p.Assumption != "" {
				notes = append(notes, fmt.Sprintf("%s: %s", p.Name(), p.Assumption))
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

// WriteEstimates prints the monthly cost of w in every layout of
// cost.Layouts. The requests column includes the per-byte transfer charges.
func WriteEstimates(out io.Writer, w cost.Workload) error {
	fmt.Fprintf(out, "Workload: %g writes/s of %s, kept %s, compacted after %s, quorum of %d zones: %.0f writes a month, %.0f GiB stored at steady state.\n\n",
		w.WritesPerSecond, SizeString(int(w.ObjectBytes)), Days(w.Retention), Days(w.After), w.Replicas, w.WritesPerMonth(), w.StoredGiB())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tlayout\tstorage/month\trequests/month\ttotal/month\tof which compactor\t")
	for _, e := range cost.Layouts(w) {
		compactor := ""
		if e.Layout == cost.Tiered {
			compactor = fmt.Sprintf("$%.0f (%.0f%%)", e.Compactor, 100*e.Compactor/e.Total())
		}
		fmt.Fprintf(tw, "%s\t%s\t$%.0f\t$%.0f\t$%.0f\t%s\t\n", e.Zonal.Cloud, layoutName(e, w), e.Storage, e.Requests+e.Transfer, e.Total(), compactor)
	}
	return tw.Flush()
}

func layoutName(e cost.LayoutCost, w cost.Workload) string {
	switch e.Layout {
	case cost.RegionalOnly:
		return "regional only: " + e.Regional.Class
	case cost.OneZonal:
		return "one zonal bucket: " + e.Zonal.Class
	case cost.ZonalQuorum:
		return fmt.Sprintf("quorum of %d zonal, no tiering", w.Replicas)
	case cost.Tiered:
		return fmt.Sprintf("tiered: quorum of %d zonal for %s, then regional packs", w.Replicas, Days(w.After))
	}
	return fmt.Sprintf("layout %d", e.Layout)
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
