package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
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
	// maintenance may rewrite them; long enough for a Delete's work under
	// the key's lock in hot (a listing of the log and an index read back
	// through the small cache) on a busy machine, which MoveTimeout bounds.
	const moveTimeout = 150 * time.Millisecond
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
	// The packs the compactor removed are not taken for lost: a new
	// process, and the reader after a full refresh, see no damage.
	fresh := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: per, MoveTimeout: moveTimeout, MaxClockSkew: time.Millisecond})
	checkModel(t, fresh, model, gone)
	if res := reader.CompactOnce(ctxT(t)); res.Failed != 0 {
		t.Fatalf("the reader's pass: %+v", res)
	}
	for _, s := range []*tiered.Store{fresh, reader, compactor} {
		if st := s.Stats(); len(st.Damaged) != 0 {
			t.Errorf("after the compactor's own removals, Stats.Damaged = %q", st.Damaged)
		}
	}
}

// gated holds each read (while holdReads is set) and each writer (while
// holdWrites is set) of key on hot, until the test lets it go.
type gated struct {
	blob.Store
	key                   string
	holdReads, holdWrites atomic.Bool
	entered               chan struct{}
	gate                  chan struct{}
}

func (g *gated) wait(key string, hold *atomic.Bool) {
	if key == g.key && hold.Load() {
		g.entered <- struct{}{}
		<-g.gate
	}
}

func (g *gated) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	g.wait(key, &g.holdReads)
	return g.Store.NewRangeReader(ctx, key, off, n)
}

func (g *gated) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	g.wait(key, &g.holdWrites)
	return g.Store.NewWriter(ctx, key, opts)
}

// listed counts the listings of the pack log on cold, and reports each.
type listed struct {
	blob.Store
	n     atomic.Int64
	calls chan struct{}
}

func (l *listed) List(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	page, err := l.Store.List(ctx, o)
	if o != nil && strings.HasPrefix(o.Prefix, markerPrefix) {
		l.n.Add(1)
		select {
		case l.calls <- struct{}{}:
		default:
		}
	}
	return page, err
}

// TestPackedReadsShareListings reads a key a pack holds. Reads in quick
// succession share one listing of the pack log; after a pause, the listing
// runs while hot is still being asked. Then a newer version is packed and
// deleted from hot while a read is held inside its hot lookup: the read
// must not serve the older pack's copy the catalog knew (the compactor
// waits before its hot deletes, so a miss seen after them needs a listing
// begun after the pack). The same for a Delete of a newer version in hot
// while an older one is packed (it waits after its tombstone).
func TestPackedReadsShareListings(t *testing.T) {
	hot, cold := memPair(t)
	g := &gated{Store: hot, key: "k", entered: make(chan struct{}, 1), gate: make(chan struct{})}
	l := &listed{Store: cold, calls: make(chan struct{}, 1)}
	// The hot-delete delay is MoveTimeout/10: 100ms.
	const delay = 100 * time.Millisecond
	opts := tiered.Options{PackMaxObjects: 10, MoveTimeout: 10 * delay, MaxClockSkew: time.Millisecond}
	compactor := manualWith(t, hot, cold, opts)
	user := manualWith(t, g, l, opts)
	ctx := ctxT(t)

	mustPut(t, compactor, "k", "v1")
	if res := compactor.CompactOnce(ctx); res.Moved != 1 {
		t.Fatalf("pass %+v", res)
	}
	read := func() chan string {
		out := make(chan string, 1)
		go func() {
			b, err := blob.ReadAll(ctx, user, "k")
			if err != nil {
				out <- "error: " + err.Error()
				return
			}
			out <- string(b)
		}()
		return out
	}
	drain := func() {
		select {
		case <-l.calls:
		default:
		}
	}
	before := l.n.Load()
	for range 10 {
		if got := <-read(); got != "v1" {
			t.Fatalf("read %q, want v1", got)
		}
	}
	if n := l.n.Load() - before; n >= 10 {
		t.Errorf("10 reads in a row listed the pack log %d times: they share listings", n)
	} else {
		t.Logf("10 reads in a row listed the pack log %d times", n)
	}

	// After a pause longer than the delay, the listing runs alongside hot.
	time.Sleep(delay)
	drain()
	g.holdReads.Store(true)
	second := read()
	<-g.entered
	select {
	case <-l.calls:
	case <-ctx.Done():
		t.Fatal("no listing of the pack log while hot was asked")
	}
	g.gate <- struct{}{}
	if got := <-second; got != "v1" {
		t.Fatalf("read %q, want v1", got)
	}

	// v2 is acknowledged; a read begins, reads v1's pack ahead and is held
	// in hot while v2 is packed and deleted from hot.
	mustPut(t, compactor, "k", "v2")
	third := read()
	<-g.entered
	if res := compactor.CompactOnce(ctx); res.Moved != 1 {
		t.Fatalf("pass %+v", res)
	}
	g.gate <- struct{}{}
	if got := <-third; got != "v2" {
		t.Fatalf("read %q, want v2 (acknowledged before the read began)", got)
	}

	// v3 overwrites v2 in hot (v2's pack still serves it, shadowed); a read
	// begins, reads v2's pack ahead and is held in hot while a Delete kills
	// v2 in the log and deletes v3 from hot: the read finds nothing.
	mustPut(t, user, "k", "v3")
	fourth := read()
	<-g.entered
	if err := compactor.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	g.holdReads.Store(false) // a miss in both tiers asks hot again
	g.gate <- struct{}{}
	if got := <-fourth; !strings.Contains(got, "not found") {
		t.Fatalf("read %q after an acknowledged delete, want not found", got)
	}
}

