package tiered_test

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestGravesShadowAndRetire deletes keys whose older versions were packed
// and whose newer ones are in hot (old enough to move): each Delete writes a
// grave, which hides both versions from every process (reads, Stats,
// listings with and without a delimiter) until a pass, once the graves are
// old enough, retires them: it kills the packed versions (in shared
// tombstones) and removes the graves, and the keys stay gone. A write over
// a grave brings its key back, IfNotExist included.
func TestGravesShadowAndRetire(t *testing.T) {
	hot, cold := memPair(t)
	opts := tiered.Options{PackMaxObjects: 100, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond, Concurrency: 8}
	user := manualWith(t, hot, cold, opts)
	other := manualWith(t, hot, cold, opts)
	ctx := ctxT(t)
	const n = 40
	key := func(i int) string { return fmt.Sprintf("d/%03d", i) }
	for i := range n {
		mustPut(t, user, key(i), "packed")
	}
	if res := user.CompactOnce(ctx); res.Moved != n {
		t.Fatalf("pass %+v: want %d moved", res, n)
	}
	for i := range n {
		mustPut(t, user, key(i), "newer")
		if err := user.Delete(ctx, key(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, user, "d/kept", "kept")
	if st := user.Stats(); st.Graves != n {
		t.Fatalf("stats %+v: want %d graves", st, n)
	}
	gone := func(when string) {
		t.Helper()
		checkModel(t, other, map[string]string{"d/kept": "kept"}, []string{key(0), key(n / 2), key(n - 1)})
		if got := listKeys(t, other); len(got) != 1 || got[0] != "d/kept" {
			t.Errorf("listing %s: %q", when, got)
		}
		page, err := other.List(ctx, &blob.ListOptions{Delimiter: "/"})
		if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "d/" {
			t.Errorf("listing by directory %s: %+v, %v", when, page, err)
		}
		for i := range n {
			if _, err := other.Stat(ctx, key(i)); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("stat %s of %s: %v", when, key(i), err)
			}
		}
	}
	gone("before the graves are retired")
	// Too young to retire: a pass leaves them.
	if res := user.CompactOnce(ctx); res.Failed != 0 {
		t.Fatalf("pass %+v", res)
	}
	if st := user.Stats(); st.GravesRetired != 0 {
		t.Fatalf("stats %+v: young graves retired", st)
	}
	gone("after a pass too early to retire them")

	later := manualWith(t, testkit.AgedBy(hot, tiered.GraveHold(opts.MoveTimeout, opts.MaxClockSkew)), cold, opts)
	if res := later.CompactOnce(ctx); res.Failed != 0 {
		t.Fatalf("pass %+v (%s)", res, later.Stats().LastError)
	}
	st := later.Stats()
	if st.GravesRetired != n || st.Tombstones < 1 || st.Tombstones > n/4 {
		t.Errorf("stats %+v: want %d graves retired, their kills in shared tombstones", st, n)
	}
	t.Logf("%d graves retired with %d tombstones", st.GravesRetired, st.Tombstones)
	gone("after the graves were retired")
	if got := listKeys(t, hot); len(got) != 0 {
		t.Errorf("hot holds %q", got)
	}

	// Writes over a grave.
	if err := user.Delete(ctx, "d/kept", nil); err != nil {
		t.Fatal(err)
	}
	if err := blob.Put(ctx, user, "d/kept", []byte("again"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
		t.Fatalf("IfNotExist write over a grave: %v", err)
	}
	if err := blob.Put(ctx, other, "d/kept", []byte("twice"), &blob.WriterOptions{If: blob.IfNotExist()}); !errors.Is(err, blob.ErrExists) {
		t.Fatalf("second IfNotExist write: %v", err)
	}
	checkModel(t, other, map[string]string{"d/kept": "again"}, nil)
}

// A hot tier opened as quorum://...&pool_size=N is a pool.Creator in front
// of the quorum: tiered's Creates are pooled, and a pass moves what was
// created and what was put. (Behind the pool, moves delete from hot with
// the quorum's Delete, not its retirements: tried behind the pool, the
// retirement path moved none of the objects created through it.)
func TestOverAPooledQuorumURL(t *testing.T) {
	ctx := ctxT(t)
	m := url.QueryEscape("mem://")
	hot, err := blob.Open(ctx, "quorum://?pool_size=4&straggler_timeout=50ms&replica="+m+"&replica="+m+"&replica="+m)
	if err != nil {
		t.Fatal(err)
	}
	_, cold := memPair(t)
	s, err := tiered.New(hot, nopClose{cold}, tiered.Options{After: time.Nanosecond, Manual: true, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !blob.CapabilitiesOf(s).Create {
		t.Fatal("tiered over a pooled quorum does not pool its creates")
	}
	key, err := blob.CreateBytes(ctx, s, "c/", []byte("created"), nil)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", "v")
	time.Sleep(100 * time.Millisecond) // past the quorum's in-flight bound
	if res := s.CompactOnce(ctx); res.Moved != 2 {
		t.Fatalf("pass %+v", res)
	}
	checkModel(t, s, map[string]string{key: "created", "k": "v"}, nil)
}
