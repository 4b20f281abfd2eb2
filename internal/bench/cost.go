package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

// CostRow is one row of a cost estimate: a cloud (as cost.Price.Cloud has
// it: "GCS", "S3", "Azure") and a layout of the workload on it.
type CostRow struct {
	Cloud  string
	Layout cost.Layout
}

// AllCostRows are every cloud of cost.Pairs in every layout: what bench
// --cost prints.
func AllCostRows() []CostRow {
	var rows []CostRow
	for _, e := range cost.Layouts(cost.DefaultWorkload()) {
		rows = append(rows, CostRow{e.Zonal.Cloud, e.Layout})
	}
	return rows
}

// CostRowsOf returns the cost rows of the scenarios that recorded rows in
// results, without repeats, in the order of AllCostRows.
func CostRowsOf(scenarios []Scenario, results []Result) []CostRow {
	var want []CostRow
	for _, s := range scenarios {
		if slices.ContainsFunc(results, func(r Result) bool { return r.Group == s.Name }) {
			want = append(want, s.Costs...)
		}
	}
	var rows []CostRow
	for _, r := range AllCostRows() {
		if slices.Contains(want, r) {
			rows = append(rows, r)
		}
	}
	return rows
}

// uses says whether a layout stores objects in the zonal class (zonal) or
// the regional one (!zonal).
func uses(l cost.Layout, zonal bool) bool {
	switch l {
	case cost.RegionalOnly:
		return !zonal
	case cost.OneZonal, cost.ZonalQuorum:
		return zonal
	}
	return true // Tiered: both
}

// WritePrices prints the price table of package cost with sources.
func WritePrices(w io.Writer) error { return WritePricesFor(w, AllCostRows()) }

// WritePricesFor prints the rows of the price table that rows use: a
// cloud's zonal class if a row keeps objects in it, its regional class
// likewise.
func WritePricesFor(w io.Writer, rows []CostRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tclass\tper GiB-month\tper 1,000 writes\tper 1,000 reads\tsource ("+cost.PricesChecked+")")
	var notes []string
	for _, pair := range cost.Pairs() {
		for i, p := range []cost.Price{pair.Zonal, pair.Regional} {
			zonal := i == 0
			if !slices.ContainsFunc(rows, func(r CostRow) bool { return r.Cloud == p.Cloud && uses(r.Layout, zonal) }) {
				continue
			}
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
	return WriteEstimatesFor(out, w, AllCostRows())
}

// WriteEstimatesFor prints the monthly cost of w in the layouts of rows.
func WriteEstimatesFor(out io.Writer, w cost.Workload, rows []CostRow) error {
	// The workload's tiering and quorum are said where a row uses them.
	layout := func(ls ...cost.Layout) bool {
		return slices.ContainsFunc(rows, func(r CostRow) bool { return slices.Contains(ls, r.Layout) })
	}
	shape := ""
	if layout(cost.Tiered) {
		shape += fmt.Sprintf(", compacted after %s", Days(w.After))
	}
	if layout(cost.Tiered, cost.ZonalQuorum) {
		shape += fmt.Sprintf(", quorum of %d zones", w.Replicas)
	}
	fmt.Fprintf(out, "Workload: %g writes/s of %s, kept %s%s: %.0f writes a month, %.0f GiB stored at steady state.\n\n",
		w.WritesPerSecond, SizeString(int(w.ObjectBytes)), Days(w.Retention), shape, w.WritesPerMonth(), w.StoredGiB())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	compacts := layout(cost.Tiered)
	head := "backend\tlayout\tstorage/month\trequests/month\ttotal/month\t"
	if compacts {
		head += "of which compactor\t"
	}
	fmt.Fprintln(tw, head)
	for _, e := range cost.Layouts(w) {
		if !slices.Contains(rows, CostRow{e.Zonal.Cloud, e.Layout}) {
			continue
		}
		compactor := ""
		if e.Layout == cost.Tiered {
			compactor = fmt.Sprintf("$%.0f (%.0f%%)", e.Compactor, 100*e.Compactor/e.Total())
		}
		row := fmt.Sprintf("%s\t%s\t$%.0f\t$%.0f\t$%.0f\t", e.Zonal.Cloud, layoutName(e, w), e.Storage, e.Requests+e.Transfer, e.Total())
		if compacts {
			row += compactor + "\t"
		}
		fmt.Fprintln(tw, row)
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
