package packlog

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

// FuzzReadPackIndex feeds any bytes to the pack decoder as a pack object:
// it never panics, anything it refuses is ErrCorrupt, and an index it
// accepts keeps every entry within the pack's data and names a generation.
func FuzzReadPackIndex(f *testing.F) {
	good, err := encodePack(&Index{
		Entries: []Entry{
			{Key: "a", Off: 0, Len: 3, Attrs: &blob.Attributes{Key: "a", Size: 3, Generation: "7"}},
			{Key: "b", Off: 3, Len: 2, Attrs: &blob.Attributes{Key: "b", Size: 2, Generation: "9"}},
		},
		Kills: []Version{{Key: "a", Gen: "5"}},
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
		lp, err := ReadIndex(ctx, cold, "p")
		if err != nil {
			if !errors.Is(err, blob.ErrCorrupt) {
				t.Fatalf("refused with %v, want ErrCorrupt", err)
			}
			return
		}
		if lp.Base < 0 || lp.Base > lp.Size {
			t.Fatalf("data at %d of a %d-byte pack", lp.Base, lp.Size)
		}
		for _, e := range lp.Index.Entries {
			if e.Attrs == nil || e.Attrs.Generation == "" || e.Off < 0 || e.Len < 0 || e.Off+e.Len > lp.Index.DataBytes {
				t.Fatalf("accepted entry %+v of an index of %d data bytes", e, lp.Index.DataBytes)
			}
		}
	})
}

// encodePack lays out a pack (Head, then data), as a move does. Entry offsets are
// relative to the start of the data, which follows the index; encodePack
// sets each entry's CRC from data, and the index's size.
func encodePack(idx *Index, data []byte) ([]byte, error) {
	idx.DataBytes = int64(len(data))
	for i := range idx.Entries {
		e := &idx.Entries[i]
		if e.Off < 0 || e.Len < 0 || e.Off+e.Len > int64(len(data)) {
			return nil, fmt.Errorf("tiered: pack entry %q at %d+%d outside %d data bytes", e.Key, e.Off, e.Len, len(data))
		}
		e.CRC = crc32.Checksum(data[e.Off:e.Off+e.Len], Castagnoli)
	}
	head, err := Head(idx)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+len(data))
	return append(append(out, head...), data...), nil
}
