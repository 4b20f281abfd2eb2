package tiered_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// A grave in hot over a packed key is left out of listings, and every other
// key around it, packed or in hot, is listed: with and without a
// delimiter, in pages of every size.
func TestListingAroundAGrave(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("mem/packed=%v", packed), func(t *testing.T) {
			hot, cold := memPair(t)
			listAroundAGrave(t, hot, cold, packed)
		})
		t.Run(fmt.Sprintf("quorum/packed=%v", packed), func(t *testing.T) {
			var rs []blob.Store
			for range 3 {
				m, _ := memPair(t)
				rs = append(rs, m)
			}
			_, cold := memPair(t)
			listAroundAGrave(t, newQuorum(t, rs), cold, packed)
		})
	}
}

func listAroundAGrave(t *testing.T, hot, cold blob.Store, packed bool) {
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: 100, MoveTimeout: 500 * time.Millisecond, MaxClockSkew: time.Millisecond})
	for _, k := range []string{"id1/obj_1.some", "id1/obj_2.some", "id1/obj_3.some", "id1/sub/subobj_1.some", "id2/obj_4.some", "obj_5.some"} {
		mustPut(t, s, k, k)
	}
	if packed {
		time.Sleep(quorumInFlight) // older than a quorum's in-flight bound: retired
		if res := s.CompactOnce(ctxT(t)); res.Moved != 6 {
			t.Fatalf("pass: %+v", res)
		}
	}
	if err := s.Delete(ctxT(t), "id1/obj_2.some", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix, delim string
		want          []string
	}{
		{"id1/", "/", []string{"id1/obj_1.some", "id1/obj_3.some", "id1/sub/"}},
		{"id1/", "", []string{"id1/obj_1.some", "id1/obj_3.some", "id1/sub/subobj_1.some"}},
		{"", "", []string{"id1/obj_1.some", "id1/obj_3.some", "id1/sub/subobj_1.some", "id2/obj_4.some", "obj_5.some"}},
		{"", "/", []string{"id1/", "id2/", "obj_5.some"}},
	} {
		for _, size := range []int{1, 2, 3, 1000} {
			var got []string
			for o, err := range blob.All(ctxT(t), s, &blob.ListOptions{Prefix: c.prefix, Delimiter: c.delim, PageSize: size}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, o.Key)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("List(%q, %q) in pages of %d: %q, want %q", c.prefix, c.delim, size, got, c.want)
			}
		}
	}
}
