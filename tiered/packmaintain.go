package tiered

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// maintainPacks rewrites packs whose live share fell below PackMinLive and
// removes tombstones no pack needs, after a full refresh of the catalog.
// Only log objects older than the log window are touched, so no move or
// rewrite that could still depend on them is in flight.
func (s *Store) maintainPacks(ctx context.Context) error {
	if err := s.catalog.RefreshFull(ctx); err != nil {
		return err
	}
	packs, tombs := s.catalog.Snapshot()
	old := time.Now().Add(-s.catalog.Window())
	// A pack move's marker names versions its retirement may have left
	// copies of in hot: a pack that holds one of them keeps it until the
	// marker is gone, killed or not (see retirer).
	marked, err := s.markedItems(ctx)
	if err != nil {
		return err
	}
	// What this pass removes (rewritten packs, tombstones no pack needs) is
	// removed only once the inventory records it, at the end.
	var removals []string
	for _, sum := range packs {
		if t, _, _ := packlog.ParseName(sum.Name); t.After(old) {
			continue
		}
		live, err := s.catalog.LiveFraction(ctx, sum)
		if err != nil {
			return err
		}
		if live >= s.opts.PackMinLive {
			continue
		}
		done, err := s.rewritePack(ctx, sum, marked)
		if err != nil {
			return err
		}
		if done {
			removals = append(removals, sum.Name)
		}
	}
	// A tombstone is kept four windows, and while a pack move under way
	// names one of its versions (its pack may land late, and is only then
	// listed): long after any pack that could hold one of its versions was
	// committed.
	gc := time.Now().Add(-4 * s.catalog.Window())
	for name, ks := range tombs {
		if t, _, _ := packlog.ParseName(name); t.After(gc) {
			continue
		}
		needed := false
		for _, k := range ks {
			held, err := s.catalog.Holds(ctx, k, "")
			if err != nil {
				return err
			}
			if held || marked[k] {
				needed = true
				break
			}
		}
		if !needed {
			removals = append(removals, name)
		}
	}
	if err := s.catalog.RecordInventory(ctx, removals, nil); err != nil {
		return err
	}
	if err := s.fence(ctx); err != nil {
		return err
	}
	for _, name := range removals {
		if err := s.cold.Delete(ctx, name, nil); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		if _, ok := tombs[name]; !ok {
			s.stats.rewrites.Add(1)
		}
		s.catalog.Drop(name)
	}
	return nil
}

// rewritePack copies a pack's live entries, and the kills it carries that
// still apply to another pack, into a new pack, and reports whether the old
// one is to be removed (maintainPacks removes it, once the inventory says
// so). A crash in between leaves both: their common entries are the same
// versions, and a kill applies to every copy. A reader that finds the old
// pack gone relists the log and finds the new one, committed before.
func (s *Store) rewritePack(ctx context.Context, sum *packlog.Summary, marked map[packlog.Version]bool) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()
	lp, err := s.catalog.Index(ctx, sum)
	if errors.Is(err, packlog.ErrPackGone) {
		s.catalog.Drop(sum.Name)
		return false, nil
	} else if err != nil {
		return false, err
	}
	idx := &packlog.Index{}
	var live []packlog.Entry
	for _, e := range lp.Index.Entries {
		keep, err := s.catalog.Keep(ctx, e, lp.Name)
		if err != nil {
			return false, err
		}
		if !keep && marked[packlog.Version{Key: e.Key, Gen: e.Attrs.Generation}] {
			return false, nil // rewritten once the marker is gone
		}
		if keep {
			live = append(live, e)
		}
	}
	for _, k := range lp.Index.Kills {
		held, err := s.catalog.Holds(ctx, k, lp.Name)
		if err != nil {
			return false, err
		}
		if held {
			idx.Kills = append(idx.Kills, k)
		}
	}
	if len(live) > 0 {
		old, err := blob.ReadRange(ctx, s.cold, lp.Name, lp.Base, lp.Index.DataBytes)
		if errors.Is(err, blob.ErrNotFound) {
			s.catalog.Drop(lp.Name)
			return false, nil
		} else if err != nil {
			return false, err
		}
		if int64(len(old)) != lp.Index.DataBytes {
			return false, fmt.Errorf("tiered: pack %s: read %d data bytes, index says %d", lp.Name, len(old), lp.Index.DataBytes)
		}
		var data bytes.Buffer
		for _, e := range live {
			b := old[e.Off : e.Off+e.Len]
			if lp.Checked && crc32.Checksum(b, packlog.Castagnoli) != e.CRC {
				// Never copy bytes that do not verify: the pack stays,
				// and its reads of e fail with the same error.
				return false, s.corruptEntry(packlog.Packed{Pack: lp, Entry: e}, "checksum mismatch; the pack is not rewritten")
			}
			ne := e
			ne.Off, ne.CRC = int64(data.Len()), crc32.Checksum(b, packlog.Castagnoli)
			data.Write(b)
			idx.Entries = append(idx.Entries, ne)
		}
		idx.DataBytes = int64(data.Len())
		chosen := s.logNow()
		if _, err := s.writePack(ctx, chosen, packlog.NewName(packlog.KindPack, chosen), idx, &data); err != nil {
			return false, err
		}
	} else if len(idx.Kills) > 0 {
		if err := s.writeTombstone(ctx, idx.Kills); err != nil {
			return false, err
		}
	}
	return true, nil
}
