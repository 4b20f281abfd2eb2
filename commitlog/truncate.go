package commitlog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// TruncateBefore deletes the log's oldest segments, every one whose records
// are all below offset and committed, and returns the first offset the log
// still holds (the start). Segments are whole: the start is the first offset
// of the segment that holds offset, at most offset, unless an earlier
// truncation recorded a higher one. A reader positioned below the start
// gets ErrTruncated.
//
// Every segment name below the start goes, oldest first: its copy or marker
// on every zone (every slot, header last, in the slot layout), then its
// regional copy. Names below the start that are not on the chain (segments
// created ahead and never used) go too. A failure stops the truncation with
// every record from the start it had reached on readable; a later call
// finishes it (it lists every zone and the regional store again, so nothing
// a cut-off call left behind is forgotten). The segment being written, and
// the records a recovery fences, are never touched: fencing needs only the
// tip. A truncation that a newer writer overtook (its claim is found once
// the deletes are done) fails with ErrFenced and returns no start: that
// writer's repair may have copied back a segment it had listed before the
// deletes reached every zone.
func (l *Log) TruncateBefore(ctx context.Context, offset int64) (int64, error) {
	l.mu.Lock()
	cur, lac, err := l.seg.key, l.lac, l.err
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	l.tierMu.Lock()
	defer l.tierMu.Unlock()
	chain, err := l.chainTo(ctx, cur)
	if err != nil {
		return 0, err
	}
	start := chain[0].first
	for i := range chain[:len(chain)-1] {
		next := chain[i+1].first
		if next > offset || next-1 > lac {
			break
		}
		start = next
	}
	// Every name on any zone or in the regional store, and the highest
	// start any zone records. A truncation cut off after recording its
	// start on some zones, not all, leaves a start that the quorum chainTo
	// listed may have missed; listings that reach such a zone drop the
	// segments below it, so the log starts there for them: the start is at
	// least that one, and this call finishes what the other began.
	var all []segKey
	stores := slices.Clone(l.zones)
	if l.regional != nil {
		stores = append(stores, l.regional)
	}
	for i, z := range stores {
		ks, recorded, err := z.listLog(ctx, nil)
		if err != nil {
			where := fmt.Sprintf("zone %d", i)
			if i == len(l.zones) {
				where = "the regional store"
			}
			return 0, fmt.Errorf("commitlog: truncating: listing %s: %w", where, err)
		}
		all = append(all, ks...)
		start = max(start, recorded)
	}
	// And at least this writer's own earlier target: a Put of its start
	// that timed out may yet land, after this listing. It is safe to go
	// to: every record below it was committed then.
	l.mu.Lock()
	start = max(start, l.stats.TruncateTo)
	l.stats.TruncateTo = start
	l.mu.Unlock()
	below := map[segKey]bool{}
	for _, k := range all {
		if k.first < start && k != cur {
			below[k] = true
		}
	}
	// The start on every zone before any deletion (see startPrefix); with
	// nothing below it, an earlier truncation recorded one at least as high.
	if len(below) > 0 {
		if err := onEachZone(l.zones, func(z *zone) error { return z.raiseStart(ctx, start, l.opts.OpTimeout) }); err != nil {
			return 0, fmt.Errorf("commitlog: truncating: recording the start %d: %w", start, err)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(below), segKey.compare) {
		if err := l.deleteSegment(ctx, k); err != nil {
			return 0, fmt.Errorf("commitlog: truncating segment %s: %w", k, err)
		}
		delete(l.moved, k)
		delete(l.sealedAt, k)
		delete(l.headers, k)
		l.mu.Lock()
		for z, ks := range l.unmarked {
			l.unmarked[z] = slices.DeleteFunc(ks, func(o segKey) bool { return o == k })
		}
		l.stats.Truncated++
		l.mu.Unlock()
	}
	// The epochs claimed before this writer's: a claim needs only the
	// highest one to stay, and each takeover left one on a majority.
	if err := onEachZone(l.zones, func(z *zone) error { return z.deleteEpochsBelow(ctx, l.epoch, l.opts.OpTimeout) }); err != nil {
		return start, fmt.Errorf("commitlog: truncating: old epochs: %w", err)
	}
	// A newer writer that listed a segment before it went from every zone
	// may have copied it back since (its repair found it on one zone and
	// not the others): the start is this writer's only if no newer one
	// exists now. A newer writer claims its epoch before it lists, so one
	// that could have seen a deleted segment shows here.
	if err := l.stillCurrent(ctx); err != nil {
		return 0, fmt.Errorf("commitlog: truncating: %w", err)
	}
	l.mu.Lock()
	l.stats.Start = max(l.stats.Start, start)
	l.mu.Unlock()
	return start, nil
}

// deleteEpochsBelow removes the epoch claims below e on z. The highest claim
// (e or above) stays, so a later claim still goes above every earlier one,
// and so does the intact marker.
func (z *zone) deleteEpochsBelow(ctx context.Context, e uint64, timeout time.Duration) error {
	prefix := z.log + "/epoch/"
	keys, err := z.listKeys(ctx, prefix, timeout)
	if err != nil {
		return err
	}
	old := slices.DeleteFunc(keys, func(k string) bool {
		x, ok := parseEpoch(strings.TrimPrefix(k, prefix))
		return !ok || x >= e || x == intactEpoch
	})
	return z.deleteKeys(ctx, old, timeout)
}

// onEachZone runs f on every zone at once and joins their errors; unlike
// onAll it sets no bound of its own, for work whose requests bound
// themselves one by one.
func onEachZone(zones []*zone, f func(*zone) error) error {
	errs := make([]error, len(zones))
	parallel.Do(len(zones), len(zones), func(i int) { errs[i] = f(zones[i]) })
	return errors.Join(errs...)
}

// listKeys lists the keys under prefix, the listing bounded by timeout.
func (z *zone) listKeys(ctx context.Context, prefix string, timeout time.Duration) ([]string, error) {
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var keys []string
	for o, err := range blob.All(c, z.s, &blob.ListOptions{Prefix: prefix}) {
		if err != nil {
			return nil, err
		}
		keys = append(keys, o.Key)
	}
	return keys, nil
}

// deleteKeys deletes keys in order, each Delete bounded by timeout on its
// own: a log holds many old epochs and a segment many slots, and one bound
// for them all would fail a slow zone's cleanup however far it got.
func (z *zone) deleteKeys(ctx context.Context, keys []string, timeout time.Duration) error {
	for _, k := range keys {
		c, cancel := context.WithTimeout(ctx, timeout)
		err := z.s.Delete(c, k, nil)
		cancel()
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
	}
	return nil
}

// deleteSegment removes segment k: its copy or marker on every zone (every
// slot, in the slot layout), then its regional copy, which the markers
// name.
func (l *Log) deleteSegment(ctx context.Context, k segKey) error {
	if err := onEachZone(l.zones, func(z *zone) error { return z.deleteSegment(ctx, k, l.opts.OpTimeout) }); err != nil {
		return err
	}
	if l.regional != nil {
		if err := l.regional.deleteSegment(ctx, k, l.opts.OpTimeout); err != nil {
			return fmt.Errorf("regional copy: %w", err)
		}
	}
	return nil
}

// deleteSegment removes segment k from z, if it is there, each request
// bounded by timeout.
func (z *zone) deleteSegment(ctx context.Context, k segKey, timeout time.Duration) error {
	key := z.segKey(k)
	if !strings.HasSuffix(key, "/") {
		return z.deleteKeys(ctx, []string{key}, timeout)
	}
	// The slot layout: the header slot last, so that a segment whose
	// deletion stopped part way still lists as one.
	slots, err := z.listKeys(ctx, key, timeout)
	if err != nil {
		return err
	}
	slices.Reverse(slots)
	return z.deleteKeys(ctx, slots, timeout)
}
