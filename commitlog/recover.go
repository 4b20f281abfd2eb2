package commitlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// fencedCopy is what one zone held of a segment when a recovery fenced it.
type fencedCopy struct {
	frames []frame
	end    int64  // position after the fence frame
	moved  *frame // the segment moved to the regional store: this is its marker, not fenced
	// last: in the slot layout, the bytes of the slot before end as the
	// recovery put them there (its fence, or the header and fence it
	// created the segment with), for the check of its copies (see
	// zone.appendAfter).
	last []byte
}

// recovered is what recoverSegment found: the segment ends at last on W
// zones; carry are the records after it that may have been acknowledged but
// that too few zones could take (their objects were at the store's part
// limit), which the new writer appends first, at offsets last+1 on; used
// reports whether any fenced zone held a record of the segment.
type recovered struct {
	last  int64
	carry [][]byte
	used  bool
}

// recoverSegment fences segment tip on every zone it reaches, keeps every
// record that may have been acknowledged, copies those records to the zones
// that lack them until W zones hold them all, and returns the offset of the
// last one (tip.first-1 if none). Where zones at the store's part limit
// cannot take the copies, the segment ends at the last record W zones hold
// and the rest are carried into the next segment, as the writer does when
// a store refuses an append.
//
// It is BookKeeper's ledger recovery: once N-W+1 zones are fenced, no W zones
// are left on which the old writer could complete an append, so nothing it
// appends from then on is acknowledged; and every record it did acknowledge
// is on W zones, so on at least one fenced zone. Records are kept if found on
// any fenced zone (they may have been acknowledged), up to the first
// offset no fenced zone holds.
func (l *Log) recoverSegment(ctx context.Context, tip segKey) (recovered, error) {
	n, w := len(l.zones), l.opts.WriteQuorum
	need := n - w + 1
	// The header, to fence by creating the segment on zones that lack it.
	var header []byte
	h, err := segmentHeader(ctx, l.zones, nil, tip, l.opts.OpTimeout)
	if errors.Is(err, errNoSegment) {
		return recovered{}, err
	}
	if err == nil {
		header = h.raw
	}
	fence := encodeFrame(frameFence, l.epoch, 0, -1, nil)
	copies := make([]*fencedCopy, n)
	errs := onAll(ctx, l.zones, l.opts.OpTimeout, func(ctx context.Context, z *zone) error {
		c, err := l.fenceZone(ctx, z, tip, header, fence)
		copies[z.idx] = c
		if err != nil || c.moved != nil {
			return err
		}
		// What it held counts only if it holds the marker still (see
		// zone.recheckIntact).
		return z.recheckIntact(ctx)
	})
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return recovered{}, err
		}
	}
	for _, c := range copies {
		if c != nil && c.moved != nil {
			// Moved to the regional store: sealed, every record committed,
			// and its last offset is in the marker.
			return recovered{last: c.moved.lac, used: true}, nil
		}
	}
	// Absence is read from the fenced copies: only intact zones count.
	if countIntact(l.zones, errs) < need {
		return recovered{}, intactErr("fencing segment "+tip.String(), need, l.zones, errs)
	}
	// Every fenced copy is a prefix of the old writer's records (plus
	// records earlier recoveries copied, which are the same ones), so the
	// union of their records has no gap.
	recs := map[int64][]byte{}
	held := make([]int64, n)
	for i, c := range copies {
		if c == nil {
			continue
		}
		held[i] = contiguous(c.frames, tip.first)
		for _, f := range c.frames {
			if f.kind != frameData {
				continue
			}
			for j, r := range f.records {
				recs[f.first+int64(j)] = r
			}
		}
	}
	last := tip.first - 1
	for {
		if _, ok := recs[last+1]; !ok {
			break
		}
		last++
	}
	// Copy what each fenced zone lacks after its fence frame. A copy counts
	// toward W only if the zone still holds the fenced copy it goes after:
	// in the slot layout a slot is created whether or not the ones before
	// it exist, so on a zone replaced by an empty bucket since it was
	// fenced the copy would land, and count, in a segment with no header
	// that no reader or later recovery finds; the new writer would then
	// start its segment, and readers serve these records as committed,
	// with fewer than W zones holding them (TestRecoveryCopyToReplacedZone).
	reached := slices.Clone(held)
	errs = onAll(ctx, l.zones, l.opts.OpTimeout, func(ctx context.Context, z *zone) error {
		c := copies[z.idx]
		if c == nil {
			return errors.New("not fenced")
		}
		pos, prev := c.end, c.last
		for from := held[z.idx] + 1; from <= last; {
			var batch [][]byte
			size := 0
			for o := from; o <= last && (len(batch) == 0 || size+len(recs[o]) <= l.opts.MaxFrameBytes); o++ {
				batch = append(batch, recs[o])
				size += len(recs[o])
			}
			content := encodeFrame(frameData, l.epoch, from, -1, batch)
			var err error
			pos, err = z.appendAfter(ctx, tip, pos, prev, content)
			prev = content
			if err != nil {
				if errors.Is(err, blob.ErrPrecondition) {
					return l.fencedOrLost(ctx, z, tip, pos, err)
				}
				return err
			}
			from += int64(len(batch))
			reached[z.idx] = from - 1
		}
		return nil
	})
	for _, err := range errs {
		if errors.Is(err, ErrFenced) {
			return recovered{}, err
		}
	}
	if countNil(errs) >= w {
		return recovered{last: last, used: len(recs) > 0}, nil
	}
	// Zones that could not take the copies because their objects are at
	// the part limit end the segment where W zones hold every record; the
	// records after that go into the next segment. Readers end a segment
	// where the next one begins, so none of them reads the stranded copies.
	limited := 0
	for _, err := range errs {
		if isPartLimit(err) {
			limited++
		}
	}
	if limited == 0 || countNil(errs)+limited < w {
		return recovered{}, quorumErr(fmt.Sprintf("copying records %d..%d of segment %s", tip.first, last, tip), w, errs)
	}
	var ends []int64
	for i, c := range copies {
		if c != nil {
			ends = append(ends, reached[i])
		}
	}
	slices.Sort(ends)
	end := ends[len(ends)-w] // the last offset W zones hold
	out := recovered{last: end, used: len(recs) > 0}
	for o := end + 1; o <= last; o++ {
		out.carry = append(out.carry, recs[o])
	}
	return out, nil
}

