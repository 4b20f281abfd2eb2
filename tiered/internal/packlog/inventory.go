package packlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// inventoryKey names, in cold, the pack log's inventory: the log objects
// the compactor has seen and not removed. A listing shows what the log
// holds; the inventory is what tells a log object deleted behind the
// compactor's back (by an operator, a lifecycle rule, a bug) from one it
// removed itself. Without it, a new process has no record of a lost pack,
// and the versions it held read as absent, or older versions as current.
const inventoryKey = ReservedPrefix + "inventory"

// inventory is what inventoryKey holds, as JSON after a header (invMagic).
type inventory struct {
	// Live maps each log object the compactor saw and has not removed to
	// the range of keys it holds or kills (a rangeKey value; "" when
	// unknown: all keys).
	Live map[string]string `json:"live"`
	// Removed maps the log objects the compactor removed, or is about to, to
	// when (Unix nanoseconds): it records a removal before making it, and
	// keeps it long enough (removedHold) for any listing that may have seen
	// the object to be followed by a read of an inventory that says so.
	Removed map[string]int64 `json:"removed,omitempty"`
	// Lost maps the log objects found missing without a removal to their
	// ranges: reads of their keys fail with ErrCorrupt until they are put
	// back or the loss is accepted (the Store's Forget).
	Lost map[string]string `json:"lost,omitempty"`
}

// errLost is the damage of a log object the inventory names and the listing
// does not have.
var errLost = errors.New("missing from the pack log: deleted by something other than the compactor; the versions it held are lost")

// removedHold is how long the inventory remembers a removal: four log
// windows, far longer than a listing followed by an inventory read.
func (c *Catalog) removedHold() time.Duration { return 4 * c.Window() }

// invMagic starts the inventory object, followed by the CRC32C of the JSON
// after it in 8 hex digits and a newline: the object verifies itself, so
// one read of it is enough whatever the store's readers carry.
const (
	invMagic  = "zbinv1 "
	invHeader = len(invMagic) + 9
)

// readInventory reads the inventory, and the generation a Stat just before
// found (the bytes may be of a newer one, which only makes a write
// conditioned on it fail): an empty one and "" when there is none,
// ErrCorrupt when it does not parse or verify.
func readInventory(ctx context.Context, cold blob.Store) (*inventory, string, error) {
	a, err := cold.Stat(ctx, inventoryKey)
	if errors.Is(err, blob.ErrNotFound) {
		return &inventory{}, "", nil
	} else if err != nil {
		return nil, "", err
	}
	b, err := blob.ReadAll(ctx, cold, inventoryKey)
	if errors.Is(err, blob.ErrNotFound) {
		return readInventory(ctx, cold) // replaced since the Stat
	} else if err != nil {
		return nil, "", err
	}
	corrupt := func(format string, args ...any) error {
		return blob.Errorf(driver.OpRead, inventoryKey, blob.ErrCorrupt, "tiered: pack log inventory: "+format, args...)
	}
	if len(b) < invHeader || string(b[:len(invMagic)]) != invMagic || b[invHeader-1] != '\n' {
		return nil, a.Generation, corrupt("no header")
	}
	if want := fmt.Sprintf("%08x", crc32.Checksum(b[invHeader:], Castagnoli)); string(b[len(invMagic):invHeader-1]) != want {
		return nil, a.Generation, corrupt("checksum mismatch")
	}
	inv := &inventory{}
	if err := json.Unmarshal(b[invHeader:], inv); err != nil {
		return nil, a.Generation, corrupt("malformed: %v", err)
	}
	for _, names := range []map[string]string{inv.Live, inv.Lost} {
		for name := range names {
			if _, _, ok := ParseName(name); !ok {
				return nil, a.Generation, corrupt("names %q, not a log object", name)
			}
		}
	}
	return inv, a.Generation, nil
}

