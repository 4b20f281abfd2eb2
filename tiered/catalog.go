package tiered

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// logPrefix starts the names, in cold, of packs and tombstones: the pack
// log. A name is the log prefix, the wall-clock time it was chosen at (20
// decimal digits of Unix nanoseconds, so names sort by it), a kind and a
// random suffix. Like move markers, these names are hidden from listings and
// refused as user keys.
const logPrefix = markerPrefix + "log/"

const (
	kindPack = "p"
	kindTomb = "t"
)

// A pack is a header, its index (JSON), then the objects' bytes one after
// another. The header is packMagic, the index's length in 11 decimal
// digits, a space, the index's CRC32C in 8 hex digits, and a newline (29
// bytes). Packs written before checksums (packMagicV1, a 20-byte header
// without the CRC) are still read, their entries unverified.
const (
	packMagic      = "zbpack2 "
	packHeaderSize = 29
	packMagicV1    = "zbpack1 "
	packHeaderV1   = 20
	// indexPeek is what a first read of a pack asks for: the header and, for
	// packs of up to a few thousand objects, the whole index.
	indexPeek = 1 << 20
	// maxIndexLen bounds the index length a header may claim: a damaged
	// header must not make a reader allocate what it says.
	maxIndexLen = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packEntry is one object in a pack: where its bytes are (Off from the start
// of the pack's data) and the attributes it had in hot, Generation included:
// the generation it was moved at, which users keep seeing.
type packEntry struct {
	Key   string           `json:"k"`
	Off   int64            `json:"o"`
	Len   int64            `json:"n"`
	Attrs *blob.Attributes `json:"a"`
	// CRC is the CRC32C of the entry's bytes (set by encodePack), which
	// every read of the entry verifies; absent from packs written before
	// checksums.
	CRC uint32 `json:"c,omitempty"`
}

// kill names a version of a key that no pack may serve any more: it was
// deleted, or overwritten and moved again. Kills are by generation, whatever
// pack holds the version, so a copy made by a pack rewrite is killed as well
// as the original.
type kill struct {
	Key string `json:"k"`
	Gen string `json:"g"`
}

// packIndex is a pack's index: its entries, and the older versions of their
// keys that the pack supersedes.
type packIndex struct {
	Entries []packEntry `json:"entries"`
	Kills   []kill      `json:"kills,omitempty"`
	// DataBytes is the size of all entries' bytes.
	DataBytes int64 `json:"data_bytes"`
}

// logName returns a new name of kind in the pack log, chosen at t.
// logNow is the time for a new log name: the clock, or just after the last
// name this process chose if the clock has not moved past it.
func (s *Store) logNow() time.Time {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	t := time.Now()
	if !t.After(s.lastLog) {
		t = s.lastLog.Add(time.Nanosecond)
	}
	s.lastLog = t
	return t
}

func logName(kind string, t time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%020d-%s-%s", logPrefix, t.UnixNano(), kind, hex.EncodeToString(b[:]))
}

// logTime returns the time a log name was chosen at, and its kind.
func logTime(name string) (time.Time, string, bool) {
	rest, ok := strings.CutPrefix(name, logPrefix)
	if !ok || len(rest) < 23 || rest[20] != '-' {
		return time.Time{}, "", false
	}
	ns, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, ns), rest[21:22], true
}

// logFloor is the smallest log name chosen at or after t.
func logFloor(t time.Time) string {
	if t.UnixNano() <= 0 {
		return ""
	}
	return fmt.Sprintf("%s%020d", logPrefix, t.UnixNano())
}

// encodePack lays out a pack: header, index, data. Entry offsets are
// relative to the start of the data, which follows the index; encodePack
// sets each entry's CRC from data, and the index's size.
func encodePack(idx *packIndex, data []byte) ([]byte, error) {
	idx.DataBytes = int64(len(data))
	for i := range idx.Entries {
		e := &idx.Entries[i]
		if e.Off < 0 || e.Len < 0 || e.Off+e.Len > int64(len(data)) {
			return nil, fmt.Errorf("tiered: pack entry %q at %d+%d outside %d data bytes", e.Key, e.Off, e.Len, len(data))
		}
		e.CRC = crc32.Checksum(data[e.Off:e.Off+e.Len], castagnoli)
	}
	js, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	hdr := fmt.Sprintf("%s%011d %08x\n", packMagic, len(js), crc32.Checksum(js, castagnoli))
	out := make([]byte, 0, len(hdr)+len(js)+len(data))
	out = append(out, hdr...)
	out = append(out, js...)
	return append(out, data...), nil
}

// packHeader is a pack's parsed header.
type packHeader struct {
	size    int   // of the header
	n       int   // of the index
	crc     int64 // of the index; -1 for a pack without checksums
	checked bool  // its entries carry CRCs
}

// parsePackHeader parses the header at the start of head.
func parsePackHeader(head []byte) (packHeader, error) {
	digits := func(b []byte, base int) (int64, bool) {
		v, err := strconv.ParseInt(string(b), base, 64)
		for _, c := range b {
			if !(c >= '0' && c <= '9' || base == 16 && c >= 'a' && c <= 'f') {
				return 0, false
			}
		}
		return v, err == nil
	}
	switch {
	case len(head) >= packHeaderSize && bytes.HasPrefix(head, []byte(packMagic)) &&
		head[19] == ' ' && head[packHeaderSize-1] == '\n':
		n, ok1 := digits(head[8:19], 10)
		crc, ok2 := digits(head[20:28], 16)
		if ok1 && ok2 {
			return packHeader{size: packHeaderSize, n: int(n), crc: crc, checked: true}, nil
		}
	case len(head) >= packHeaderV1 && bytes.HasPrefix(head, []byte(packMagicV1)) && head[packHeaderV1-1] == '\n':
		if n, ok := digits(head[8:19], 10); ok {
			return packHeader{size: packHeaderV1, n: int(n), crc: -1}, nil
		}
	}
	return packHeader{}, errors.New("malformed pack header")
}

// validate checks what a pack's index says against itself: every entry
// names a key, a generation and a range within the pack's data, and every
// kill a key and a generation. It refuses what would otherwise panic or
// serve bytes from outside an entry.
func (idx *packIndex) validate() error {
	if idx.DataBytes < 0 {
		return fmt.Errorf("negative data size %d", idx.DataBytes)
	}
	for i, e := range idx.Entries {
		switch {
		case blob.ValidateKey(driver.OpRead, e.Key) != nil:
			return fmt.Errorf("entry %d: bad key %q", i, e.Key)
		case e.Attrs == nil || e.Attrs.Generation == "":
			return fmt.Errorf("entry %d (%q): no attributes or generation", i, e.Key)
		case e.Off < 0 || e.Len < 0 || e.Off > idx.DataBytes || e.Len > idx.DataBytes-e.Off:
			return fmt.Errorf("entry %d (%q): range %d+%d outside %d data bytes", i, e.Key, e.Off, e.Len, idx.DataBytes)
		}
	}
	for i, k := range idx.Kills {
		if k.Key == "" || k.Gen == "" {
			return fmt.Errorf("kill %d: no key or generation", i)
		}
	}
	return nil
}

// dataStart is where a pack's data begins, given its header and index.
func dataStart(h packHeader) int64 { return int64(h.size + h.n) }

// catalog is a Store's view of the pack log, refreshed from listings of it:
// a summary of every pack (its key range and a Bloom filter of its keys, a
// few bytes per object), the packs' indexes in a cache bounded by
// Options.IndexCacheBytes and loaded from the packs when needed, every
// tombstone, and every kill the log carries. A read that missed in hot must
// see every pack whose objects were deleted from hot before the miss; see
// sync.
//
// Memory is the summaries, the cache, and the kills: versions deleted or
// replaced whose packs were not rewritten yet.
type catalog struct {
	s *Store

	// turn holds a token while a refresh runs: refreshes are serialized, and
	// a caller waiting for one gives up with its context. (A channel, not a
	// mutex: a wait on it is one the runtime, and synctest, can see.)
	turn chan struct{}
	// refreshed is the start of the last complete refresh: written under
	// turn, read without it by reads deciding whether to list ahead.
	refreshed atomic.Pointer[time.Time]
	full      time.Time // start of the last complete full refresh

	state sync.RWMutex
	packs map[string]*packSummary // by log name
	tombs map[string][]kill       // by log name
	kills map[kill]int            // how many log objects carry each kill
	// changes records, by epoch, the keys whose kills or copies changed, so
	// that a pack's dead bytes are recounted only when one of its keys
	// changed (see liveFraction).
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

// rangeKey is the metadata of a pack or tombstone that names the range of
// keys it holds or kills: base64url of the first and last keys, each cut to
// rangeKeyLen bytes, joined by ".". It lets a damaged one be blamed for the
// keys it may hold, and no others.
const (
	rangeKey    = "zonalblob-tiered-range"
	rangeKeyLen = 256
)

// logMetadata returns the metadata of a log object holding or killing
// versions of keys.
func logMetadata(keys []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	lo, hi := slices.Min(keys), slices.Max(keys)
	cut := func(k string) string {
		if len(k) > rangeKeyLen {
			k = k[:rangeKeyLen]
		}
		return base64.RawURLEncoding.EncodeToString([]byte(k))
	}
	return map[string]string{rangeKey: cut(lo) + "." + cut(hi)}
}

// parseRange reads a rangeKey value.
func parseRange(v string) (lo, hi string, ok bool) {
	a, b, found := strings.Cut(v, ".")
	l, err1 := base64.RawURLEncoding.DecodeString(a)
	h, err2 := base64.RawURLEncoding.DecodeString(b)
	if !found || err1 != nil || err2 != nil {
		return "", "", false
	}
	return string(l), string(h), true
}

// indexKeys returns the keys an index holds or kills.
func indexKeys(idx *packIndex) []string {
	keys := make([]string, 0, len(idx.Entries)+len(idx.Kills))
	for _, e := range idx.Entries {
		keys = append(keys, e.Key)
	}
	for _, k := range idx.Kills {
		keys = append(keys, k.Key)
	}
	return keys
}

// markDamaged records a log object that does not parse or verify, once, with
// a warning: the catalog goes on without it.
func (c *catalog) markDamaged(ctx context.Context, name string, err error) {
	c.state.RLock()
	_, known := c.damaged[name]
	c.state.RUnlock()
	if known {
		return
	}
	d := damagedLog{err: err}
	if a, serr := c.s.cold.Stat(ctx, name); serr == nil {
		d.lo, d.hi, d.ranged = parseRange(a.Metadata[rangeKey])
	}
	c.state.Lock()
	c.damaged[name] = d
	c.state.Unlock()
	if _, logged := c.warned.LoadOrStore(name, true); !logged {
		c.s.opts.Logger.Warn("tiered: a pack log object is damaged; reads of the keys it may hold fail until it is repaired or removed", "object", name, "error", err)
	}
}

// damagedFor returns the error of a damaged log object that may hold or
// kill a version of key, if any.
func (c *catalog) damagedFor(op, key string) error {
	c.state.RLock()
	defer c.state.RUnlock()
	for name, d := range c.damaged {
		if d.covers(key) {
			return blob.Errorf(op, key, blob.ErrCorrupt, "tiered: %q may be in pack log object %s, which is damaged: %v", key, name, d.err)
		}
	}
	return nil
}

// damagedNames returns the names of the damaged log objects, sorted.
func (c *catalog) damagedNames() []string {
	c.state.RLock()
	defer c.state.RUnlock()
	return slices.Sorted(maps.Keys(c.damaged))
}

type keyChange struct {
	epoch uint64
	key   string
}

// maxChanges bounds catalog.changes: a pack whose count is older than the
// oldest change kept is recounted.
const maxChanges = 1 << 16

// packSummary is what the catalog always holds of a pack.
type packSummary struct {
	name           string
	base, size     int64 // offset of the data in the pack object; the object's size
	minKey, maxKey string
	keys           *bloom
	kills          []kill // the pack's own kills
	dataBytes      int64
	// dead is the bytes of entries a rewrite would drop, counted at epoch
	// deadAt (counted is false until the first count).
	dead    int64
	deadAt  uint64
	counted bool
}

// mayHold reports whether the pack may have an entry of key.
func (p *packSummary) mayHold(key string) bool {
	return key >= p.minKey && key <= p.maxKey && p.keys.has(key)
}

// loadedPack is a pack's index, as the cache holds it.
type loadedPack struct {
	name  string
	index *packIndex
	base  int64 // offset of the data in the pack object
	size  int64 // size of the pack object
	cost  int64 // the index's size as stored: what it counts in the cache
	byKey map[string][]int
	// checked says the entries carry CRCs (not a pack from before them).
	checked bool
}

func newLoadedPack(name string, idx *packIndex, base, size, cost int64) *loadedPack {
	lp := &loadedPack{name: name, index: idx, base: base, size: size, cost: cost, byKey: make(map[string][]int, len(idx.Entries))}
	for i, e := range idx.Entries {
		lp.byKey[e.Key] = append(lp.byKey[e.Key], i)
	}
	return lp
}

// errPackGone reports that a pack the catalog names was removed (rewritten)
// before its index could be read: its successor was committed before, and
// a full refresh finds it.
var errPackGone = errors.New("tiered: pack removed since it was listed")

func newCatalog(s *Store) *catalog {
	return &catalog{s: s, turn: make(chan struct{}, 1), packs: map[string]*packSummary{}, tombs: map[string][]kill{}, kills: map[kill]int{},
		damaged: map[string]damagedLog{}, cache: newIndexCache(s.opts.IndexCacheBytes)}
}

// window is how far before a refresh's start the next refresh lists again: a
// pack or tombstone is committed within window/2 of the time in its name
// (its writer checks, and does nothing that depends on it otherwise), and
// clocks are assumed to agree within MaxClockSkew.
func (c *catalog) window() time.Duration { return 2*c.s.opts.MoveTimeout + c.s.opts.MaxClockSkew }

// sync makes sure the catalog includes every log object committed before
// since: if no refresh has started after since, one runs (concurrent callers
// share it).
func (c *catalog) sync(ctx context.Context, since time.Time) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	if c.lastRefresh().After(since) {
		return nil
	}
	return c.refreshLocked(ctx, false)
}

// refreshFull relists the whole log, dropping packs that were removed.
func (c *catalog) refreshFull(ctx context.Context) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	return c.refreshLocked(ctx, true)
}

