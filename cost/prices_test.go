package cost_test

import (
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/cost"
)

func TestEveryPriceHasASource(t *testing.T) {
	for _, pair := range cost.Pairs() {
		if !pair.Zonal.Zonal || pair.Regional.Zonal || pair.Zonal.Cloud != pair.Regional.Cloud {
			t.Errorf("pair %s/%s: want zonal then regional of one cloud", pair.Zonal.Name(), pair.Regional.Name())
		}
		for _, p := range []cost.Price{pair.Zonal, pair.Regional} {
			if !strings.HasPrefix(p.Source, "https://") || strings.ContainsRune(p.Source, ' ') || p.Region == "" || p.AsOf == "" || p.Read == "" ||
				p.StoragePerGiBMonth <= 0 || p.WritePer1000 <= 0 || p.ReadPer1000 <= 0 {
				t.Errorf("%s: %+v", p.Name(), p)
			}
			if _, err := time.Parse("2006-01-02", p.Read); err != nil {
				if _, err := time.Parse("2006-01", p.Read); err != nil {
					t.Errorf("%s: Read %q is not a date", p.Name(), p.Read)
				}
			}
		}
	}
}
