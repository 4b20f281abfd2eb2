package tiered

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// TestListDirOfAFilterFalsePositive lists, with a delimiter, a directory
// whose only object was deleted (a grave in hot shadows its packed entry,
// which stays live until the grave is retired) over a quorum, where hot's
// listing is filtered for stale copies. The directory's own name falls in
// the range of the pack that holds its object, and that pack's Bloom filter
// says it may hold it: filterStale asked hot for a version of the
// directory's name, found none and dropped the directory from hot's page,
// so the one the packs' page shows (from the entry the grave shadows) was
// listed without the check that hot's directories get (dirLive). The
// listing showed the directory after the Delete returned (adapters/objstore
// TestAcceptance/tiered: "id2/" listed after Delete("id2/obj_4.some")).
//
// Bloom filters are seeded per process: the directory's name is the first
// of a list whose filter, built as the catalog builds it, holds it. The run
// is on synctest's clock, so the pass's waits cost no time.
func TestListDirOfAFilterFalsePositive(t *testing.T) {
	synctest.Test(t, listDirOfAFilterFalsePositive)
}

func listDirOfAFilterFalsePositive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := []string{"a/x", "z/x"}
	dir := ""
	for i := range 1 << 22 {
		d := fmt.Sprintf("d%d/", i)
		b := packlog.NewFilter(len(keys) + 1)
		for _, k := range append(slices.Clone(keys), d+"obj") {
			b.Add(k)
		}
		if b.Has(d) {
			dir = d
			break
		}
	}
	if dir == "" {
		t.Fatal("no directory name the pack's filter holds")
	}
	open := func(u string) blob.Store {
		s, err := blob.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hot := open("quorum://?w=2&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F")
	cold := open("mem://")
	s, err := New(hot, cold, Options{After: time.Nanosecond, Manual: true, PackMaxObjects: 10, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	obj := dir + "obj"
	for _, k := range append(slices.Clone(keys), obj) {
		if err := blob.Put(ctx, s, k, []byte("v"), nil); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Millisecond) // older than After
	if res := s.CompactOnce(ctx); res.Failed != 0 || s.Stats().Packs != 1 {
		t.Fatalf("pass %+v, stats %+v: want one pack of the three keys", res, s.Stats())
	}
	if !s.catalog.MayHold(dir) {
		t.Fatalf("the pack's filter does not hold %q: the test does not test", dir)
	}
	dirs := func() []string {
		var out []string
		for o, err := range blob.All(ctx, s, &blob.ListOptions{Delimiter: "/"}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, o.Key)
		}
		return out
	}
	if got := dirs(); !slices.Contains(got, dir) {
		t.Fatalf("listing before the delete: %q; want %q in it", got, dir)
	}
	if err := s.Delete(ctx, obj, nil); err != nil {
		t.Fatal(err)
	}
	if got := dirs(); slices.Contains(got, dir) {
		t.Errorf("listing after the delete of %q: %q", obj, got)
	}
}
