package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// repairOnce copies sealed segments back to the zones that lack them; the
// writer runs it every RepairInterval while it lives.
func (l *Log) repairOnce() {
	c, cancel := context.WithTimeout(l.ctx, 4*l.opts.OpTimeout+l.opts.RepairInterval)
	defer cancel()
	_ = l.repairPass(c) // counted in Stats; the next pass tries again
	if err := l.retain(c); err != nil {
		l.mu.Lock()
		l.stats.RetainErrors++
		l.mu.Unlock()
	}
}

// zoneCopy is what a zone holds of a sealed segment.
type zoneCopy struct {
	absent bool  // no copy (or, in the slot layout, no header slot)
	have   int64 // the last record it holds from the segment's first on
	end    int64 // where an append goes
	noLAC  bool  // it has every record, but no frame says they are committed
}

// repairPass looks at every sealed, committed segment of the chain on every
// zone, and gives each zone that lacks it, or lacks some of its records,
// the records a zone that holds them all has: a whole copy where there is
// none, the missing records appended where there is part of one (a moved
// segment gets its marker). It waits an interval after first seeing a
// segment sealed, so that the writer's own appends to it are over; a copy
// found whole is not read again (a listing still shows it if it goes).
// Zones that do not answer are left for a later pass.
func (l *Log) repairPass(ctx context.Context) error {
	l.mu.Lock()
	cur, lac := l.seg.key, l.lac
	l.mu.Unlock()
	l.tierMu.Lock()
	defer l.tierMu.Unlock()
	// One listing of each zone gives both the chain and what each zone
	// holds; a zone that does not answer is not known: not counted, not
	// written.
	lists := make([][]segKey, len(l.zones))
	starts := make([]int64, len(l.zones))
	errs := onAll(ctx, l.zones, l.opts.OpTimeout, func(ctx context.Context, z *zone) error {
		var err error
		lists[z.idx], starts[z.idx], err = z.listLog(ctx, nil)
		return err
	})
	if need := len(l.zones) - l.opts.WriteQuorum + 1; countNil(errs) < need {
		return quorumErr("listing segments", need, errs)
	}
	listed := make([]map[segKey]bool, len(l.zones))
	for i, ks := range lists {
		if errs[i] != nil {
			continue
		}
		listed[i] = map[segKey]bool{}
		for _, k := range ks {
			listed[i][k] = true
		}
	}
	// Segments below the log's start are garbage (see startPrefix): not
	// repaired, not counted.
	start := slices.Max(starts)
	for i := range lists {
		lists[i] = fromStart(lists[i], start)
	}
	chain, err := l.chainIn(ctx, cur, union(lists))
	if err != nil {
		return err
	}
	now := time.Now()
	var missing, unchecked int64
	errs = nil
	// This writer's epoch claim, put back on a zone that lost it (a zone
	// replaced by an empty bucket): an Open that reads epochs from that
	// zone and one that never had the claim would otherwise claim the same
	// epoch again. A claim above ours means we are fenced, which our next
	// write finds out. A zone without the intact marker is amnesic until it
	// holds again every record it could have held (see below).
	for i, z := range l.zones {
		if listed[i] == nil {
			unchecked++
			continue
		}
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		m, intact, err := z.claims(c)
		switch {
		case err != nil:
			unchecked++
			errs = append(errs, fmt.Errorf("commitlog: the epochs on zone %d: %w", i, err))
		case m > l.epoch:
			// A newer writer: it repairs now. This one's copies could land
			// after that writer truncated them (see repairSegment).
			cancel()
			return fmt.Errorf("%w: epoch %d, zone %d holds a claim of %d", ErrFenced, l.epoch, i, m)
		case m < l.epoch:
			if err := z.createEpoch(c, l.epoch); err != nil && !errors.Is(err, blob.ErrExists) {
				missing++
				errs = append(errs, fmt.Errorf("commitlog: the epoch claim on zone %d: %w", i, err))
			} else {
				l.mu.Lock()
				l.stats.Repaired++
				l.mu.Unlock()
			}
		}
		cancel()
		if err == nil {
			z.amnesic.Store(!intact)
			if !intact {
				if _, ok := l.amnesicAt[i]; !ok {
					// What it held may be gone: read every copy again.
					// The segment being written now, after the listing
					// that found the marker gone, not cur: the writer
					// may have rolled since the pass began, and acknowledged
					// records in the segment after cur before the zone was
					// replaced.
					l.mu.Lock()
					l.amnesicAt[i] = l.seg.key
					l.mu.Unlock()
					for _, ok := range l.repairOK {
						delete(ok, i)
					}
				}
			} else {
				delete(l.amnesicAt, i)
			}
		}
	}
	for i, k := range chain[:len(chain)-1] {
		last := chain[i+1].first - 1
		if last > lac {
			break
		}
		seen, ok := l.repairSeen[k]
		if !ok {
			l.repairSeen[k] = now
		}
		ripe := ok && now.Sub(seen) >= l.opts.RepairInterval
		if l.repairOK[k] == nil {
			l.repairOK[k] = map[int]bool{}
		}
		short := map[int]zoneCopy{}
		for zi, z := range l.zones {
			switch {
			case listed[zi] == nil:
				unchecked++
			case !listed[zi][k]:
				short[zi] = absentCopy(k)
				delete(l.repairOK[k], zi)
			case l.repairOK[k][zi] || !ripe:
				// Whole when last read, or not to be read yet.
			default:
				c, err := l.readCopy(ctx, z, k, last)
				if err != nil {
					unchecked++
					errs = append(errs, err)
				} else if !c.absent && c.have >= last && !c.noLAC {
					l.repairOK[k][zi] = true
				} else {
					short[zi] = c
				}
			}
		}
		missing += int64(len(short))
		if len(short) == 0 || !ripe {
			continue
		}
		n, err := l.repairSegment(ctx, k, last, short)
		missing -= int64(n)
		l.mu.Lock()
		l.stats.Repaired += int64(n)
		l.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("commitlog: repairing segment %s: %w", k, err))
		}
	}
	// An amnesic zone holds the log intact again once every record it could
	// have held before it was found amnesic is back: the writer has rolled
	// past the segment it was writing then (so that segment is sealed), and
	// every segment of the chain up to that one is known whole on it (the
	// later ones it was given as any zone is). Its marker goes back, and
	// quorums count it again.
	for zi, at := range l.amnesicAt {
		if !l.zones[zi].amnesic.Load() {
			continue
		}
		whole := listed[zi] != nil && cur.compare(at) > 0
		for _, k := range chain[:len(chain)-1] {
			if k.compare(at) <= 0 && !l.repairOK[k][zi] {
				whole = false
			}
		}
		if !whole {
			missing++
			continue
		}
		// The start first: counted again, the zone must not show a
		// segment below it as the log's first.
		err := l.zones[zi].raiseStart(ctx, start, l.opts.OpTimeout)
		if err == nil {
			c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
			err = l.zones[zi].createEpoch(c, intactEpoch)
			cancel()
		}
		if err != nil && !errors.Is(err, blob.ErrExists) {
			missing++
			errs = append(errs, fmt.Errorf("commitlog: the intact marker on zone %d: %w", zi, err))
			continue
		}
		l.zones[zi].amnesic.Store(false)
		delete(l.amnesicAt, zi)
		l.mu.Lock()
		l.stats.Repaired++
		l.mu.Unlock()
	}
	// Forget segments no longer on the chain (truncated).
	on := map[segKey]bool{}
	for _, k := range chain {
		on[k] = true
	}
	for k := range l.repairSeen {
		if !on[k] {
			delete(l.repairSeen, k)
			delete(l.repairOK, k)
		}
	}
	l.mu.Lock()
	l.stats.Missing, l.stats.Unchecked, l.stats.Amnesic = missing, unchecked, int64(len(amnesicZones(l.zones)))
	l.stats.RepairPasses++
	l.mu.Unlock()
	return errors.Join(errs...)
}

