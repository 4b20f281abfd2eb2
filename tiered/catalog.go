package tiered

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// packMagic starts every pack: "zbpack1 ", then the length of the index in
// 11 decimal digits and a newline (20 bytes), the index (JSON), then the
// objects' bytes, one after another.
const (
	packMagic      = "zbpack1 "
	packHeaderSize = 20
	// indexPeek is what a first read of a pack asks for: the header and, for
	// packs of up to a few thousand objects, the whole index.
	indexPeek = 1 << 20
)

// packEntry is one object in a pack: where its bytes are (Off from the start
// of the pack's data) and the attributes it had in hot, Generation included:
// the generation it was moved at, which users keep seeing.
type packEntry struct {
	Key   string           `json:"k"`
	Off   int64            `json:"o"`
	Len   int64            `json:"n"`
	Attrs *blob.Attributes `json:"a"`
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
// relative to the start of the data, which follows the index.
func encodePack(idx *packIndex, data []byte) ([]byte, error) {
	js, err := json.Marshal(idx)
	if err != nil {
		return nil, err
	}
	hdr := fmt.Sprintf("%s%011d\n", packMagic, len(js))
	out := make([]byte, 0, len(hdr)+len(js)+len(data))
	out = append(out, hdr...)
	out = append(out, js...)
	return append(out, data...), nil
}

// dataStart is where a pack's data begins, given its index's length.
func dataStart(indexLen int) int64 { return int64(packHeaderSize + indexLen) }

// catalog is a Store's view of the pack log: every pack's index and every
// kill, refreshed from a listing of the log. A read that missed in hot must
// see every pack whose objects were deleted from hot before the miss; see
// sync.
type catalog struct {
	s *Store

	// turn holds a token while a refresh runs: refreshes are serialized, and
	// a caller waiting for one gives up with its context. (A channel, not a
	// mutex: a wait on it is one the runtime, and synctest, can see.)
	turn      chan struct{}
	refreshed time.Time // start of the last complete refresh
	full      time.Time // start of the last complete full refresh

	state sync.RWMutex
	packs map[string]*loadedPack // by log name
	tombs map[string][]kill      // by log name
	kills map[kill]int           // how many log objects carry each kill
	byKey map[string][]entryRef  // entries of each key, in every pack
}

type loadedPack struct {
	name  string
	index *packIndex
	base  int64 // offset of the data in the pack object
	size  int64 // size of the pack object
}

type entryRef struct {
	pack string
	i    int
}

func newCatalog(s *Store) *catalog {
	return &catalog{s: s, turn: make(chan struct{}, 1), packs: map[string]*loadedPack{}, tombs: map[string][]kill{}, kills: map[kill]int{}, byKey: map[string][]entryRef{}}
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
	if c.refreshed.After(since) {
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

func (c *catalog) lock(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *catalog) unlock() { <-c.turn }

func (c *catalog) refreshLocked(ctx context.Context, full bool) error {
	start := time.Now()
	if c.full.IsZero() {
		full = true
	}
	after := ""
	if !full {
		after = logFloor(c.refreshed.Add(-c.window()))
	}
	seen := map[string]bool{}
	for obj, err := range blob.All(ctx, c.s.cold, &blob.ListOptions{Prefix: logPrefix, StartAfter: after}) {
		if err != nil {
			return err
		}
		seen[obj.Key] = true
		if err := c.load(ctx, obj.Key, obj.Size); err != nil {
			return err
		}
	}
	if full {
		c.state.Lock()
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
		c.full = start
	}
	c.refreshed = start
	return nil
}

// load reads a log object the catalog does not have yet.
func (c *catalog) load(ctx context.Context, name string, size int64) error {
	c.state.RLock()
	_, p := c.packs[name]
	_, t := c.tombs[name]
	c.state.RUnlock()
	if p || t {
		return nil
	}
	_, kind, ok := logTime(name)
	if !ok {
		return nil // not ours
	}
	switch kind {
	case kindPack:
		lp, err := readPackIndex(ctx, c.s.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil // rewritten and removed since it was listed
		} else if err != nil {
			return err
		}
		c.addPack(lp)
	case kindTomb:
		b, err := blob.ReadAll(ctx, c.s.cold, name)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		var ks []kill
		if err := json.Unmarshal(b, &ks); err != nil {
			return blob.Errorf(driver.OpRead, name, blob.ErrInvalidArgument, "tiered: malformed tombstone")
		}
		c.addTomb(name, ks)
	}
	return nil
}

func (c *catalog) addPack(lp *loadedPack) {
	c.state.Lock()
	defer c.state.Unlock()
	if _, ok := c.packs[lp.name]; ok {
		return
	}
	c.packs[lp.name] = lp
	for i, e := range lp.index.Entries {
		c.byKey[e.Key] = append(c.byKey[e.Key], entryRef{lp.name, i})
	}
	for _, k := range lp.index.Kills {
		c.kills[k]++
	}
}

func (c *catalog) addTomb(name string, ks []kill) {
	c.state.Lock()
	defer c.state.Unlock()
	if _, ok := c.tombs[name]; ok {
		return
	}
	c.tombs[name] = ks
	for _, k := range ks {
		c.kills[k]++
	}
}

// drop forgets a log object that was removed.
func (c *catalog) drop(name string) {
	c.state.Lock()
	defer c.state.Unlock()
	c.dropLocked(name)
}

func (c *catalog) dropLocked(name string) {
	if lp, ok := c.packs[name]; ok {
		delete(c.packs, name)
		for _, e := range lp.index.Entries {
			refs := slices.DeleteFunc(c.byKey[e.Key], func(r entryRef) bool { return r.pack == name })
			if len(refs) == 0 {
				delete(c.byKey, e.Key)
			} else {
				c.byKey[e.Key] = refs
			}
		}
		c.unkillLocked(lp.index.Kills)
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
	}
}

// killedLocked reports whether entry e of pack is killed.
func (c *catalog) killedLocked(e packEntry, _ string) bool {
	return c.kills[kill{Key: e.Key, Gen: e.Attrs.Generation}] > 0
}

// keepLocked reports whether a rewrite of pack must keep entry e: it is not
// killed, and no newer pack holds a copy of it (a rewrite that crashed after
// its new pack landed leaves such copies; the newest is always kept).
func (c *catalog) keepLocked(e packEntry, pack string) bool {
	if c.killedLocked(e, pack) {
		return false
	}
	for _, r := range c.byKey[e.Key] {
		if r.pack > pack && c.packs[r.pack].index.Entries[r.i].Attrs.Generation == e.Attrs.Generation {
			return false
		}
	}
	return true
}

// packed is a live entry of a key: the version packs serve.
type packed struct {
	pack  *loadedPack
	entry packEntry
}

// lookup returns the live entry of key, if any pack serves it. Of several
// live entries (copies of one version made by a rewrite, or a version whose
// successor is still in hot) the newest pack's is returned.
func (c *catalog) lookup(key string) (packed, bool) {
	c.state.RLock()
	defer c.state.RUnlock()
	return c.lookupLocked(key)
}

func (c *catalog) lookupLocked(key string) (packed, bool) {
	var best packed
	found := false
	for _, r := range c.byKey[key] {
		lp := c.packs[r.pack]
		e := lp.index.Entries[r.i]
		if c.killedLocked(e, lp.name) {
			continue
		}
		if !found || lp.name > best.pack.name {
			best, found = packed{lp, e}, true
		}
	}
	return best, found
}

// live returns the versions of key that packs still serve.
func (c *catalog) live(key string) []kill {
	c.state.RLock()
	defer c.state.RUnlock()
	var out []kill
	for _, r := range c.byKey[key] {
		e := c.packs[r.pack].index.Entries[r.i]
		k := kill{Key: key, Gen: e.Attrs.Generation}
		if !c.killedLocked(e, r.pack) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// keys returns the keys packs serve under prefix, after start, sorted.
func (c *catalog) keys(prefix, after string) []packed {
	c.state.RLock()
	defer c.state.RUnlock()
	var out []packed
	for k := range c.byKey {
		if !strings.HasPrefix(k, prefix) || k <= after {
			continue
		}
		if p, ok := c.lookupLocked(k); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b packed) int { return strings.Compare(a.entry.Key, b.entry.Key) })
	return out
}

// liveFraction returns the share of a pack's data bytes that a rewrite
// would keep.
func (c *catalog) liveFraction(lp *loadedPack) float64 {
	c.state.RLock()
	defer c.state.RUnlock()
	if lp.index.DataBytes == 0 {
		return 0
	}
	var live int64
	for _, e := range lp.index.Entries {
		if c.keepLocked(e, lp.name) {
			live += e.Len
		}
	}
	return float64(live) / float64(lp.index.DataBytes)
}

// snapshot returns the packs and tombstones the catalog holds, by name.
func (c *catalog) snapshot() (packs []*loadedPack, tombs map[string][]kill) {
	c.state.RLock()
	defer c.state.RUnlock()
	for _, lp := range c.packs {
		packs = append(packs, lp)
	}
	slices.SortFunc(packs, func(a, b *loadedPack) int { return strings.Compare(a.name, b.name) })
	tombs = make(map[string][]kill, len(c.tombs))
	for n, ks := range c.tombs {
		tombs[n] = ks
	}
	return packs, tombs
}

// inAnyPack reports whether some pack holds version k.
func (c *catalog) inAnyPack(k kill) bool {
	c.state.RLock()
	defer c.state.RUnlock()
	for _, r := range c.byKey[k.Key] {
		if c.packs[r.pack].index.Entries[r.i].Attrs.Generation == k.Gen {
			return true
		}
	}
	return false
}

// readPackIndex reads the header and index of a pack.
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
	if len(head) < packHeaderSize || !bytes.HasPrefix(head, []byte(packMagic)) || head[packHeaderSize-1] != '\n' {
		return nil, blob.Errorf(driver.OpRead, name, blob.ErrInvalidArgument, "tiered: malformed pack header")
	}
	n, err := strconv.Atoi(string(head[len(packMagic) : packHeaderSize-1]))
	if err != nil || n < 0 {
		return nil, blob.Errorf(driver.OpRead, name, blob.ErrInvalidArgument, "tiered: malformed pack header")
	}
	js := head[packHeaderSize:]
	if len(js) < n {
		rest, err := readRange(ctx, cold, name, int64(len(head)), int64(n-len(js)))
		if err != nil {
			return nil, err
		}
		js = append(js, rest...)
	}
	var idx packIndex
	if err := json.Unmarshal(js[:n], &idx); err != nil {
		return nil, blob.Errorf(driver.OpRead, name, blob.ErrInvalidArgument, "tiered: malformed pack index")
	}
	return &loadedPack{name: name, index: &idx, base: dataStart(n), size: size}, nil
}

func readRange(ctx context.Context, s blob.Store, key string, off, n int64) ([]byte, error) {
	r, err := s.NewRangeReader(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// writeTombstone commits kills to the log, and makes sure the tombstone is
// found by every refresh that starts after this returns: it must be
// committed within window/2 of its name's time, or it is written again
// under a newer name.
func (s *Store) writeTombstone(ctx context.Context, ks []kill) error {
	if len(ks) == 0 {
		return nil
	}
	b, _ := json.Marshal(ks)
	for range 3 {
		chosen := s.logNow()
		name := logName(kindTomb, chosen)
		if err := blob.Put(ctx, s.cold, name, b, &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/json"}); err != nil {
			return err
		}
		s.stats.tombstones.Add(1)
		if time.Since(chosen) < s.cat.window()/2 {
			s.cat.addTomb(name, ks)
			return nil
		}
	}
	return errors.New("tiered: tombstone writes keep taking longer than the pack log allows")
}

// readPacked reads a range of a packed object: one ranged read of its pack.
func (s *Store) readPacked(ctx context.Context, p packed, offset, length int64) (blob.Reader, error) {
	e := p.entry
	n := max(e.Len-offset, 0)
	if length >= 0 {
		n = min(n, length)
	}
	a := *e.Attrs
	if n == 0 {
		return &packedReader{r: io.NopCloser(bytes.NewReader(nil)), attrs: &a}, nil
	}
	r, err := s.cold.NewRangeReader(ctx, p.pack.name, p.pack.base+e.Off+offset, n)
	if err != nil {
		return nil, err
	}
	return &packedReader{r: r, attrs: &a}, nil
}

// packedReader shows a pack's range as the object it holds.
type packedReader struct {
	r     io.ReadCloser
	attrs *blob.Attributes
}

func (r *packedReader) Read(p []byte) (int, error)   { return r.r.Read(p) }
func (r *packedReader) Close() error                 { return r.r.Close() }
func (r *packedReader) Attributes() *blob.Attributes { return r.attrs }
