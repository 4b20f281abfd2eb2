package tiered

import (
	"context"
	"errors"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

// FuzzReadPackIndex feeds any bytes to the pack decoder as a pack object:
// it never panics, anything it refuses is ErrCorrupt, and an index it
// accepts keeps every entry within the pack's data and names a generation.
func FuzzReadPackIndex(f *testing.F) {
	good, err := encodePack(&packIndex{
		Entries: []packEntry{
			{Key: "a", Off: 0, Len: 3, Attrs: &blob.Attributes{Key: "a", Size: 3, Generation: "7"}},
			{Key: "b", Off: 3, Len: 2, Attrs: &blob.Attributes{Key: "b", Size: 2, Generation: "9"}},
		},
		Kills: []kill{{Key: "a", Gen: "5"}},
	}, []byte("abcde"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte("zbpack1 00000000002\n{}"))
	f.Add([]byte("zbpack2 00000000002 00000000\n{}"))
	f.Add([]byte(`zbpack1 00000000040` + "\n" + `{"entries":[{"k":"a","o":0,"n":1,"a":null}]}`))
	ctx := context.Background()
	cold, err := blob.Open(ctx, "mem://")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pack []byte) {
		if err := blob.Put(ctx, cold, "p", pack, nil); err != nil {
			t.Fatal(err)
		}
		lp, err := readPackIndex(ctx, cold, "p")
		if err != nil {
			if !errors.Is(err, blob.ErrCorrupt) {
				t.Fatalf("refused with %v, want ErrCorrupt", err)
			}
			return
		}
		if lp.base < 0 || lp.base > lp.size {
			t.Fatalf("data at %d of a %d-byte pack", lp.base, lp.size)
		}
		for _, e := range lp.index.Entries {
			if e.Attrs == nil || e.Attrs.Generation == "" || e.Off < 0 || e.Len < 0 || e.Off+e.Len > lp.index.DataBytes {
				t.Fatalf("accepted entry %+v of an index of %d data bytes", e, lp.index.DataBytes)
			}
		}
	})
}