// absentCopy is a zone's lack of segment k: it holds none of its records.
// In the slot layout a zone can list a segment whose header slot it lacks
// (a slot write that landed after the zone was emptied), which readCopy
// finds absent: have must not say it holds the first record (0 is the
// first record of the log's first segment, which a zero have would claim
// whole when it holds one record or none).
func absentCopy(k segKey) zoneCopy { return zoneCopy{absent: true, have: k.first - 1} }

// readCopy reads what z holds of segment k, whose records end at last. A
// moved segment's marker is whole.
func (l *Log) readCopy(ctx context.Context, z *zone, k segKey, last int64) (zoneCopy, error) {
	c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
	defer cancel()
	frames, end, err := z.read(c, k, 0)
	if errors.Is(err, blob.ErrNotFound) {
		return absentCopy(k), nil
	}
	if err != nil {
		return zoneCopy{}, fmt.Errorf("commitlog: reading segment %s on zone %d: %w", k, z.idx, err)
	}
	if _, ok := movedIn(frames); ok {
		return zoneCopy{have: last, end: end}, nil
	}
	if len(frames) == 0 || frames[0].kind != frameHeader {
		return absentCopy(k), nil
	}
	cp := zoneCopy{have: contiguous(frames, k.first), end: end}
	var known int64 = -1
	for _, f := range frames {
		known = max(known, f.lac)
	}
	if cp.have >= last && known < last {
		// Every record, but nothing on this zone says the last ones are
		// committed (its seal frame never came): a reader that has only
		// this zone could not serve them.
		cp.have, cp.noLAC = last, true
	}
	return cp, nil
}

