package commitlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Sealed segments leave the zonal stores for the regional one
// (Options.Regional) once they have been sealed for Options.MoveAfter. A
// segment can move once every record in it is committed and its end is
// known: it is on the writer's chain before the writer's open segment. The
// move is:
//
//  1. pack the segment's records (read from a zone that has them all) into
//     one object under the same key on the regional store, created with
//     IfNotExist (an earlier move that got this far left the same bytes);
//  2. finalize it where the store has unfinalized objects (blob.Finalize);
//  3. on each zone, overwrite the segment with a marker, under the
//     generation the copy had when it was read: a moved frame naming the
//     segment's last offset and the regional object's length and CRC-32C.
//
// The zonal copies are never deleted. A copy holds the fence frames of the
// recoveries that fenced the segment; deleting it would let a writer that
// was fenced and does not know it yet create the segment again and collect
// acknowledgements no chain includes. The marker keeps that door shut: it
// exists, so a create fails; it is shorter than any segment header, so no
// writer's append (conditional on the segment's size, or on its stream's
// size) can match it; and its frame's epoch is the mover's, so a writer that
// reads it is fenced. Markers are kept: they are 54 bytes a zone, and
// collecting one needs a proof that no writer of an older epoch is still
// alive, which a log without leases cannot give (a paused process may wake
// at any time).
//
// Readers find the marker where they expected frames and read the regional
// copy instead; listings stay on the zones, where the markers are.
//
// Stores without appends (slot directories) keep their segments: one
// marker object cannot shut a directory of slots.

const frameMoved frameKind = 5 // the segment moved to the regional store

// ErrNoRegional is returned by a Reader that reaches a segment moved to the
// regional store without Options.Regional.
var ErrNoRegional = errors.New("commitlog: segment moved to the regional store, and the reader has none")

// encodeMoved encodes a moved marker for segment k, whose last offset is
// last, naming the regional copy's length and CRC-32C.
func encodeMoved(epoch uint64, k segKey, last int64, regional []byte) []byte {
	var info [12]byte
	binary.BigEndian.PutUint64(info[:], uint64(len(regional)))
	binary.BigEndian.PutUint32(info[8:], crc32.Checksum(regional, crcTable))
	return encodeFrame(frameMoved, epoch, k.first, last, [][]byte{info[:]})
}

// movedInfo returns the length and checksum a moved frame names.
func movedInfo(f frame) (int64, uint32, bool) {
	if f.kind != frameMoved || len(f.records) != 1 || len(f.records[0]) != 12 {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(f.records[0])), binary.BigEndian.Uint32(f.records[0][8:]), true
}

// movedIn returns the moved frame among frames, if any.
func movedIn(frames []frame) (frame, bool) {
	for _, f := range frames {
		if f.kind == frameMoved {
			return f, true
		}
	}
	return frame{}, false
}

// regionalZone is the regional store seen as a zone of whole segment objects.
func regionalZone(s blob.Store, name string) *zone {
	if s == nil {
		return nil
	}
	return &zone{idx: -1, s: s, log: name, mode: modeAppend}
}

// readRegional reads the regional copy of segment k and checks it against
// the marker m.
func readRegional(ctx context.Context, rz *zone, k segKey, m frame) ([]frame, error) {
	if rz == nil {
		return nil, fmt.Errorf("%w: segment %s", ErrNoRegional, k)
	}
	p, err := blob.ReadAll(ctx, rz.s, rz.segKey(k))
	if errors.Is(err, blob.ErrNotFound) {
		// A marker is written only once the regional copy is whole: a
		// copy gone since was lost, and no other will appear.
		return nil, fmt.Errorf("%w: %w: regional copy %s of segment %s, which its zonal markers name, is gone", blob.ErrCorrupt, errCorrupt, rz.segKey(k), k)
	}
	if err != nil {
		return nil, err
	}
	n, sum, ok := movedInfo(m)
	if !ok || int64(len(p)) != n || crc32.Checksum(p, crcTable) != sum {
		// The zonal copies are markers: this was the only copy left.
		return nil, fmt.Errorf("%w: %w: regional copy %s of segment %s is not the one its marker names (%d bytes, want %d)", blob.ErrCorrupt, errCorrupt, rz.segKey(k), k, len(p), n)
	}
	frames, _, err := decodeFrames(p)
	if err != nil {
		return nil, fmt.Errorf("%w: regional copy %s of segment %s: %w", blob.ErrCorrupt, rz.segKey(k), k, err)
	}
	return frames, nil
}

