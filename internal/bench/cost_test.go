package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestEstimates(t *testing.T) {
	w := Workload{WritesPerSec: 1, ObjectSize: 1 << 30, Retention: month, HotWindow: month / 730, Replicas: 3}
	est := Estimates(w)
	if len(est) != 4*len(Prices()) {
		t.Fatalf("%d estimates", len(est))
	}
	writes := month.Seconds()
	byLayout := map[string]Estimate{}
	for _, e := range est {
		if e.Backend == "S3" {
			byLayout[strings.SplitN(e.Layout, ":", 2)[0]] = e
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6*max(1, want) }
	// One GiB a second for a month is writes GiB stored.
	if e := byLayout["regional only"]; !near(e.Storage, writes*0.023) || !near(e.Requests, writes*0.005/1000) {
		t.Errorf("regional only: %+v", e)
	}
	// S3 Express charges per GiB above 512 KiB on upload.
	upload := 0.00113/1000 + float64(1<<30-512<<10)/(1<<30)*0.0032
	if e := byLayout["one zonal bucket"]; !near(e.Storage, writes*0.11) || !near(e.Requests, writes*upload) {
		t.Errorf("one zonal bucket: %+v, want requests %v", e, writes*upload)
	}
	if e := byLayout["quorum of 3 zonal, no tiering"]; !near(e.Total(), 3*byLayout["one zonal bucket"].Total()) {
		t.Errorf("quorum: %+v", e)
	}
	// Tiered: an hour's writes on three zonal replicas, the rest regional.
	tiered := byLayout["tiered"]
	hot := writes / 730
	if want := 3*hot*0.11 + (writes-hot)*0.023; !near(tiered.Storage, want) {
		t.Errorf("tiered storage %v, want %v", tiered.Storage, want)
	}
	if tiered.Storage >= byLayout["quorum of 3 zonal, no tiering"].Storage {
		t.Errorf("tiering does not save storage: %+v", tiered)
	}
}

func TestEveryPriceHasASource(t *testing.T) {
	for _, pair := range Prices() {
		if !pair[0].Zonal || pair[1].Zonal || pair[0].Backend != pair[1].Backend {
			t.Errorf("pair %s/%s: want zonal then regional of one cloud", pair[0].Class, pair[1].Class)
		}
		for _, p := range pair {
			if !strings.HasPrefix(p.Source, "https://") || p.Checked != PricesChecked || p.StorageGiBMonth <= 0 || p.Write1000 <= 0 {
				t.Errorf("%s %s: %+v", p.Backend, p.Class, p)
			}
		}
	}
}

func TestWorkloadValidate(t *testing.T) {
	if err := DefaultWorkload().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Workload){
		"rate":      func(w *Workload) { w.WritesPerSec = 0 },
		"size":      func(w *Workload) { w.ObjectSize = 0 },
		"retention": func(w *Workload) { w.Retention = 0 },
		"hot":       func(w *Workload) { w.HotWindow = 2 * w.Retention },
		"replicas":  func(w *Workload) { w.Replicas = 0 },
	} {
		w := DefaultWorkload()
		mutate(&w)
		if w.Validate() == nil {
			t.Errorf("%s: invalid workload accepted", name)
		}
	}
}

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