// checkInventory reads the inventory after a full listing, begun at
// listed, that saw the log objects in seen, and marks lost each one it
// names that the listing did not have and that was not removed. Only
// objects named a log window before the listing are judged: a younger one
// may have been committed after the listing passed its name (by another
// process, whose inventory this read may already have), and is judged by
// the next refresh. It runs under turn, and keeps what it read for the
// next RecordInventory.
func (c *Catalog) checkInventory(ctx context.Context, seen map[string]bool, listed time.Time) error {
	inv, gen, err := readInventory(ctx, c.cold)
	if errors.Is(err, blob.ErrCorrupt) {
		// Nothing can be told from it: the next pass writes a new one from
		// the listing (over this generation), and says so.
		if _, logged := c.warned.LoadOrStore(inventoryKey, true); !logged {
			c.cfg.Logger.Warn("tiered: the pack log's inventory is damaged; it is rebuilt from the listing, and log objects deleted before then go undetected", "error", err)
		}
		inv = &inventory{}
	} else if err != nil {
		return err
	}
	c.inv, c.invGen = inv, gen
	check := func(names map[string]string) {
		for name, rng := range names {
			if seen[name] {
				continue
			}
			if _, removed := inv.Removed[name]; removed {
				continue
			}
			if t, _, ok := ParseName(name); !ok || !t.Before(listed.Add(-c.Window())) {
				continue
			}
			d := damagedLog{err: errLost, lost: true}
			d.lo, d.hi, d.ranged = parseRange(rng)
			c.state.Lock()
			c.damaged[name] = d
			c.dropLocked(name)
			c.state.Unlock()
			if _, logged := c.warned.LoadOrStore(name, true); !logged {
				c.cfg.Logger.Error("tiered: a pack log object is missing; reads of the keys it may hold fail until it is put back or Forget accepts the loss", "object", name)
			}
		}
	}
	check(inv.Live)
	check(inv.Lost)
	return nil
}

// RecordInventory writes the inventory the catalog stands for: every log
// object it holds, those found lost, and the removals about to be made, on
// condition that the inventory is still the one the last full refresh read.
// A removal is made only once recorded, so an inventory never names as live
// an object its compactor removed.
// Names in forget are dropped from the lost ones first.
func (c *Catalog) RecordInventory(ctx context.Context, removals, forget []string) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.unlock()
	old, gen := c.inv, c.invGen
	if old == nil {
		if err := c.refreshLocked(ctx, true); err != nil {
			return err
		}
		old, gen = c.inv, c.invGen
	}
	now := time.Now()
	inv := &inventory{Live: map[string]string{}, Removed: map[string]int64{}, Lost: map[string]string{}}
	for name, at := range old.Removed {
		if now.Sub(time.Unix(0, at)) < c.removedHold() {
			inv.Removed[name] = at
		}
	}
	for _, name := range removals {
		inv.Removed[name] = now.UnixNano()
	}
	c.state.Lock()
	for _, name := range forget {
		delete(c.damaged, name)
	}
	for name, p := range c.packs {
		inv.Live[name] = Metadata([]string{p.minKey, p.maxKey})[rangeKey]
	}
	for name, ks := range c.tombs {
		keys := make([]string, len(ks))
		for i, k := range ks {
			keys[i] = k.Key
		}
		inv.Live[name] = Metadata(keys)[rangeKey]
	}
	for name, d := range c.damaged {
		rng := ""
		if d.ranged {
			rng = Metadata([]string{d.lo, d.hi})[rangeKey]
		}
		if d.lost {
			inv.Lost[name] = rng
		} else {
			inv.Live[name] = rng
		}
	}
	c.state.Unlock()
	for name := range inv.Removed {
		// Removed by another process after this one listed it, or by
		// this pass: not live.
		delete(inv.Live, name)
	}
	if maps.Equal(inv.Live, old.Live) && maps.Equal(inv.Lost, old.Lost) && maps.Equal(inv.Removed, old.Removed) {
		return nil
	}
	// Its generation is unknown until the next full refresh reads it back,
	// which the next write waits for.
	c.inv = nil
	if c.cfg.Fence != nil {
		if err := c.cfg.Fence(ctx); err != nil {
			return err
		}
	}
	return writeInventory(ctx, c.cold, inv, gen)
}

// writeInventory writes inv over the inventory of generation gen (none when
// gen is "").
func writeInventory(ctx context.Context, cold blob.Store, inv *inventory, gen string) error {
	b, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	cond := blob.IfNotExist()
	if gen != "" {
		cond = blob.IfGenerationMatch(gen)
	}
	body := append(fmt.Appendf(nil, "%s%08x\n", invMagic, crc32.Checksum(b, Castagnoli)), b...)
	err = blob.Put(ctx, cold, inventoryKey, body, &blob.WriterOptions{If: cond, ContentType: "application/octet-stream"})
	if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrExists) {
		return fmt.Errorf("tiered: the pack log's inventory changed under this pass (another compactor?): %w", err)
	}
	return err
}

// IsDamaged reports whether the log object name is one the catalog holds as
// damaged and, if so, whether it is lost (missing) rather than present but
// damaged.
func (c *Catalog) IsDamaged(name string) (damaged, lost bool) {
	c.state.RLock()
	d, ok := c.damaged[name]
	c.state.RUnlock()
	return ok, d.lost
}

// ClearDamaged forgets that the log object name is damaged (its loss was
// accepted and the object removed).
func (c *Catalog) ClearDamaged(name string) {
	c.state.Lock()
	delete(c.damaged, name)
	c.state.Unlock()
}
