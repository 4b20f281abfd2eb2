package bench

import (
	"context"
	"os"
	"testing"
)

func TestGCSRapidScenariosRun(t *testing.T) {
	res, err := GCSRapid(context.Background(), GCSRapidConfig{Profile: "zero", Ops: 30, Rate: 500, Sizes: []int{10}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results, want 3", len(res))
	}
	for _, r := range res {
		if r.Ops != 30 || r.Errors != 0 || r.P50 <= 0 || r.P50 > r.P99 {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
		if r.RequestsPerOp <= 0 {
			t.Errorf("%s: no requests counted", r.Scenario)
		}
	}
	WriteTable(os.Stdout, res)
}
