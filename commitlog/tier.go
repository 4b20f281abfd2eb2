package commitlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// A sealed segment (one that has a successor on the chain, so every record
// in it is committed and its end is known) leaves the zonal stores once its
// successor is older than MoveAfter: the mover writes one packed copy of its
// committed records to the cold store, under the same key, and then deletes
// the zonal copies. Cold first, zonal delete after: at every moment the
// segment is whole in at least one tier, and readers that find a segment
// gone from the zones list the cold store. Segments no chain reaches (made
// by fenced writers and never used) are deleted from the zones.

// coldZone is the cold store seen as a zone holding whole segment objects.
func coldZone(cold blob.Store, name string) *zone {
	if cold == nil {
		return nil
	}
	return &zone{idx: -1, s: cold, log: name, mode: modeAppend}
}

// MoveStats counts what MoveSealed did.
type MoveStats struct {
	Moved        int // segments copied to the cold store and deleted from the zones
	OrphansFreed int // unused segments deleted from the zones
}

// MoveSealed moves the sealed segments whose successor is older than age to
// the cold store (Options.Cold) and deletes unused segments older than age
// from the zones. The writer runs it every MoveAfter/4 when Options.Cold is
// set; call it directly to move on demand.
func (l *Log) MoveSealed(ctx context.Context, age time.Duration) (MoveStats, error) {
	var st MoveStats
	if l.cold == nil {
		return st, errors.New("commitlog: no cold store")
	}
	l.mu.Lock()
	cur, err := l.seg.key, l.err
	l.mu.Unlock()
	if err != nil {
		return st, err
	}
	keys, err := listChain(ctx, l.zones, len(l.zones)-l.opts.WriteQuorum+1, l.opts.OpTimeout, nil)
	if err != nil {
		return st, err
	}
	headers := map[segKey]frame{}
	header := func(k segKey) (frame, error) {
		if h, ok := headers[k]; ok {
			return h, nil
		}
		h, err := readHeaderAny(ctx, l.zones, k, l.opts.OpTimeout)
		if err == nil {
			headers[k] = h
		}
		return h, err
	}
	// The chain from the writer's segment back, as far as the zones hold it.
	onChain := map[segKey]segKey{} // segment -> its successor
	at := cur
	for {
		var prev segKey
		var found bool
		for i := len(keys) - 1; i >= 0; i-- {
			if k := keys[i]; k.epoch == at.epoch && k.first < at.first {
				prev, found = k, true
				break
			}
		}
		if !found {
			h, err := header(at)
			if err != nil {
				return st, err
			}
			if h.prevEpoch == 0 {
				break
			}
			prev = segKey{h.prevEpoch, h.prevFirst}
			if !containsKey(keys, prev) {
				break // already cold
			}
		}
		onChain[prev] = at
		at = prev
	}
	lowest := at // the walk stopped here: below it, nothing is known to be an orphan
	now := time.Now()
	for _, k := range keys {
		if !k.less(cur) {
			continue
		}
		next, sealed := onChain[k]
		if !sealed {
			if !lowest.less(k) {
				continue
			}
			h, err := header(k)
			if err != nil || now.Sub(time.Unix(0, h.created)) < age {
				continue
			}
			if err := l.deleteZonal(ctx, k); err != nil {
				return st, err
			}
			st.OrphansFreed++
			continue
		}
		h, err := header(next)
		if err != nil || now.Sub(time.Unix(0, h.created)) < age {
			continue
		}
		if err := l.moveSegment(ctx, k, next.first-1); err != nil {
			return st, err
		}
		st.Moved++
	}
	return st, nil
}

func containsKey(keys []segKey, k segKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func readHeaderAny(ctx context.Context, zones []*zone, k segKey, timeout time.Duration) (frame, error) {
	var errs []error
	for _, z := range zones {
		c, cancel := context.WithTimeout(ctx, timeout)
		h, err := z.readHeader(c, k)
		cancel()
		if err == nil {
			return h, nil
		}
		errs = append(errs, err)
	}
	return frame{}, fmt.Errorf("commitlog: no zone has the header of segment %s: %w", k, errors.Join(errs...))
}

// moveSegment packs the records of segment k up to end into one cold
// object, then deletes the zonal copies.
func (l *Log) moveSegment(ctx context.Context, k segKey, end int64) error {
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
		if content = pack(frames, k, end, l.opts.MaxFrameBytes); content != nil {
			break
		}
		errs = append(errs, fmt.Errorf("zone %d lacks records of segment %s", z.idx, k))
	}
	if content == nil {
		return fmt.Errorf("commitlog: moving segment %s: %w", k, errors.Join(errs...))
	}
	err := blob.Put(ctx, l.cold.s, l.cold.segKey(k), content, &blob.WriterOptions{If: blob.IfNotExist()})
	if err != nil && !errors.Is(err, blob.ErrExists) {
		return err
	}
	if errors.Is(err, blob.ErrExists) {
		// An earlier move wrote it (and failed after): check it is whole.
		got, err := blob.ReadAll(ctx, l.cold.s, l.cold.segKey(k))
		if err != nil {
			return err
		}
		if string(got) != string(content) {
			return fmt.Errorf("commitlog: cold copy of segment %s differs from the zones'", k)
		}
	}
	return l.deleteZonal(ctx, k)
}

// pack returns the header of frames and their records from k.first to end
// as frames, or nil if frames lack some of them.
func pack(frames []frame, k segKey, end int64, maxFrame int) []byte {
	if len(frames) == 0 || frames[0].kind != frameHeader {
		return nil
	}
	recs := make([][]byte, end-k.first+1)
	have := 0
	for _, f := range frames {
		if f.kind != frameData {
			continue
		}
		for j, r := range f.records {
			o := f.first + int64(j)
			if o >= k.first && o <= end && recs[o-k.first] == nil {
				recs[o-k.first] = r
				have++
			}
		}
	}
	if have != len(recs) {
		return nil
	}
	out := append([]byte(nil), frames[0].raw...)
	for i := 0; i < len(recs); {
		n, size := 0, 0
		for i+n < len(recs) && (n == 0 || size+len(recs[i+n]) <= maxFrame) {
			size += len(recs[i+n])
			n++
		}
		out = append(out, encodeFrame(frameData, k.epoch, k.first+int64(i), end, recs[i:i+n])...)
		i += n
	}
	return out
}

// deleteZonal deletes segment k from every zone (NotFound is fine).
func (l *Log) deleteZonal(ctx context.Context, k segKey) error {
	errs := onAll(ctx, l.zones, l.opts.OpTimeout, func(ctx context.Context, z *zone) error {
		return z.delete(ctx, k)
	})
	return errors.Join(errs...)
}

// mover moves sealed segments in the background while the writer lives.
func (l *Log) mover() {
	every := max(l.opts.MoveAfter/4, 10*time.Millisecond)
	for sleep(l.ctx, every) == nil {
		l.MoveSealed(l.ctx, l.opts.MoveAfter)
	}
}