// MoveStats counts what the writer's mover did.
type MoveStats struct {
	Moved   int64 // segments whose regional copy is whole and whose copies on W zones are markers (the others are marked when their zones answer)
	Markers int64 // zonal copies replaced by a marker
	Errors  int64 // moves that failed (and are retried later)
}

// moveOnce moves the segments sealed long enough; the writer runs it every
// MoveAfter/4 while it lives.
func (l *Log) moveOnce() {
	if l.moverDone {
		return
	}
	c, cancel := context.WithTimeout(l.ctx, 4*l.opts.OpTimeout)
	defer cancel()
	if err := l.moveSealed(c); err != nil {
		l.mu.Lock()
		l.moves.Errors++
		l.mu.Unlock()
	}
}

// MoveStats returns what the mover did.
func (l *Log) MoveStats() MoveStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moves
}

// moveSealed moves every segment before the writer's open one that has been
// sealed, as this writer has seen, for MoveAfter.
func (l *Log) moveSealed(ctx context.Context) error {
	if l.regional == nil || l.zones[0].mode == modeSlots {
		return nil
	}
	l.tierMu.Lock()
	defer l.tierMu.Unlock()
	l.mu.Lock()
	cur := l.seg.key
	l.mu.Unlock()
	chain, err := l.chainTo(ctx, cur)
	if errors.Is(err, ErrFenced) {
		l.moverDone = true // a newer writer moves them now
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now()
	errs := l.markPending(ctx)
	if slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, ErrFenced) }) {
		l.moverDone = true
		return nil
	}
	for i, k := range chain[:len(chain)-1] {
		if l.moved[k] {
			continue
		}
		seen, ok := l.sealedAt[k]
		if !ok {
			l.sealedAt[k] = now
			continue
		}
		if now.Sub(seen) < l.opts.MoveAfter {
			continue
		}
		if err := l.stillCurrent(ctx); errors.Is(err, ErrFenced) {
			l.moverDone = true
			return nil
		} else if err != nil {
			return errors.Join(append(errs, err)...)
		}
		pending, err := l.moveSegment(ctx, k, chain[i+1].first-1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(l.sealedAt, k)
		l.mu.Lock()
		l.moved[k] = true
		l.moves.Moved++
		for _, z := range pending {
			l.unmarked[z] = append(l.unmarked[z], k)
		}
		l.mu.Unlock()
	}
	return errors.Join(errs...)
}

// markPending retries the markers that zones missed when their segments
// moved: each zone's oldest, and the rest of that zone's only if it took
// it, so that a zone that stays down costs one call a pass, however many
// segments move meanwhile.
func (l *Log) markPending(ctx context.Context) []error {
	l.mu.Lock()
	todo := map[int][]segKey{}
	for z, ks := range l.unmarked {
		todo[z] = slices.Clone(ks)
	}
	l.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	if err := l.stillCurrent(ctx); err != nil {
		return []error{err}
	}
	var errs []error
	for zi, ks := range todo {
		z := l.zones[zi]
		done := 0
		for _, k := range ks {
			if err := l.remark(ctx, z, k); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: marker of segment %s on zone %d: %w", k, zi, err))
				break
			}
			done++
		}
		l.mu.Lock()
		l.unmarked[zi] = l.unmarked[zi][done:]
		if len(l.unmarked[zi]) == 0 {
			delete(l.unmarked, zi)
		}
		l.mu.Unlock()
	}
	return errs
}

// stillCurrent fails with ErrFenced once a newer writer has claimed an epoch
// on a majority: the mover's and the repairer's writes (copies, markers)
// are only the current writer's, or one could land after the newer writer
// truncated the segment and bring it back (a marker naming a regional copy
// that is gone). Checked just before the writes; a writer paused between
// the check and a write can still land one, which the next truncation
// removes.
func (l *Log) stillCurrent(ctx context.Context) error {
	return checkEpoch(ctx, l.zones, l.epoch, l.opts.OpTimeout)
}

// remark writes the marker of moved segment k on z, from its regional copy.
func (l *Log) remark(ctx context.Context, z *zone, k segKey) error {
	c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
	defer cancel()
	content, err := blob.ReadAll(c, l.regional.s, l.regional.segKey(k))
	if err != nil {
		return err
	}
	frames, _, err := decodeFrames(content)
	if err != nil {
		return fmt.Errorf("%w: regional copy of segment %s: %w", blob.ErrCorrupt, k, err)
	}
	last := k.first - 1
	for _, f := range frames {
		if f.kind == frameData {
			last = max(last, f.first+int64(len(f.records))-1)
		}
	}
	return l.markMoved(c, z, k, encodeMoved(l.epoch, k, last, content))
}

