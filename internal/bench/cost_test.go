package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

func TestDays(t *testing.T) {
	for _, s := range []string{"30d", "36h", "15m", "1.5s"} {
		d, err := ParseDays(s)
		if err != nil || Days(d) != s {
			t.Errorf("%s: %v %v -> %s", s, d, err, Days(d))
		}
	}
	if d, _ := ParseDays("0.5d"); d != 12*time.Hour {
		t.Errorf("0.5d = %v", d)
	}
	if _, err := ParseDays("xd"); err == nil {
		t.Error("xd accepted")
	}
}

// TestWriteEstimates checks that every layout gets a row under its own name,
// with the transfer charges in the requests column.
func TestWriteEstimates(t *testing.T) {
	w := cost.Workload{WritesPerSecond: 10, ObjectBytes: 1 << 20, Retention: 7 * 24 * time.Hour, After: time.Hour, Replicas: 3}
	var out bytes.Buffer
	if err := WriteEstimates(&out, w); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := 3 + len(cost.Layouts(w)); len(rows) != want {
		t.Fatalf("%d lines, want %d:\n%s", len(rows), want, out.String())
	}
	for _, want := range []string{
		"S3       regional only: Standard ",
		"S3       one zonal bucket: Express One Zone ",
		"S3       quorum of 3 zonal, no tiering ",
		"S3       tiered: quorum of 3 zonal for 1h, then regional packs ",
		"GCS      regional only: Standard (regional) ",
		"Azure    one zonal bucket: Premium block blob (LRS) ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no row %q in\n%s", want, out.String())
		}
	}
	// One zonal S3 Express bucket: 10 writes/s of 1 MiB is 26,280,000 writes a
	// month, each charged $0.00113/1000 plus $0.0032 for each of its 1/1024
	// GiB: $29.70 + $82.13 = $112 (printed rounded).
	var line string
	for _, l := range rows {
		if strings.HasPrefix(l, "S3       one zonal bucket") {
			line = l
		}
	}
	if fields := strings.Fields(line); len(fields) < 7 || fields[len(fields)-2] != "$112" {
		t.Errorf("S3 one zonal bucket row %q: want requests $112", line)
	}
}

func TestWritePrices(t *testing.T) {
	var out bytes.Buffer
	if err := WritePrices(&out); err != nil {
		t.Fatal(err)
	}
	for _, p := range []cost.Price{cost.GCSRapid, cost.S3Standard, cost.AzureHot} {
		if !strings.Contains(out.String(), p.Class) || !strings.Contains(out.String(), p.Source) {
			t.Errorf("%s missing from\n%s", p.Name(), out.String())
		}
	}
	if !strings.Contains(out.String(), "$0.00113 +$0.0032/GiB") {
		t.Errorf("S3 Express transfer charge missing from\n%s", out.String())
	}
}

// A run prints the cost rows of the scenarios that recorded rows, and the
// prices those rows use.
func TestCostRowsOf(t *testing.T) {
	all, _ := SelectScenarios(nil)
	results := []Result{{Scenario: "zonalblob-put", Group: "gcsrapid"}, {Scenario: "s3-standard-put", Group: "s3"}}
	got := CostRowsOf(all, results)
	want := []CostRow{{"GCS", cost.OneZonal}, {"S3", cost.RegionalOnly}, {"S3", cost.OneZonal}}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
	if rows := CostRowsOf(all, nil); len(rows) != 0 {
		t.Errorf("no results: rows %v", rows)
	}
	if rows := CostRowsOf([]Scenario{URLScenario("gcsrapid://bucket")}, []Result{{Group: "gcsrapid://bucket"}}); len(rows) != 1 || rows[0] != (CostRow{"GCS", cost.OneZonal}) {
		t.Errorf("gcsrapid:// URL: rows %v", rows)
	}
	if rows := CostRowsOf([]Scenario{URLScenario("mem://")}, []Result{{Group: "mem://"}}); len(rows) != 0 {
		t.Errorf("mem:// URL: rows %v", rows)
	}

	var prices bytes.Buffer
	if err := WritePricesFor(&prices, got); err != nil {
		t.Fatal(err)
	}
	for _, p := range []cost.Price{cost.GCSRapid, cost.S3Standard, cost.S3ExpressOneZone} {
		if !strings.Contains(prices.String(), p.Class) {
			t.Errorf("prices lack %s:\n%s", p.Name(), prices.String())
		}
	}
	for _, p := range []cost.Price{cost.GCSStandard, cost.AzureHot, cost.AzurePremium} {
		if strings.Contains(prices.String(), p.Class) {
			t.Errorf("prices have %s, which no row uses:\n%s", p.Name(), prices.String())
		}
	}
	var est bytes.Buffer
	if err := WriteEstimatesFor(&est, cost.DefaultWorkload(), got); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(est.String()), "\n") + 1; lines != 3+len(got) {
		t.Errorf("%d lines, want %d:\n%s", lines, 3+len(got), est.String())
	}
	if strings.Contains(est.String(), "compacted") || strings.Contains(est.String(), "quorum") {
		t.Errorf("the workload line speaks of layouts no row has:\n%s", est.String())
	}
}
