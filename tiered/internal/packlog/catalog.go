package packlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Catalog is a Store's view of the pack log, refreshed from listings of it:
// a summary of every pack (its key range and a Bloom filter of its keys, a
// few bytes per object), the packs' indexes in a cache bounded by
// Config.IndexCacheBytes and loaded from the packs when needed, every
// tombstone, and every kill the log carries. A read that missed in hot must
// see every pack whose objects were deleted from hot before the miss; see
// Sync.
//
// Memory is the summaries, the cache, and the kills: versions deleted or
// replaced whose packs were not rewritten yet.
type Catalog struct {
	cold blob.Store
	cfg  Config

	// turn holds a token while a refresh runs: refreshes are serialized, and
	// a caller waiting for one gives up with its context. (A channel, not a
	// mutex: a wait on it is one the runtime, and synctest, can see.)
	turn chan struct{}
	// refreshed is the start of the last complete refresh: written under
	// turn, read without it by reads deciding whether to list ahead.
	refreshed atomic.Pointer[time.Time]
	full      time.Time // start of the last complete full refresh

	state sync.RWMutex
	packs map[string]*Summary  // by log name
	tombs map[string][]Version // by log name
	kills map[Version]int      // how many log objects carry each kill
	// changes records, by epoch, the keys whose kills or copies changed, so
	// that a pack's dead bytes are recounted only when one of its keys
	// changed (see LiveFraction).
	epoch   uint64
	changes []keyChange

	cache *indexCache

	// damaged holds the log objects that did not parse or verify, by name
	// (under state); foreign counts names under the log prefix that are not
	// the log's, warned holds the names already logged.
	damaged map[string]damagedLog
	foreign atomic.Int64
	warned  sync.Map

	// inv is the pack log's inventory as the last full refresh read it
	// (under turn), invGen its generation ("": none yet).
	inv    *inventory
	invGen string
}

// damagedLog is a log object the catalog could not load, and the range of
// keys it may hold or kill, from the metadata its writer gave it (all keys
// when it has none).
type damagedLog struct {
	err    error
	lo, hi string
	ranged bool
	// lost says the object is missing: the inventory names it, the listing
	// does not have it, and its compactor did not remove it.
	lost bool
}

// covers reports whether d may hold or kill a version of key.
func (d damagedLog) covers(key string) bool {
	return !d.ranged || key >= d.lo && (key <= d.hi || strings.HasPrefix(key, d.hi))
}

// markDamaged records a log object that does not parse or verify, once, with
// a warning: the catalog goes on without it.
func (c *Catalog) markDamaged(ctx context.Context, name string, err error) {
	c.state.RLock()
	_, known := c.damaged[name]
	c.state.RUnlock()
	if known {
		return
	}
	d := damagedLog{err: err}
	if a, serr := c.cold.Stat(ctx, name); serr == nil {
		d.lo, d.hi, d.ranged = parseRange(a.Metadata[rangeKey])
	}
	c.state.Lock()
	c.damaged[name] = d
	c.state.Unlock()
	if _, logged := c.warned.LoadOrStore(name, true); !logged {
		c.cfg.Logger.Warn("tiered: a pack log object is damaged; reads of the keys it may hold fail until it is repaired or removed", "object", name, "error", err)
	}
}

// DamagedFor returns the error of a damaged log object that may hold or
// kill a version of key, if any.
func (c *Catalog) DamagedFor(op, key string) error {
	c.state.RLock()
	defer c.state.RUnlock()
	for name, d := range c.damaged {
		if d.covers(key) {
			return blob.Errorf(op, key, blob.ErrCorrupt, "tiered: %q may be in pack log object %s, which is damaged: %v", key, name, d.err)
		}
	}
	return nil
}

// DamagedNames returns the names of the damaged log objects, sorted.
func (c *Catalog) DamagedNames() []string {
	c.state.RLock()
	defer c.state.RUnlock()
	return slices.Sorted(maps.Keys(c.damaged))
}

// Foreign returns how many names under the log's prefix that are not the
// log's the catalog skipped.
func (c *Catalog) Foreign() int64 { return c.foreign.Load() }