// chainTo returns the chain of segments that ends at cur, oldest first, as
// far back as the zones list it.
func (l *Log) chainTo(ctx context.Context, cur segKey) ([]segKey, error) {
	keys, err := listChain(ctx, l.zones, len(l.zones)-l.opts.WriteQuorum+1, l.opts.OpTimeout, nil, false)
	if err != nil {
		return nil, err
	}
	return l.chainIn(ctx, cur, keys)
}

// chainIn returns the chain that ends at cur among keys, the segments the
// zones listed (sorted, each once).
func (l *Log) chainIn(ctx context.Context, cur segKey, keys []segKey) ([]segKey, error) {
	for _, k := range keys {
		if k.epoch <= cur.epoch {
			continue
		}
		// A newer writer's, unless it is no segment at all (errNoSegment):
		// garbage must not stop the moves.
		if _, err := segmentHeader(ctx, l.zones, l.regional, k, l.opts.OpTimeout); !errors.Is(err, errNoSegment) {
			return nil, fmt.Errorf("%w: a newer writer has segments", ErrFenced)
		}
		keys = slices.DeleteFunc(keys, func(o segKey) bool { return o == k })
	}
	var chain []segKey
	at := cur
	for {
		var epochSegs []segKey
		for _, k := range keys {
			if k.epoch == at.epoch && k.first <= at.first {
				epochSegs = append(epochSegs, k)
			}
		}
		if len(epochSegs) == 0 || epochSegs[len(epochSegs)-1] != at {
			epochSegs = append(epochSegs, at)
		}
		chain = append(epochSegs, chain...)
		h, err := l.headerOf(ctx, chain[0])
		if err != nil {
			return nil, err
		}
		if h.prevEpoch == 0 {
			return chain, nil
		}
		at = segKey{h.prevEpoch, h.prevFirst}
		if !slices.Contains(keys, at) {
			return chain, nil
		}
	}
}

// headerOf returns the header of segment k from a zone, or from the
// regional copy if it moved.
func (l *Log) headerOf(ctx context.Context, k segKey) (frame, error) {
	if h, ok := l.headers[k]; ok {
		return h, nil
	}
	var errs []error
	read := func(z *zone) (frame, error) {
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		defer cancel()
		h, err := z.readHeader(c, k)
		if err == nil {
			h.raw = nil
			l.headers[k] = h
		}
		return h, err
	}
	for _, z := range l.zones {
		h, err := read(z)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
		if errors.Is(err, errMovedSegment) {
			break // the header is in the regional copy
		}
	}
	if l.regional != nil {
		h, err := read(l.regional)
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
	}
	return frame{}, fmt.Errorf("commitlog: no zone has the header of segment %s: %w", k, errors.Join(errs...))
}

// moveSegment moves segment k, whose last offset is last, to the regional
// store and leaves a marker on every zone. The move is done once W zones
// hold the marker (a zone down must not stop every later move); it returns
// the zones that missed theirs, which the mover marks later.
func (l *Log) moveSegment(ctx context.Context, k segKey, last int64) ([]int, error) {
	// The regional copy: from a zone that holds every record, or, if an
	// earlier move wrote markers already, the copy that exists.
	var content []byte
	var errs []error
	for _, z := range l.zones {
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		frames, _, err := z.read(c, k, 0)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m, ok := movedIn(frames); ok {
			c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
			_, err := readRegional(c, l.regional, k, m)
			cancel()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			content, errs = nil, nil
			break // the regional copy exists and is whole
		}
		if content = pack(frames, k, last, l.opts.MaxFrameBytes); content != nil {
			errs = nil // the zones read before this one are not needed
			break
		}
		errs = append(errs, fmt.Errorf("zone %d lacks records of segment %s", z.idx, k))
	}
	if errs != nil {
		return nil, fmt.Errorf("commitlog: moving segment %s: %w", k, errors.Join(errs...))
	}
	key := l.regional.segKey(k)
	if content != nil {
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		err := blob.Put(c, l.regional.s, key, content, &blob.WriterOptions{If: blob.IfNotExist()})
		cancel()
		if errors.Is(err, blob.ErrExists) {
			// An earlier move wrote it (and may have failed after): the
			// records are the same, so are the bytes.
			c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
			got, rerr := blob.ReadAll(c, l.regional.s, key)
			cancel()
			if rerr != nil {
				return nil, rerr
			}
			if string(got) != string(content) {
				return nil, fmt.Errorf("%w: regional copy of segment %s differs from the zones'", errCorrupt, k)
			}
			err = nil
		}
		if err != nil {
			return nil, err
		}
	} else {
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		p, err := blob.ReadAll(c, l.regional.s, key)
		cancel()
		if err != nil {
			return nil, err
		}
		content = p
	}
	c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
	err := blob.Finalize(c, l.regional.s, key)
	cancel()
	if err != nil {
		return nil, err
	}
	marker := encodeMoved(l.epoch, k, last, content)
	errs = onAll(ctx, l.zones, l.opts.OpTimeout, func(ctx context.Context, z *zone) error {
		return l.markMoved(ctx, z, k, marker)
	})
	if countNil(errs) < l.opts.WriteQuorum {
		return nil, errors.Join(errs...)
	}
	var pending []int
	for i, err := range errs {
		if err != nil {
			pending = append(pending, i)
		}
	}
	return pending, nil
}