// contiguous returns the last offset of the records of frames held without a
// gap from first on.
func contiguous(frames []frame, first int64) int64 {
	have := map[int64]bool{}
	for _, f := range frames {
		if f.kind == frameData {
			for j := range f.records {
				have[f.first+int64(j)] = true
			}
		}
	}
	last := first - 1
	for have[last+1] {
		last++
	}
	return last
}

// fenceZone appends a fence frame at the end of segment tip on z (creating
// the segment with only its header and the fence if z lacks it), so that the
// old writer's next conditional append there fails, and returns what z held.
func (l *Log) fenceZone(ctx context.Context, z *zone, tip segKey, header, fence []byte) (*fencedCopy, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, time.Duration(attempt)*time.Millisecond); err != nil {
				return nil, err
			}
		}
		frames, end, err := z.read(ctx, tip, 0)
		if errors.Is(err, blob.ErrNotFound) {
			if header == nil {
				return nil, err
			}
			content := append(bytes.Clone(header), fence...)
			err = z.create(ctx, tip, content)
			if err == nil {
				fr, _, _ := decodeFrames(content)
				end := int64(len(content))
				if z.mode == modeSlots {
					end = 1
				}
				return &fencedCopy{frames: fr, end: end, last: content}, nil
			}
			if errors.Is(err, blob.ErrExists) {
				continue
			}
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if e := maxEpochIn(frames); e > l.epoch {
			return nil, fmt.Errorf("%w: segment %s holds a frame of epoch %d, ours is %d", ErrFenced, tip, e, l.epoch)
		}
		if m, ok := movedIn(frames); ok {
			return &fencedCopy{frames: frames, end: end, moved: &m}, nil
		}
		newEnd, err := z.append(ctx, tip, end, fence)
		if (errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound)) && attempt < 1000 {
			// The old writer (or an earlier attempt of ours) appended, or
			// its mover replaced the segment with a marker (a stream over
			// the replaced object finds it gone): look again.
			continue
		}
		if isPartLimit(err) {
			// The store takes no more appends to the segment, the old
			// writer's included: it is fenced as it is.
			return &fencedCopy{frames: frames, end: end}, nil
		}
		if err != nil {
			return nil, err
		}
		return &fencedCopy{frames: frames, end: newEnd, last: fence}, nil
	}
}

// fencedOrLost explains a failed conditional append at pos: ErrFenced if a
// newer epoch wrote there, cause otherwise.
func (l *Log) fencedOrLost(ctx context.Context, z *zone, k segKey, pos int64, cause error) error {
	frames, _, err := z.read(ctx, k, 0)
	if err == nil && maxEpochIn(frames) > l.epoch {
		return fmt.Errorf("%w: segment %s on zone %d", ErrFenced, k, z.idx)
	}
	return cause
}

func maxEpochIn(frames []frame) uint64 {
	var m uint64
	for _, f := range frames {
		m = max(m, f.epoch)
	}
	return m
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