// CacheSize returns the bytes and indexes the index cache holds.
func (c *Catalog) CacheSize() (bytes int64, indexes int) { return c.cache.size() }

type keyChange struct {
	epoch uint64
	key   string
}

// maxChanges bounds Catalog.changes: a pack whose count is older than the
// oldest change kept is recounted.
const maxChanges = 1 << 16

// Summary is what the catalog always holds of a pack.
type Summary struct {
	Name           string // the pack's log name
	base, size     int64  // offset of the data in the pack object; the object's size
	minKey, maxKey string
	keys           *Filter
	kills          []Version // the pack's own kills
	dataBytes      int64
	// dead is the bytes of entries a rewrite would drop, counted at epoch
	// deadAt (counted is false until the first count).
	dead    int64
	deadAt  uint64
	counted bool
}

// mayHold reports whether the pack may have an entry of key.
func (p *Summary) mayHold(key string) bool {
	return key >= p.minKey && key <= p.maxKey && p.keys.Has(key)
}

// LoadedPack is a pack's index, as the cache holds it.
type LoadedPack struct {
	Name  string // the pack's log name
	Index *Index
	Base  int64 // offset of the data in the pack object
	Size  int64 // size of the pack object
	cost  int64 // the index's size as stored: what it counts in the cache
	byKey map[string][]int
	// Checked says the entries carry CRCs (not a pack from before them).
	Checked bool
}

func newLoadedPack(name string, idx *Index, base, size, cost int64) *LoadedPack {
	lp := &LoadedPack{Name: name, Index: idx, Base: base, Size: size, cost: cost, byKey: make(map[string][]int, len(idx.Entries))}
	for i, e := range idx.Entries {
		lp.byKey[e.Key] = append(lp.byKey[e.Key], i)
	}
	return lp
}

// ErrPackGone reports that a pack the catalog names was removed (rewritten)
// before its index could be read: its successor was committed before, and
// a full refresh finds it.
var ErrPackGone = errors.New("tiered: pack removed since it was listed")

// Config is what a Catalog needs of the Store it serves, beside the cold
// store.
type Config struct {
	// Window is how far before a refresh's start the next refresh lists
	// again: 2*MoveTimeout+MaxClockSkew (see Catalog.Window).
	Window time.Duration
	// IndexCacheBytes bounds the pack indexes the catalog keeps, counted
	// at their size as stored.
	IndexCacheBytes int64
	// Logger receives the warnings and errors of damaged, lost and foreign
	// log objects (nil: slog.Default()).
	Logger *slog.Logger
	// Fence refuses a write of a pass whose lease is no longer held; the
	// catalog asks it before it writes the inventory (nil: none refused).
	Fence func(context.Context) error
	// SoleRemover reports whether ctx runs a pass of the only remover of
	// log objects, which still holds the right to remove them: no log
	// object was removed while such a pass listed the log (see
	// refreshLocked).
	SoleRemover func(context.Context) bool
	// IndexLoaded, if set, is called each time a pack's index is read from
	// cold (Stats.IndexLoads).
	IndexLoaded func()
}

// New returns a Catalog of the pack log in cold, empty until its first
// refresh.
func New(cold blob.Store, cfg Config) *Catalog {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Catalog{cold: cold, cfg: cfg, turn: make(chan struct{}, 1), packs: map[string]*Summary{}, tombs: map[string][]Version{}, kills: map[Version]int{},
		damaged: map[string]damagedLog{}, cache: newIndexCache(cfg.IndexCacheBytes)}
}

// Window is how far before a refresh's start the next refresh lists again
// (Config.Window; a Store's is 2*MoveTimeout+MaxClockSkew): a pack or
// tombstone is committed within Window/2 of the time in its name (its
// writer checks, and does nothing that depends on it otherwise), and clocks
// are assumed to agree within MaxClockSkew.
func (c *Catalog) Window() time.Duration { return c.cfg.Window }