// markMoved overwrites z's copy of segment k with marker, under the
// generation the copy has, unless it is a marker already.
func (l *Log) markMoved(ctx context.Context, z *zone, k segKey, marker []byte) error {
	key := z.segKey(k)
	attrs, err := z.s.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		// No copy here: a marker in its place shuts the key all the same.
		err = blob.Put(ctx, z.s, key, marker, &blob.WriterOptions{If: blob.IfNotExist()})
		if errors.Is(err, blob.ErrExists) {
			return fmt.Errorf("commitlog: segment %s appeared on zone %d while moving it", k, z.idx)
		}
		if err == nil {
			l.countMarker()
		}
		return err
	}
	if err != nil {
		return err
	}
	head, err := z.readPrefix(ctx, k, int64(len(marker)))
	if err != nil {
		return err
	}
	if _, ok := movedIn(head); ok {
		return nil
	}
	if attrs.Generation == "" {
		return fmt.Errorf("commitlog: zone %d reports no generation for segment %s", z.idx, k)
	}
	z.dropSegmentStream(k)
	// The overwrite replaces the copy as soon as its message lands. Cut off
	// after that and before its reply (the writer closing, the mover's
	// bound), the GCS driver deletes what it wrote: the zone would hold
	// neither the copy nor the marker, and a listing there would miss the
	// segment (TestMarkerCutOffAfterLanding). So it runs to a bound of its
	// own, which Close waits out.
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.OpTimeout)
	defer cancel()
	if err := blob.Put(c, z.s, key, marker, &blob.WriterOptions{If: blob.IfGenerationMatch(attrs.Generation)}); err != nil {
		return err
	}
	l.countMarker()
	return nil
}

func (l *Log) countMarker() {
	l.mu.Lock()
	l.moves.Markers++
	l.mu.Unlock()
}

// pack returns the header of frames and their records from k.first to last
// as frames, or nil if frames lack some of them.
func pack(frames []frame, k segKey, last int64, maxFrame int) []byte {
	if len(frames) == 0 || frames[0].kind != frameHeader {
		return nil
	}
	recs := make([][]byte, last-k.first+1)
	have := 0
	for _, f := range frames {
		if f.kind != frameData {
			continue
		}
		for j, r := range f.records {
			o := f.first + int64(j)
			if o >= k.first && o <= last && recs[o-k.first] == nil {
				recs[o-k.first] = r
				have++
			}
		}
	}
	if have != len(recs) {
		return nil
	}
	return append(append([]byte(nil), frames[0].raw...), dataFrames(k.epoch, k.first, last, recs, maxFrame)...)
}

// dataFrames frames recs, the records first..last, at most maxFrame bytes a
// frame (a larger record alone), each frame carrying last as its LAC: they
// are committed.
func dataFrames(epoch uint64, first, last int64, recs [][]byte, maxFrame int) []byte {
	var out []byte
	for i := 0; i < len(recs); {
		n, size := 0, 0
		for i+n < len(recs) && (n == 0 || size+len(recs[i+n]) <= maxFrame) {
			size += len(recs[i+n])
			n++
		}
		out = append(out, encodeFrame(frameData, epoch, first+int64(i), last, recs[i:i+n])...)
		i += n
	}
	return out
}