// TestCreateSeesAPackJustCommitted has an IfNotExist write check cold while
// a pack move of the key has committed its pack but not yet deleted the
// key from hot, and reach hot after it did: the write must fail, the key
// existed all along. (The check comes before hot is asked, so it cannot
// lean on the hot-delete delay as reads do: it lists the log.)
func TestCreateSeesAPackJustCommitted(t *testing.T) {
	hot, cold := memPair(t)
	g := &gated{Store: hot, key: "k", entered: make(chan struct{}, 1), gate: make(chan struct{})}
	opts := tiered.Options{PackMaxObjects: 10, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond}
	compactor := manualWith(t, hot, cold, opts)
	user := manualWith(t, g, cold, opts)
	ctx := ctxT(t)
	mustPut(t, compactor, "k", "v1")
	// The user's catalog is listed just now.
	if _, err := user.Stat(ctx, "other"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatal(err)
	}
	moved := make(chan tiered.PassResult, 1)
	go func() { moved <- compactor.CompactOnce(ctx) }()
	for packs := 0; packs == 0; {
		for o, err := range blob.All(ctx, cold, &blob.ListOptions{Prefix: markerPrefix + "log/"}) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(o.Key, "-p-") {
				packs++
			}
		}
	}
	g.holdWrites.Store(true)
	created := make(chan error, 1)
	go func() {
		created <- blob.Put(ctx, user, "k", []byte("v2"), &blob.WriterOptions{If: blob.IfNotExist()})
	}()
	select {
	case <-g.entered:
		if res := <-moved; res.Moved != 1 {
			t.Fatalf("pass %+v", res)
		}
		g.gate <- struct{}{}
	case err := <-created:
		created <- err
		<-moved
	}
	if err := <-created; !errors.Is(err, blob.ErrExists) {
		t.Fatalf("IfNotExist write of a key moved meanwhile: %v, want ErrExists", err)
	}
	if got, err := blob.ReadAll(ctx, user, "k"); err != nil || string(got) != "v1" {
		t.Fatalf("read %q, %v; want v1", got, err)
	}
}