// Sync makes sure the catalog includes every log object committed before
// since: if no refresh has started after since, one runs (concurrent callers
// share it).
func (c *Catalog) Sync(ctx context.Context, since time.Time) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	if c.LastRefresh().After(since) {
		return nil
	}
	return c.refreshLocked(ctx, false)
}

// RefreshFull relists the whole log, dropping packs that were removed.
func (c *Catalog) RefreshFull(ctx context.Context) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	return c.refreshLocked(ctx, true)
}

// retry runs f, and again after a full refresh each time it finds a pack
// removed since it was listed (a rewrite's successor is committed before
// the old pack is removed, so the refresh finds it).
func (c *Catalog) retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if !errors.Is(err, ErrPackGone) || attempt == 3 {
			return err
		}
		if err := c.RefreshFull(ctx); err != nil {
			return err
		}
	}
}

func (c *Catalog) lock(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Catalog) unlock() { <-c.turn }

// refreshLocked lists the log: the whole of it if full, else from a window
// before the last refresh began.
//
// A refresh that ends too long after the one before it began is followed by
// a full one. A tombstone is removed once no pack holds a version it kills
// (the packs that did were rewritten and removed before it), four windows
// after the time in its name (the Store's maintainPacks). A catalog that
// lists nothing for longer than that (an idle process, or one paused) can miss a
// tombstone's whole life, and a listing of the names since its last one
// says nothing of the packs it holds that were removed meanwhile: it would
// go on serving the entries the missed tombstone killed (a Stat, a listing,
// a Delete that succeeds after one that returned, as its index is cached;
// a read finds the pack gone and relists all). A tombstone named a window
// before the last refresh began or later is removed no sooner than three
// windows less MaxClockSkew after it began, so a refresh that ends within
// two windows of it found every such tombstone that the catalog had not;
// one that ends later (an incremental one begun that late is made full
// at once) is followed by a full refresh, which drops the packs removed
// meanwhile (their tombstones were removed after them), and is itself
// held to the same bound from its own start. So after an idle spell a
// catalog lists the whole log twice.
func (c *Catalog) refreshLocked(ctx context.Context, full bool) error {
	// Each further listing goes faster (what the last loaded stays), so a
	// few suffice unless listing the log takes longer than two windows
	// every time; the last then stands, rather than fail every operation.
	for attempt := 0; ; attempt++ {
		prev := c.LastRefresh()
		start := time.Now()
		if !full && start.Sub(prev) >= c.staleAfter() {
			full = true // a listing since the last one could not do
		}
		if err := c.refreshOnce(ctx, full, start); err != nil {
			return err
		}
		if prev.IsZero() || time.Since(prev) < c.staleAfter() || attempt == 3 {
			return nil
		}
		if full && c.cfg.SoleRemover != nil && c.cfg.SoleRemover(ctx) {
			// Listed by the only remover of log objects, which still
			// holds the right to remove them (a Store's: the holder of
			// shard 0's lease, whose passes, the only ones that remove
			// log objects, do not overlap), so none was removed while
			// this one listed.
			return nil
		}
		// Even a full listing that ends that late may have listed a pack
		// before its removal and reached the tombstone that let it go only
		// after that one's: the next one, held to the bound from this
		// one's start, finds the pack gone.
		full = true
	}
}

// staleAfter is how long after a refresh began the next must end for a
// listing of the names since it to be complete: two windows (see
// refreshLocked).
func (c *Catalog) staleAfter() time.Duration { return 2 * c.Window() }