// repairSegment gives each zone of short what it lacks of segment k, whose
// records end at last, from a zone that holds them all (or, if the segment
// moved, its marker). It returns how many zones it repaired, pacing its
// writes at RepairBytesPerSecond.
func (l *Log) repairSegment(ctx context.Context, k segKey, last int64, short map[int]zoneCopy) (int, error) {
	var source []frame
	moved := false
	var errs []error
	for zi, z := range l.zones {
		if cp, ok := short[zi]; ok && !cp.noLAC {
			// A copy that has every record but no frame saying they are
			// committed (a recovered tip: recoveries copy records without
			// a LAC) is a source still: the chain says they are.
			continue
		}
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		frames, _, err := z.read(c, k, 0)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := movedIn(frames); ok && l.regional != nil {
			moved = true
			break
		}
		if len(frames) > 0 && frames[0].kind == frameHeader && contiguous(frames, k.first) >= last {
			source = frames
			break
		}
		errs = append(errs, fmt.Errorf("zone %d lacks records of the segment", zi))
	}
	if !moved && source == nil {
		return 0, fmt.Errorf("no zone holds every record: %w", errors.Join(errs...))
	}
	// Only the current writer repairs: a newer one may have truncated the
	// log since this pass listed it, and a copy written now would bring a
	// truncated segment back below the start (readers opened there would
	// be served it, and it would stay until the next truncation).
	if err := l.stillCurrent(ctx); err != nil {
		return 0, err
	}
	wrote := 0
	for zi, cp := range short {
		z := l.zones[zi]
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		var err error
		n := 0
		switch {
		case moved:
			err = l.remark(c, z, k)
		case cp.absent:
			content := pack(source, k, last, l.opts.MaxFrameBytes)
			n = len(content)
			err = z.create(c, k, content)
			z.dropSegmentStream(k) // a sealed segment takes no appends
			if errors.Is(err, blob.ErrExists) {
				err = nil // written meanwhile; the next pass reads it
			}
		default:
			// The records after the ones it has (or, if it has them all,
			// a frame that only says they are committed), appended where
			// its copy ends (a copy that changed since fails the append).
			content := tail(source, k, cp.have+1, last, l.opts.MaxFrameBytes)
			if cp.have >= last {
				content = encodeFrame(frameData, k.epoch, last+1, last, nil)
			}
			n = len(content)
			_, err = z.append(c, k, cp.end, content)
			z.dropSegmentStream(k)
		}
		cancel()
		if err != nil {
			return wrote, fmt.Errorf("zone %d: %w", zi, err)
		}
		wrote++
		if err := sleep(ctx, time.Duration(float64(n)/float64(l.opts.RepairBytesPerSecond)*float64(time.Second))); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

// tail returns data frames of the records from..last of frames (segment
// k's), each frame carrying last as its LAC: they are committed.
func tail(frames []frame, k segKey, from, last int64, maxFrame int) []byte {
	recs := make([][]byte, last-from+1)
	for _, f := range frames {
		if f.kind == frameData {
			for j, r := range f.records {
				if o := f.first + int64(j); o >= from && o <= last {
					recs[o-from] = r
				}
			}
		}
	}
	return dataFrames(k.epoch, from, last, recs, maxFrame)
}
