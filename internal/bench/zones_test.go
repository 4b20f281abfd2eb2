package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
)

// The zones helper is what the quorum and tiered scenarios will stand on:
// three working zonal stores, the first slowed on request.
func TestGCSRapidZones(t *testing.T) {
	ctx := context.Background()
	z, err := gcsRapidZones(ctx, testEnv(10), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, slow := range []bool{false, true} {
		stores := z.Stores(slow)
		if len(stores) != 3 {
			t.Fatalf("%d stores", len(stores))
		}
		if _, wrapped := stores[0].(*fault.Store); wrapped != slow {
			t.Errorf("slow=%v: first zone wrapped=%v", slow, wrapped)
		}
		before := z.Requests()
		for i, s := range stores {
			start := time.Now()
			if _, err := blob.CreateBytes(ctx, s, fmt.Sprintf("zone%d/", i), []byte("x"), nil); err != nil {
				t.Fatalf("zone %d: %v", i, err)
			}
			// The zero profile answers in well under the slow zone's delay.
			if took := time.Since(start); (i == 0 && slow) != (took > SlowZone.P50/3) {
				t.Errorf("slow=%v zone %d took %v", slow, i, took)
			}
		}
		if z.Requests() <= before {
			t.Errorf("no requests counted")
		}
	}
	if z.ProfileLabel(true) == z.ProfileLabel(false) {
		t.Errorf("a slow zone does not show in the profile label")
	}
}