// refreshOnce is one listing of refreshLocked, begun at start.
func (c *Catalog) refreshOnce(ctx context.Context, full bool, start time.Time) error {
	if c.full.IsZero() {
		full = true
	}
	after := ""
	if !full {
		after = logFloor(c.LastRefresh().Add(-c.Window()))
	}
	seen := map[string]bool{}
	for obj, err := range blob.All(ctx, c.cold, &blob.ListOptions{Prefix: Prefix, StartAfter: after}) {
		if err != nil {
			return err
		}
		seen[obj.Key] = true
		if err := c.load(ctx, obj.Key); errors.Is(err, blob.ErrCorrupt) {
			// One damaged object must not stop the others from loading.
			c.markDamaged(ctx, obj.Key, err)
		} else if err != nil {
			return err
		}
	}
	if full {
		c.state.Lock()
		for name := range c.damaged {
			if !seen[name] {
				delete(c.damaged, name) // removed or repaired
			}
		}
		for name := range c.packs {
			if !seen[name] {
				c.dropLocked(name)
			}
		}
		for name := range c.tombs {
			if !seen[name] {
				c.dropLocked(name)
			}
		}
		c.state.Unlock()
		if err := c.checkInventory(ctx, seen, start); err != nil {
			return err
		}
		c.full = start
	}
	c.refreshed.Store(&start)
	return nil
}

// LastRefresh returns when the last complete refresh began (zero: never).
func (c *Catalog) LastRefresh() time.Time {
	if t := c.refreshed.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// load reads a log object the catalog does not have yet.
func (c *Catalog) load(ctx context.Context, name string) error {
	c.state.RLock()
	_, p := c.packs[name]
	_, t := c.tombs[name]
	dl, d := c.damaged[name]
	c.state.RUnlock()
	if d && dl.lost {
		// Put back: read like any other.
		c.state.Lock()
		delete(c.damaged, name)
		c.state.Unlock()
		d = false
	}
	if p || t || d {
		return nil
	}
	_, kind, ok := ParseName(name)
	if !ok || kind != KindPack && kind != KindTombstone {
		// Not the log's: never trusted, and no reason to stop.
		if _, logged := c.warned.LoadOrStore(name, true); !logged {
			c.foreign.Add(1)
			c.cfg.Logger.Warn("tiered: skipping an object under the pack log's prefix that is not the log's", "object", name)
		}
		return nil
	}
	switch kind {
	case KindPack:
		lp, err := ReadIndex(ctx, c.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil // rewritten and removed since it was listed
		} else if err != nil {
			return err
		}
		c.indexLoaded()
		c.AddPack(lp)
	case KindTombstone:
		ks, err := readTombstone(ctx, c.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		c.AddTombstone(name, ks)
	}
	return nil
}

// Index returns the index of pack sum, from the cache or read from the
// pack; ErrPackGone if the pack was removed.
func (c *Catalog) Index(ctx context.Context, sum *Summary) (*LoadedPack, error) {
	if lp := c.cache.get(sum.Name); lp != nil {
		return lp, nil
	}
	lp, err := ReadIndex(ctx, c.cold, sum.Name)
	if errors.Is(err, blob.ErrCorrupt) {
		// Damaged since it was loaded: set aside like one found damaged
		// at load, and the lookup goes on without it.
		c.markDamaged(ctx, sum.Name, err)
		c.Drop(sum.Name)
		return nil, fmt.Errorf("%w: %s", ErrPackGone, sum.Name)
	}
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrPackGone, sum.Name)
	} else if err != nil {
		return nil, err
	}
	c.indexLoaded()
	c.cache.put(lp)
	return lp, nil
}

// indexLoaded counts a pack's index read from cold (Config.IndexLoaded).
func (c *Catalog) indexLoaded() {
	if c.cfg.IndexLoaded != nil {
		c.cfg.IndexLoaded()
	}
}

// AddPack adds a pack its writer just committed and read back.
func (c *Catalog) AddPack(lp *LoadedPack) {
	c.cache.put(lp)
	c.state.Lock()
	defer c.state.Unlock()
	if _, ok := c.packs[lp.Name]; ok {
		return
	}
	sum := &Summary{Name: lp.Name, base: lp.Base, size: lp.Size, keys: NewFilter(len(lp.Index.Entries)),
		kills: lp.Index.Kills, dataBytes: lp.Index.DataBytes}
	c.epoch++
	for i, e := range lp.Index.Entries {
		if i == 0 || e.Key < sum.minKey {
			sum.minKey = e.Key
		}
		sum.maxKey = max(sum.maxKey, e.Key)
		sum.keys.Add(e.Key)
		c.changedLocked(e.Key) // a copy of a version other packs hold
	}
	c.packs[lp.Name] = sum
	for _, k := range lp.Index.Kills {
		c.kills[k]++
		c.changedLocked(k.Key)
	}
}

