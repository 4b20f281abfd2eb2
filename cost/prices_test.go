package cost_test

import (
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/cost"
)

func TestEveryPriceHasASource(t *testing.T) {
	for _, pair := range cost.Pairs() {
		if !pair.Zonal.Zonal || pair.Regional.Zonal || pair.Zonal.Cloud != pair.Regional.Cloud {
			t.Errorf("pair %s/%s: want zonal then regional of one cloud", pair.Zonal.Name(), pair.Regional.Name())
		}
		for _, p := range []cost.Price{pair.Zonal, pair.Regional} {
			if !strings.HasPrefix(p.Source, "https://") || strings.ContainsRune(p.Source, ' ') || p.Region == "" || p.AsOf == "" ||
				p.StoragePerGiBMonth <= 0 || p.WritePer1000 <= 0 || p.ReadPer1000 <= 0 {
				t.Errorf("%s: %+v", p.Name(), p)
			}
			if (p.UploadPerGiB > 0 || p.RetrievalPerGiB > 0) != (p.TransferFreeBytes > 0) {
				t.Errorf("%s: per-byte charges without their free threshold, or the reverse: %+v", p.Name(), p)
			}
		}
	}
}