// retry runs f, and again after a full refresh each time it finds a pack
// removed since it was listed (a rewrite's successor is committed before
// the old pack is removed, so the refresh finds it).
func (c *catalog) retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if !errors.Is(err, errPackGone) || attempt == 3 {
			return err
		}
		if err := c.refreshFull(ctx); err != nil {
			return err
		}
	}
}

func (c *catalog) lock(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *catalog) unlock() { <-c.turn }

// refreshLocked lists the log: the whole of it if full, else from a window
// before the last refresh began.
//
// A refresh that ends too long after the one before it began is followed by
// a full one. A tombstone is removed once no pack holds a version it kills
// (the packs that did were rewritten and removed before it), four windows
// after the time in its name (maintainPacks). A catalog that lists nothing
// for longer than that (an idle process, or one paused) can miss a
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
func (c *catalog) refreshLocked(ctx context.Context, full bool) error {
	// Each further listing goes faster (what the last loaded stays), so a
	// few suffice unless listing the log takes longer than two windows
	// every time; the last then stands, rather than fail every operation.
	for attempt := 0; ; attempt++ {
		prev := c.lastRefresh()
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
		if shard, inPass := passShard(ctx); full && inPass && shard == 0 && c.s.fence(ctx) == nil {
			// Listed by the holder of shard 0's lease, which still holds
			// it: log objects are removed only by shard 0's passes
			// (maintainPacks), which do not overlap (see the lease), so
			// none was removed while this one listed.
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
func (c *catalog) staleAfter() time.Duration { return 2 * c.window() }

// refreshOnce is one listing of refreshLocked, begun at start.
func (c *catalog) refreshOnce(ctx context.Context, full bool, start time.Time) error {
	if c.full.IsZero() {
		full = true
	}
	after := ""
	if !full {
		after = logFloor(c.lastRefresh().Add(-c.window()))
	}
	seen := map[string]bool{}
	for obj, err := range blob.All(ctx, c.s.cold, &blob.ListOptions{Prefix: logPrefix, StartAfter: after}) {
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

// lastRefresh returns when the last complete refresh began (zero: never).
func (c *catalog) lastRefresh() time.Time {
	if t := c.refreshed.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// load reads a log object the catalog does not have yet.
func (c *catalog) load(ctx context.Context, name string) error {
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
	_, kind, ok := logTime(name)
	if !ok || kind != kindPack && kind != kindTomb {
		// Not the log's: never trusted, and no reason to stop.
		if _, logged := c.warned.LoadOrStore(name, true); !logged {
			c.foreign.Add(1)
			c.s.opts.Logger.Warn("tiered: skipping an object under the pack log's prefix that is not the log's", "object", name)
		}
		return nil
	}
	switch kind {
	case kindPack:
		lp, err := readPackIndex(ctx, c.s.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil // rewritten and removed since it was listed
		} else if err != nil {
			return err
		}
		c.s.stats.indexLoads.Add(1)
		c.addPack(lp)
	case kindTomb:
		ks, err := readTombstone(ctx, c.s.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		c.addTomb(name, ks)
	}
	return nil
}

// index returns the index of pack name, from the cache or read from the
// pack; errPackGone if the pack was removed.
func (c *catalog) index(ctx context.Context, sum *packSummary) (*loadedPack, error) {
	if lp := c.cache.get(sum.name); lp != nil {
		return lp, nil
	}
	lp, err := readPackIndex(ctx, c.s.cold, sum.name)
	if errors.Is(err, blob.ErrCorrupt) {
		// Damaged since it was loaded: set aside like one found damaged
		// at load, and the lookup goes on without it.
		c.markDamaged(ctx, sum.name, err)
		c.drop(sum.name)
		return nil, fmt.Errorf("%w: %s", errPackGone, sum.name)
	}
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", errPackGone, sum.name)
	} else if err != nil {
		return nil, err
	}
	c.s.stats.indexLoads.Add(1)
	c.cache.put(lp)
	return lp, nil
}

func (c *catalog) addPack(lp *loadedPack) {
	c.cache.put(lp)
	c.state.Lock()
	defer c.state.Unlock()
	if _, ok := c.packs[lp.name]; ok {
		return
	}
	sum := &packSummary{name: lp.name, base: lp.base, size: lp.size, keys: newBloom(len(lp.index.Entries)),
		kills: lp.index.Kills, dataBytes: lp.index.DataBytes}
	c.epoch++
	for i, e := range lp.index.Entries {
		if i == 0 || e.Key < sum.minKey {
			sum.minKey = e.Key
		}
		sum.maxKey = max(sum.maxKey, e.Key)
		sum.keys.add(e.Key)
		c.changedLocked(e.Key) // a copy of a version other packs hold
	}
	c.packs[lp.name] = sum
	for _, k := range lp.index.Kills {
		c.kills[k]++
		c.changedLocked(k.Key)
	}
}

func (c *catalog) addTomb(name string, ks []kill) {
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
func (c *catalog) changedLocked(key string) {
	if len(c.changes) >= maxChanges {
		c.changes = slices.Delete(c.changes, 0, len(c.changes)/2)
	}
	c.changes = append(c.changes, keyChange{c.epoch, key})
}

// drop forgets a log object that was removed.
func (c *catalog) drop(name string) {
	c.state.Lock()
	defer c.state.Unlock()
	c.dropLocked(name)
}

func (c *catalog) dropLocked(name string) {
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

func (c *catalog) unkillLocked(ks []kill) {
	for _, k := range ks {
		if c.kills[k]--; c.kills[k] <= 0 {
			delete(c.kills, k)
		}
		c.changedLocked(k.Key)
	}
}

// packedAs is what the packs say of a version a hot store shows.
type packedAs struct {
	above bool // a pack holds a newer version of the key
	same  bool // a pack holds this version
	live  bool // a pack serves this version (it is not killed)
}

// stale reports that hot's version is one a move packed (and so may have
// retired) or older: readers ask the packs instead.
func (p packedAs) stale() bool { return p.above || p.same }

// dead reports that hot's version is no one's current version: a newer one
// was packed, or this one was packed and killed since.
func (p packedAs) dead() bool { return p.above || p.same && !p.live }

// packedAs reports what packs hold of key relative to generation gen
// (generations ordered as strings, as a retirer's are).
func (c *catalog) packedAs(ctx context.Context, key, gen string) (out packedAs, err error) {
	err = c.retry(ctx, func() error {
		out = packedAs{}
		return c.entries(ctx, key, func(_ *loadedPack, e packEntry, killed bool) bool {
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

// killed reports whether entry e is killed.
func (c *catalog) killedLocked(e packEntry) bool {
	return c.kills[kill{Key: e.Key, Gen: e.Attrs.Generation}] > 0
}

// holders returns the summaries of the packs that may hold an entry of
// key, newest first.
func (c *catalog) holders(key string) []*packSummary {
	c.state.RLock()
	defer c.state.RUnlock()
	var out []*packSummary
	for _, p := range c.packs {
		if p.mayHold(key) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *packSummary) int { return strings.Compare(b.name, a.name) })
	return out
}

// entries calls f with each entry of key in the packs that hold it, newest
// pack first, and whether it is killed; f returns false to stop.
func (c *catalog) entries(ctx context.Context, key string, f func(lp *loadedPack, e packEntry, killed bool) bool) error {
	for _, sum := range c.holders(key) {
		lp, err := c.index(ctx, sum)
		if err != nil {
			return err
		}
		c.state.RLock()
		var es []packEntry
		var dead []bool
		for _, i := range lp.byKey[key] {
			es = append(es, lp.index.Entries[i])
			dead = append(dead, c.killedLocked(lp.index.Entries[i]))
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

// packed is a live entry of a key: the version packs serve.
type packed struct {
	pack  *loadedPack
	entry packEntry
}

// lookup returns the live entry of key, if any pack serves it. Of several
// live entries (copies of one version made by a rewrite, or a version whose
// successor is still in hot) the newest pack's is returned.
func (c *catalog) lookup(ctx context.Context, key string) (p packed, found bool, err error) {
	err = c.retry(ctx, func() error {
		found = false
		return c.entries(ctx, key, func(lp *loadedPack, e packEntry, killed bool) bool {
			if killed {
				return true
			}
			p, found = packed{lp, e}, true
			return false
		})
	})
	return p, found, err
}

// cached returns the live entry of key from the indexes the cache holds,
// without I/O: a guess, for a read to start with while the catalog is
// brought up to date.
func (c *catalog) cached(key string) (packed, bool) {
	for _, sum := range c.holders(key) {
		lp := c.cache.get(sum.name)
		if lp == nil {
			return packed{}, false // an older guess than the newest pack's
		}
		c.state.RLock()
		for _, i := range lp.byKey[key] {
			if e := lp.index.Entries[i]; !c.killedLocked(e) {
				c.state.RUnlock()
				return packed{lp, e}, true
			}
		}
		c.state.RUnlock()
	}
	return packed{}, false
}

// live returns the versions of key that packs still serve.
func (c *catalog) live(ctx context.Context, key string) (out []kill, err error) {
	err = c.retry(ctx, func() error {
		out = out[:0]
		return c.entries(ctx, key, func(_ *loadedPack, e packEntry, killed bool) bool {
			k := kill{Key: key, Gen: e.Attrs.Generation}
			if !killed && !slices.Contains(out, k) {
				out = append(out, k)
			}
			return true
		})
	})
	return out, err
}

// holds reports whether a pack other than except holds version k.
func (c *catalog) holds(ctx context.Context, k kill, except string) (found bool, err error) {
	err = c.retry(ctx, func() error {
		found = false
		return c.entries(ctx, k.Key, func(lp *loadedPack, e packEntry, _ bool) bool {
			if lp.name != except && e.Attrs.Generation == k.Gen {
				found = true
			}
			return !found
		})
	})
	return found, err
}

// keep reports whether a rewrite of pack must keep entry e: it is not
// killed, and no newer pack holds a copy of it (a rewrite that crashed after
// its new pack landed leaves such copies; the newest is always kept).
func (c *catalog) keep(ctx context.Context, e packEntry, pack string) (keep bool, err error) {
	c.state.RLock()
	dead := c.killedLocked(e)
	c.state.RUnlock()
	if dead {
		return false, nil
	}
	err = c.retry(ctx, func() error {
		keep = true
		return c.entries(ctx, e.Key, func(lp *loadedPack, o packEntry, _ bool) bool {
			if lp.name > pack && o.Attrs.Generation == e.Attrs.Generation {
				keep = false
			}
			return keep
		})
	})
	return keep, err
}

// keys returns, sorted, the first limit keys after start under prefix that
// packs serve, with their live entries. Packs are read in the order of
// their smallest key, and no further once the next one starts after the
// limit-th key found: with keys that grow over time, as names made by
// blob.NewName do, a page reads the indexes of the packs it shows.
func (c *catalog) keys(ctx context.Context, prefix, after string, limit int) (out []packed, err error) {
	err = c.retry(ctx, func() error {
		out, err = c.keysOnce(ctx, prefix, after, limit)
		return err
	})
	return out, err
}

func (c *catalog) keysOnce(ctx context.Context, prefix, after string, limit int) ([]packed, error) {
	lo := max(prefix, after)
	c.state.RLock()
	var cands []*packSummary
	for _, p := range c.packs {
		if p.maxKey > after && p.maxKey >= prefix && (prefix == "" || p.minKey <= prefix || strings.HasPrefix(p.minKey, prefix)) {
			cands = append(cands, p)
		}
	}
	c.state.RUnlock()
	slices.SortFunc(cands, func(a, b *packSummary) int {
		return cmp.Or(strings.Compare(max(a.minKey, lo), max(b.minKey, lo)), strings.Compare(a.name, b.name))
	})
	found := map[string]packed{}
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
		lp, err := c.index(ctx, sum)
		if err != nil {
			return nil, err
		}
		c.state.RLock()
		for k, is := range lp.byKey {
			if k <= after || !strings.HasPrefix(k, prefix) {
				continue
			}
			for _, j := range is {
				e := lp.index.Entries[j]
				if c.killedLocked(e) {
					continue
				}
				if cur, ok := found[k]; !ok || lp.name > cur.pack.name {
					if !ok {
						sorted = nil
					}
					found[k] = packed{lp, e}
				}
			}
		}
		c.state.RUnlock()
	}
	keys := slices.Sorted(maps.Keys(found))
	out := make([]packed, 0, min(len(keys), limit))
	for _, k := range keys[:min(len(keys), limit)] {
		out = append(out, found[k])
	}
	return out, nil
}

// liveFraction returns the share of a pack's data bytes that a rewrite
// would keep. The count is kept with the pack's summary, and made again
// only when one of the pack's keys changed since (a kill, a copy in a newer
// pack), so a maintenance pass reads the indexes of the packs whose objects
// were deleted or replaced, not of every pack.
func (c *catalog) liveFraction(ctx context.Context, sum *packSummary) (float64, error) {
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
		var lp *loadedPack
		err := c.retry(ctx, func() error {
			var err error
			if lp, err = c.index(ctx, sum); err != nil {
				return err
			}
			dead = 0
			for _, e := range lp.index.Entries {
				keep, err := c.keep(ctx, e, sum.name)
				if err != nil {
					return err
				}
				if !keep {
					dead += e.Len
				}
			}
			return nil
		})
		if errors.Is(err, errPackGone) {
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

// snapshot returns the packs and tombstones the catalog holds, by name.
func (c *catalog) snapshot() (packs []*packSummary, tombs map[string][]kill) {
	c.state.RLock()
	defer c.state.RUnlock()
	for _, p := range c.packs {
		packs = append(packs, p)
	}
	slices.SortFunc(packs, func(a, b *packSummary) int { return strings.Compare(a.name, b.name) })
	tombs = make(map[string][]kill, len(c.tombs))
	for n, ks := range c.tombs {
		tombs[n] = ks
	}
	return packs, tombs
}

// readPackIndex reads the header and index of a pack, and checks them: a
// pack that does not parse or verify is ErrCorrupt, naming it.
func readPackIndex(ctx context.Context, cold blob.Store, name string) (*loadedPack, error) {
	r, err := cold.NewRangeReader(ctx, name, 0, indexPeek)
	if err != nil {
		return nil, err
	}
	head, err := io.ReadAll(r)
	size := r.Attributes().Size
	r.Close()
	if err != nil {
		return nil, err
	}
	corrupt := func(format string, args ...any) error {
		return blob.Errorf(driver.OpRead, name, blob.ErrCorrupt, "tiered: pack "+name+": "+format, args...)
	}
	h, err := parsePackHeader(head)
	if err != nil {
		return nil, corrupt("%v", err)
	}
	if h.n > maxIndexLen || int64(h.size+h.n) > size {
		return nil, corrupt("header claims a %d-byte index in a %d-byte pack", h.n, size)
	}
	js := head[h.size:]
	if len(js) < h.n {
		rest, err := readRange(ctx, cold, name, int64(len(head)), int64(h.n-len(js)))
		if err != nil {
			return nil, err
		}
		js = append(js, rest...)
	}
	if len(js) < h.n {
		return nil, corrupt("index truncated: %d of %d bytes", len(js), h.n)
	}
	js = js[:h.n]
	if h.crc >= 0 && int64(crc32.Checksum(js, castagnoli)) != h.crc {
		return nil, corrupt("index checksum mismatch")
	}
	var idx packIndex
	if err := json.Unmarshal(js, &idx); err != nil {
		return nil, corrupt("malformed index: %v", err)
	}
	if err := idx.validate(); err != nil {
		return nil, corrupt("%v", err)
	}
	lp := newLoadedPack(name, &idx, dataStart(h), size, int64(h.n))
	lp.checked = h.checked
	return lp, nil
}

// tombCRCKey is the metadata of a tombstone that holds its CRC32C.
const tombCRCKey = "zonalblob-tiered-crc"

// readTombstone reads and checks a tombstone: its CRC32C if its writer gave
// one, and every kill naming a key and a generation; ErrCorrupt otherwise.
func readTombstone(ctx context.Context, cold blob.Store, name string) ([]kill, error) {
	// Readers of some stores carry no metadata: the CRC comes from a Stat
	// (a tombstone's bytes never change under its name).
	a, err := cold.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	md := a.Metadata
	b, err := blob.ReadAll(ctx, cold, name)
	if err != nil {
		return nil, err
	}
	corrupt := func(format string, args ...any) error {
		return blob.Errorf(driver.OpRead, name, blob.ErrCorrupt, "tiered: tombstone "+name+": "+format, args...)
	}
	if v, ok := md[tombCRCKey]; ok && v != fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli)) {
		return nil, corrupt("checksum mismatch")
	}
	var ks []kill
	if err := json.Unmarshal(b, &ks); err != nil {
		return nil, corrupt("malformed: %v", err)
	}
	for i, k := range ks {
		if k.Key == "" || k.Gen == "" {
			return nil, corrupt("kill %d names no key or generation", i)
		}
	}
	return ks, nil
}

func readRange(ctx context.Context, s blob.Store, key string, off, n int64) ([]byte, error) {
	r, err := s.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// wholeEntryRead: a range read of a checksummed entry up to this size reads
// the whole entry, to verify it; of a larger one, only its length is.
const wholeEntryRead = 4 << 20

// readPacked reads a range of a packed object: one ranged read of its pack.
// What it serves is verified: the length of every read, and the entry's
// CRC32C for a read of the whole entry (checked at its end, before io.EOF)
// or of part of an entry of up to wholeEntryRead bytes (the whole entry is
// read). Bytes that do not verify are ErrCorrupt, naming the key and pack.
func (s *Store) readPacked(ctx context.Context, p packed, offset, length int64) (blob.Reader, error) {
	e := p.entry
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, e.Key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	n := max(e.Len-offset, 0)
	if length >= 0 {
		n = min(n, length)
	}
	a := *e.Attrs
	if end := p.pack.base + e.Off + e.Len; end > p.pack.size {
		return nil, s.corruptEntry(p, "ends at byte %d of a %d-byte pack", end, p.pack.size)
	}
	if n == 0 {
		return &packedReader{r: io.NopCloser(bytes.NewReader(nil)), attrs: &a}, nil
	}
	at := p.pack.base + e.Off
	switch {
	case p.pack.checked && offset == 0 && n == e.Len:
		r, err := s.cold.NewRangeReader(ctx, p.pack.name, at, n)
		if err != nil {
			return nil, err
		}
		return &packedReader{r: &verifier{s: s, r: r, p: p, want: n, crc: crc32.New(castagnoli)}, attrs: &a}, nil
	case p.pack.checked && e.Len <= wholeEntryRead:
		b, err := readRange(ctx, s.cold, p.pack.name, at, e.Len)
		if err != nil {
			return nil, err
		}
		if int64(len(b)) != e.Len {
			return nil, s.corruptEntry(p, "read %d of its %d bytes", len(b), e.Len)
		}
		if crc32.Checksum(b, castagnoli) != e.CRC {
			return nil, s.corruptEntry(p, "checksum mismatch")
		}
		return &packedReader{r: io.NopCloser(bytes.NewReader(b[min(offset, e.Len) : min(offset, e.Len)+n])), attrs: &a}, nil
	}
	r, err := s.cold.NewRangeReader(ctx, p.pack.name, at+offset, n)
	if err != nil {
		return nil, err
	}
	return &packedReader{r: &verifier{s: s, r: r, p: p, want: n}, attrs: &a}, nil
}

// corruptEntry is the error of a packed entry whose bytes do not verify.
func (s *Store) corruptEntry(p packed, format string, args ...any) error {
	s.stats.corruptReads.Add(1)
	return blob.Errorf(driver.OpRead, p.entry.Key, blob.ErrCorrupt, "tiered: %q in pack %s: "+format, append([]any{p.entry.Key, p.pack.name}, args...)...)
}

// verifier checks, before it reports the end of a packed read, that it
// served want bytes and, if crc is set, that they have the entry's CRC32C.
type verifier struct {
	s    *Store
	r    io.ReadCloser
	p    packed
	want int64
	got  int64
	crc  hash.Hash32
	err  error
}

func (v *verifier) Read(b []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(b)
	v.got += int64(n)
	if v.crc != nil {
		v.crc.Write(b[:n])
	}
	switch {
	case v.got > v.want:
		v.err = v.s.corruptEntry(v.p, "read more than its %d bytes", v.want)
	case err == io.EOF && v.got < v.want:
		v.err = v.s.corruptEntry(v.p, "read %d of %d bytes", v.got, v.want)
	case err == io.EOF && v.crc != nil && v.crc.Sum32() != v.p.entry.CRC:
		v.err = v.s.corruptEntry(v.p, "checksum mismatch")
	default:
		return n, err
	}
	return 0, v.err
}

func (v *verifier) Close() error { return v.r.Close() }

// packedReader shows a pack's range as the object it holds.
type packedReader struct {
	r     io.ReadCloser
	attrs *blob.Attributes
}

func (r *packedReader) Read(p []byte) (int, error)   { return r.r.Read(p) }
func (r *packedReader) Close() error                 { return r.r.Close() }
func (r *packedReader) Attributes() *blob.Attributes { return r.attrs }