// AddTombstone adds a tombstone its writer just committed, of the kills ks.
func (c *Catalog) AddTombstone(name string, ks []Version) {
	c.state.Lock()
	defer c.state.Unlock()
	if _, ok := c.tombs[name]; ok {
		return
	}
	c.epoch++
	c.tombs[name] = ks
	for _, k := range ks {
		c.kills[k]++
		c.changedLocked(k.Key)
	}
}

// changedLocked records that what packs serve of key may have changed at
// the current epoch.
func (c *Catalog) changedLocked(key string) {
	if len(c.changes) >= maxChanges {
		c.changes = slices.Delete(c.changes, 0, len(c.changes)/2)
	}
	c.changes = append(c.changes, keyChange{c.epoch, key})
}

// Drop forgets a log object that was removed.
func (c *Catalog) Drop(name string) {
	c.state.Lock()
	defer c.state.Unlock()
	c.dropLocked(name)
}

func (c *Catalog) dropLocked(name string) {
	c.epoch++
	if sum, ok := c.packs[name]; ok {
		delete(c.packs, name)
		c.cache.remove(name)
		c.unkillLocked(sum.kills)
	}
	if ks, ok := c.tombs[name]; ok {
		delete(c.tombs, name)
		c.unkillLocked(ks)
	}
}

func (c *Catalog) unkillLocked(ks []Version) {
	for _, k := range ks {
		if c.kills[k]--; c.kills[k] <= 0 {
			delete(c.kills, k)
		}
		c.changedLocked(k.Key)
	}
}

// PackedAs is what the packs say of a version a hot store shows.
type PackedAs struct {
	above bool // a pack holds a newer version of the key
	same  bool // a pack holds this version
	live  bool // a pack serves this version (it is not killed)
}

// Stale reports that hot's version is one a move packed (and so may have
// retired) or older: readers ask the packs instead.
func (p PackedAs) Stale() bool { return p.above || p.same }

// Dead reports that hot's version is no one's current version: a newer one
// was packed, or this one was packed and killed since.
func (p PackedAs) Dead() bool { return p.above || p.same && !p.live }

// PackedAs reports what packs hold of key relative to generation gen
// (generations ordered as strings, as a retirer's are).
func (c *Catalog) PackedAs(ctx context.Context, key, gen string) (out PackedAs, err error) {
	err = c.retry(ctx, func() error {
		out = PackedAs{}
		return c.entries(ctx, key, func(_ *LoadedPack, e Entry, killed bool) bool {
			switch g := e.Attrs.Generation; {
			case g > gen:
				out.above = true
			case g == gen:
				out.same = true
				out.live = out.live || !killed
			}
			return true
		})
	})
	return out, err
}

// killedLocked reports whether entry e is killed.
func (c *Catalog) killedLocked(e Entry) bool {
	return c.kills[Version{Key: e.Key, Gen: e.Attrs.Generation}] > 0
}

// MayHold reports whether a pack the catalog holds may have an entry of
// key (its key range and filter say it may), without I/O.
func (c *Catalog) MayHold(key string) bool { return len(c.holders(key)) > 0 }

// holders returns the summaries of the packs that may hold an entry of
// key, newest first.
func (c *Catalog) holders(key string) []*Summary {
	c.state.RLock()
	defer c.state.RUnlock()
	var out []*Summary
	for _, p := range c.packs {
		if p.mayHold(key) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *Summary) int { return strings.Compare(b.Name, a.Name) })
	return out
}

