package tiered_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestIndexCacheIsBounded packs 600 objects into 60 packs and has a second
// process, whose index cache holds about three packs' indexes, read, Stat,
// list and delete them: every answer is right, the cache never holds more
// than its bound, and indexes are read back from their packs when needed.
// A page of a listing reads the indexes of the packs it shows, not of every
// pack (keys that grow, as blob.NewName's do).
func TestIndexCacheIsBounded(t *testing.T) {
	hot, cold := memPair(t)
	const packs, per = 60, 10
	// A short pack log window, so that packs age past it in the test and
	// maintenance may rewrite them.
	const moveTimeout = 20 * time.Millisecond
	compactor := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: per, MoveTimeout: moveTimeout, MaxClockSkew: time.Millisecond})
	model := map[string]string{}
	var keys []string
	for i := range packs * per {
		k := fmt.Sprintf("log/%05d", i)
		keys = append(keys, k)
		model[k] = fmt.Sprintf("record %d", i)
		mustPut(t, compactor, k, model[k])
		if i%per == per-1 {
			if res := compactor.CompactOnce(ctxT(t)); res.Failed != 0 || res.Moved != per {
				t.Fatalf("pass: %+v", res)
			}
		}
	}
	if left := listKeys(t, hot); len(left) != 0 {
		t.Fatalf("hot still holds %d keys", len(left))
	}
	if st := compactor.Stats(); st.Packs != packs {
		t.Fatalf("%d packs written, want %d", st.Packs, packs)
	}

	// An index of 10 entries is about 4 KB as stored: the cache holds three.
	const bound = 12 << 10
	reader := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: per, IndexCacheBytes: bound, MoveTimeout: moveTimeout, MaxClockSkew: time.Millisecond})
	checkCache := func(when string) {
		t.Helper()
		if st := reader.Stats(); st.IndexCacheBytes > bound || st.IndexesCached == 0 {
			t.Fatalf("%s: the cache holds %d bytes in %d indexes, bound %d", when, st.IndexCacheBytes, st.IndexesCached, bound)
		}
	}
	checkModel(t, reader, model, nil)
	checkCache("after reading every key")
	if st := reader.Stats(); st.IndexesCached > 3 {
		t.Fatalf("the cache holds %d indexes of 10 entries, room for 3", st.IndexesCached)
	}
	if got := listKeys(t, reader); !slices.Equal(got, keys) {
		t.Fatalf("listing: %d keys, want %d", len(got), len(keys))
	}
	checkCache("after listing")
	loads := reader.Stats().IndexLoads
	if loads < 2*packs {
		t.Errorf("%d index loads for %d packs read twice through a cache of about 3: the cache keeps more than its bound", loads, packs)
	}

	// One page of 25 keys from the start of a later pack reads the indexes of
	// the three packs it shows (and the pack whose range it starts in).
	before := reader.Stats().IndexLoads
	page, err := reader.List(ctxT(t), &blob.ListOptions{StartAfter: keys[300], PageSize: 25})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 25 || page.Objects[0].Key != keys[301] || page.NextPageToken == "" {
		t.Fatalf("page: %d objects from %v, token %q", len(page.Objects), page.Objects, page.NextPageToken)
	}
	if n := reader.Stats().IndexLoads - before; n > 4 {
		t.Errorf("a page of 25 keys read %d indexes, want at most 4 of the %d packs", n, packs)
	}

	// Deletes through the small cache, then maintenance by the compactor,
	// which rewrites or removes the packs they emptied.
	var gone []string
	for i, k := range keys {
		if i%3 != 0 {
			if err := reader.Delete(ctxT(t), k, nil); err != nil {
				t.Fatalf("delete %s: %v", k, err)
			}
			delete(model, k)
			gone = append(gone, k)
		}
	}
	checkCache("after deletes")
	checkModel(t, reader, model, gone)
	time.Sleep(5 * moveTimeout) // the packs age past the log window
	if res := compactor.CompactOnce(ctxT(t)); res.Failed != 0 {
		t.Fatalf("maintenance pass: %+v", res)
	}
	if st := compactor.Stats(); st.Rewrites != packs {
		t.Errorf("maintenance rewrote %d packs a third live, want all %d", st.Rewrites, packs)
	}
	checkModel(t, reader, model, gone)
	var want []string
	for _, k := range keys {
		if _, ok := model[k]; ok {
			want = append(want, k)
		}
	}
	if got := listKeys(t, reader); !slices.Equal(got, want) {
		t.Fatalf("listing after deletes: %d keys, want %d", len(got), len(want))
	}
	checkCache("at the end")
}