// entries calls f with each entry of key in the packs that hold it, newest
// pack first, and whether it is killed; f returns false to stop.
func (c *Catalog) entries(ctx context.Context, key string, f func(lp *LoadedPack, e Entry, killed bool) bool) error {
	for _, sum := range c.holders(key) {
		lp, err := c.Index(ctx, sum)
		if err != nil {
			return err
		}
		c.state.RLock()
		var es []Entry
		var dead []bool
		for _, i := range lp.byKey[key] {
			es = append(es, lp.Index.Entries[i])
			dead = append(dead, c.killedLocked(lp.Index.Entries[i]))
		}
		c.state.RUnlock()
		for i, e := range es {
			if !f(lp, e, dead[i]) {
				return nil
			}
		}
	}
	return nil
}

// Packed is a live entry of a key: the version packs serve.
type Packed struct {
	Pack  *LoadedPack
	Entry Entry
}

// Lookup returns the live entry of key, if any pack serves it. Of several
// live entries (copies of one version made by a rewrite, or a version whose
// successor is still in hot) the newest pack's is returned.
func (c *Catalog) Lookup(ctx context.Context, key string) (p Packed, found bool, err error) {
	err = c.retry(ctx, func() error {
		found = false
		return c.entries(ctx, key, func(lp *LoadedPack, e Entry, killed bool) bool {
			if killed {
				return true
			}
			p, found = Packed{lp, e}, true
			return false
		})
	})
	return p, found, err
}

// Cached returns the live entry of key from the indexes the cache holds,
// without I/O: a guess, for a read to start with while the catalog is
// brought up to date.
func (c *Catalog) Cached(key string) (Packed, bool) {
	for _, sum := range c.holders(key) {
		lp := c.cache.get(sum.Name)
		if lp == nil {
			return Packed{}, false // an older guess than the newest pack's
		}
		c.state.RLock()
		for _, i := range lp.byKey[key] {
			if e := lp.Index.Entries[i]; !c.killedLocked(e) {
				c.state.RUnlock()
				return Packed{lp, e}, true
			}
		}
		c.state.RUnlock()
	}
	return Packed{}, false
}

// Live returns the versions of key that packs still serve.
func (c *Catalog) Live(ctx context.Context, key string) (out []Version, err error) {
	err = c.retry(ctx, func() error {
		out = out[:0]
		return c.entries(ctx, key, func(_ *LoadedPack, e Entry, killed bool) bool {
			k := Version{Key: key, Gen: e.Attrs.Generation}
			if !killed && !slices.Contains(out, k) {
				out = append(out, k)
			}
			return true
		})
	})
	return out, err
}

// Holds reports whether a pack other than except holds version k.
func (c *Catalog) Holds(ctx context.Context, k Version, except string) (found bool, err error) {
	err = c.retry(ctx, func() error {
		found = false
		return c.entries(ctx, k.Key, func(lp *LoadedPack, e Entry, _ bool) bool {
			if lp.Name != except && e.Attrs.Generation == k.Gen {
				found = true
			}
			return !found
		})
	})
	return found, err
}

// Keep reports whether a rewrite of pack must keep entry e: it is not
// killed, and no newer pack holds a copy of it (a rewrite that crashed after
// its new pack landed leaves such copies; the newest is always kept).
func (c *Catalog) Keep(ctx context.Context, e Entry, pack string) (keep bool, err error) {
	c.state.RLock()
	dead := c.killedLocked(e)
	c.state.RUnlock()
	if dead {
		return false, nil
	}
	err = c.retry(ctx, func() error {
		keep = true
		return c.entries(ctx, e.Key, func(lp *LoadedPack, o Entry, _ bool) bool {
			if lp.Name > pack && o.Attrs.Generation == e.Attrs.Generation {
				keep = false
			}
			return keep
		})
	})
	return keep, err
}

// Keys returns, sorted, the first limit keys after start under prefix that
// packs serve, with their live entries. Packs are read in the order of
// their smallest key, and no further once the next one starts after the
// limit-th key found: with keys that grow over time, as names made by
// blob.NewName do, a page reads the indexes of the packs it shows.
func (c *Catalog) Keys(ctx context.Context, prefix, after string, limit int) (out []Packed, err error) {
	err = c.retry(ctx, func() error {
		out, err = c.keysOnce(ctx, prefix, after, limit)
		return err
	})
	return out, err
}

func (c *Catalog) keysOnce(ctx context.Context, prefix, after string, limit int) ([]Packed, error) {
	lo := max(prefix, after)
	c.state.RLock()
	var cands []*Summary
	for _, p := range c.packs {
		if p.maxKey > after && p.maxKey >= prefix && (prefix == "" || p.minKey <= prefix || strings.HasPrefix(p.minKey, prefix)) {
			cands = append(cands, p)
		}
	}
	c.state.RUnlock()
	slices.SortFunc(cands, func(a, b *Summary) int {
		return cmp.Or(strings.Compare(max(a.minKey, lo), max(b.minKey, lo)), strings.Compare(a.Name, b.Name))
	})
	found := map[string]Packed{}
	var sorted []string
	for i, sum := range cands {
		if len(found) >= limit && i > 0 {
			if sorted == nil {
				sorted = slices.Sorted(maps.Keys(found))
			}
			if sum.minKey > sorted[limit-1] {
				break
			}
		}
		lp, err := c.Index(ctx, sum)
		if err != nil {
			return nil, err
		}
		c.state.RLock()
		for k, is := range lp.byKey {
			if k <= after || !strings.HasPrefix(k, prefix) {
				continue
			}
			for _, j := range is {
				e := lp.Index.Entries[j]
				if c.killedLocked(e) {
					continue
				}
				if cur, ok := found[k]; !ok || lp.Name > cur.Pack.Name {
					if !ok {
						sorted = nil
					}
					found[k] = Packed{lp, e}
				}
			}
		}
		c.state.RUnlock()
	}
	keys := slices.Sorted(maps.Keys(found))
	out := make([]Packed, 0, min(len(keys), limit))
	for _, k := range keys[:min(len(keys), limit)] {
		out = append(out, found[k])
	}
	return out, nil
}

// LiveFraction returns the share of a pack's data bytes that a rewrite
// would keep. The count is kept with the pack's summary, and made again
// only when one of the pack's keys changed since (a kill, a copy in a newer
// pack), so a maintenance pass reads the indexes of the packs whose objects
// were deleted or replaced, not of every pack.
func (c *Catalog) LiveFraction(ctx context.Context, sum *Summary) (float64, error) {
	if sum.dataBytes == 0 {
		return 0, nil
	}
	c.state.RLock()
	stale := !sum.counted || len(c.changes) == 0 || c.changes[0].epoch > sum.deadAt+1
	if !stale {
		for i := len(c.changes) - 1; i >= 0 && c.changes[i].epoch > sum.deadAt; i-- {
			if sum.mayHold(c.changes[i].key) {
				stale = true
				break
			}
		}
	}
	epoch, dead := c.epoch, sum.dead
	c.state.RUnlock()
	if stale {
		var lp *LoadedPack
		err := c.retry(ctx, func() error {
			var err error
			if lp, err = c.Index(ctx, sum); err != nil {
				return err
			}
			dead = 0
			for _, e := range lp.Index.Entries {
				keep, err := c.Keep(ctx, e, sum.Name)
				if err != nil {
					return err
				}
				if !keep {
					dead += e.Len
				}
			}
			return nil
		})
		if errors.Is(err, ErrPackGone) {
			return 1, nil // removed: nothing to rewrite
		} else if err != nil {
			return 0, err
		}
		c.state.Lock()
		sum.dead, sum.deadAt, sum.counted = dead, epoch, true
		c.state.Unlock()
	}
	return float64(sum.dataBytes-dead) / float64(sum.dataBytes), nil
}

// Snapshot returns the packs and tombstones the catalog holds, by name.
func (c *Catalog) Snapshot() (packs []*Summary, tombs map[string][]Version) {
	c.state.RLock()
	defer c.state.RUnlock()
	for _, p := range c.packs {
		packs = append(packs, p)
	}
	slices.SortFunc(packs, func(a, b *Summary) int { return strings.Compare(a.Name, b.Name) })
	tombs = make(map[string][]Version, len(c.tombs))
	for n, ks := range c.tombs {
		tombs[n] = ks
	}
	return packs, tombs
}
