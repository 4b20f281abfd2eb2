package commitlog

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Log is the one writer of a log. Append is safe for concurrent use; calls
// that arrive while an append is in flight share the next one (group commit).
type Log struct {
	name  string
	zones []*zone
	opts  Options
	epoch uint64

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	cond *sync.Cond // pumps wait on it for work
	// pumping: the zone's pump runs. An idle pump returns (a process
	// holds thousands of idle logs); kickLocked starts it again.
	pumping []bool
	// idleTimers close a zone's streams once its pump has been idle for
	// StreamIdle; idleSpell counts the pump's idle spells, so that a
	// timer set for one that has ended does nothing.
	idleTimers []*time.Timer
	idleSpell  []int
	timers     []*time.Timer // the mover's and the repairer's (see every)
	// waiters are the Appends waiting for the LAC, lowest last offset
	// first: an advance wakes only those it covers, where a broadcast woke
	// every one of them (64 appenders, 8 frames in flight: most woke to
	// wait again, each taking mu from the pumps and replies).
	waiters      waiterHeap
	next         int64    // offset of the next record appended
	pending      [][]byte // records not yet in a frame, ending at next-1
	lac          int64    // last-add-confirmed: every record up to it is on W zones
	lacCut       int64    // highest LAC written into a frame
	cutTo        int64    // highest offset ever cut into a frame (sent, or may be)
	lacScheduled bool
	seg          *openSeg
	err          error // sticky: ErrFenced, ErrClosed

	// The mover (tier.go); moved and sealedAt are its own, and tierMu
	// keeps it and TruncateBefore out of each other's way.
	tierMu   sync.Mutex
	regional *zone
	moved    map[segKey]bool
	sealedAt map[segKey]time.Time
	// unmarked: per zone, moved segments whose copy there is not a marker
	// yet (the zone was down), oldest first; the mover retries each zone's
	// oldest once a pass.
	unmarked map[int][]segKey
	headers  map[segKey]frame
	// repairSeen: when the repairer first saw each segment sealed;
	// repairOK: the slot zones whose header slot it found (their listing
	// still shows it if the whole copy goes).
	repairSeen map[segKey]time.Time
	repairOK   map[segKey]map[int]bool
	// amnesicAt: the zones the repairer found without the intact marker,
	// with the segment being written when it did.
	amnesicAt map[int]segKey
	// moverDone: a newer writer's segments exist; it moves them now.
	moverDone bool
	moves     MoveStats
	stats     Stats
	metrics   *writerMetrics
}

// Stats counts what a writer did.
type Stats struct {
	Records    int64 // records acknowledged
	Frames     int64 // frames of records cut (each sent once to each zone)
	LACFrames  int64 // frames with no records that only published the LAC
	Appends    int64 // appends made to zones, all zones together
	ZoneErrors int64 // appends or creates that failed on a zone
	Resyncs    int64 // times a zone's segment was read back after a failure
	Segments   int64 // segments started, the first included
	Prewarms   int64 // next segments created ahead of their roll
	RollWaits  int64 // rolls that had to wait for the next segment to be created
	CutShort   int64 // segments ended early because stores refused more appends (S3 TooManyParts)
	// UnusedSkipped counts segments with no record that Open fenced and
	// stepped over to recover the one before (created ahead of a roll that
	// never came).
	UnusedSkipped int64
	Fenced        bool  // a newer writer fenced this one
	RecoveredTo   int64 // last offset kept by the recovery at Open, -1 if none
	// Carried counts records Open's recovery moved into the new segment
	// because the zones that lacked them were at the store's part limit.
	Carried int64
	// Foreign counts objects under the log's epoch and segment prefixes
	// whose names do not parse (written by another tool, or damaged):
	// skipped, each time they are listed, and never trusted.
	Foreign int64
	// Truncated counts segments TruncateBefore deleted; Start is the first
	// offset the log still holds after the last truncation (0 before any).
	Truncated int64
	Start     int64
	// TruncateTo is the start the last truncation set out to reach: above
	// Start while one is under way or was cut off part way (the segment it
	// was deleting may then be readable from some zones and not others).
	TruncateTo int64
	// RetainErrors counts repair passes whose retention (Options.RetainFor,
	// RetainBytes) failed; the next pass tries again.
	RetainErrors int64
	// Missing counts the copies of sealed segments (or their markers) that
	// zones lacked when the repairer last looked: the durability lost until
	// it copies them back; a zone that lost this writer's epoch claim
	// counts one, and so does an amnesic zone not yet given its intact
	// marker back. Unchecked counts the copies it could not list or read
	// (their durability is unknown until a later pass). Amnesic counts the
	// zones found without the log's intact marker (replaced by an empty
	// bucket, or down when the log began) and not yet repaired: quorums do
	// not count them. Repaired counts the copies, claims and markers it
	// wrote, and RepairPasses its passes.
	Missing, Unchecked, Amnesic, Repaired, RepairPasses int64
	// NotSegments counts names that parse as segments but whose header no
	// zone holds (every zone answered): garbage under the segments'
	// prefix, which Open passes over (see errNoSegment).
	NotSegments int64
}

// openSeg is the segment being written.
type openSeg struct {
	key    segKey
	frames []outFrame // frames[0] is the header
	zs     []zoneSeg
	acked  int   // frames held by W zones
	bytes  int64 // size of the frames
	full   bool  // no more data frames: seal and roll
	sealed bool  // the seal frame is cut
	rolled bool  // the roll to the next segment has started
	// end is the planned last offset of the segment, -1 until planned: once
	// the segment is a quarter full the writer fixes where it ends and creates
	// the next segment, starting at end+1, in the background (next), so
	// that the roll is a switch and not a create.
	end  int64
	next *prewarm
	// frozen: the stores refused more appends (S3 Express TooManyParts)
	// on too many zones; the frames after acked never count, their records
	// go to the next segment.
	frozen bool
	// checked: startSegment has begun checking the epoch; a create that
	// lands after that checks it again (see createOn).
	checked bool
}

// prewarm is a segment being created ahead of its roll.
type prewarm struct {
	key  segKey
	done chan struct{} // closed when seg or err is set
	seg  *openSeg
	err  error
}

type outFrame struct {
	data  []byte
	last  int64    // last offset of the records of this frame and those before it
	first int64    // offset of recs[0]
	recs  [][]byte // the records of a data frame, sent again in the next segment if this one is cut short
}

// zoneSeg is the state of the open segment on one zone.
type zoneSeg struct {
	sent    int   // frames the zone holds
	pos     int64 // where the next append goes
	appends int
	busy    bool
	// A pipelined stream's appends: queued frames were handed to it (up to
	// qpos), inflight of its Sends are not acknowledged yet; sent and pos
	// advance as they are.
	queued   int
	qpos     int64
	inflight int
	resync   bool // a call failed: read back what the zone holds before appending
	broken   bool // the zone holds something else: it sits this segment out
	// last: in the slot layout, the bytes of the slot before pos, as this
	// writer put or read them there (see zone.appendAfter).
	last   []byte
	fails  int
	wakeAt time.Time
}

// Open opens the log name over stores (one per zone; one store is fine) as
// its only writer. It claims a new epoch on a majority of zones, which fences
// every earlier writer; recovers the last segment (every record that may have
// been acknowledged is kept and copied to W zones, nothing is duplicated);
// and starts a new segment after it. opts may be nil.
//
// Open needs a majority of zones to claim the epoch and N-W+1 to recover,
// counting only zones that hold the log's intact marker (see the package
// doc's Layout): a zone replaced by an empty bucket is not counted until a
// writer's repair has given it back what it held.
func Open(ctx context.Context, stores []blob.Store, name string, opts *Options) (*Log, error) {
	o, err := opts.withDefaults(len(stores))
	if err != nil {
		return nil, err
	}
	zones, err := zonesFor(stores, name, o)
	if err != nil {
		return nil, err
	}
	epoch, err := acquireEpoch(ctx, zones, o.OpTimeout)
	if err != nil {
		return nil, err
	}
	l := &Log{name: name, zones: zones, opts: o, epoch: epoch,
		regional: regionalZone(o.Regional, name), moved: map[segKey]bool{}, sealedAt: map[segKey]time.Time{}, unmarked: map[int][]segKey{}, headers: map[segKey]frame{}, repairSeen: map[segKey]time.Time{}, repairOK: map[segKey]map[int]bool{}, amnesicAt: map[int]segKey{}}
	l.cond = sync.NewCond(&l.mu)
	l.ctx, l.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*Log, error) {
		l.cancel()
		return nil, err
	}
	segs, err := listChain(ctx, zones, len(zones)-o.WriteQuorum+1, o.OpTimeout, nil, true)
	if err != nil {
		return fail(err)
	}
	last, prev := int64(-1), segKey{}
	var carry [][]byte
	// Recover the last segment. One with no records that follows another
	// of the same epoch may have been created ahead of its roll and never
	// used, so that the records before it may not reach its first offset:
	// fence it and recover the one before instead.
	for i := len(segs) - 1; i >= 0; i-- {
		tip := segs[i]
		rec, err := l.recoverSegment(ctx, tip)
		if errors.Is(err, errNoSegment) {
			// Not a segment any writer made: it holds nothing that was
			// acknowledged. The last real one is the tip.
			l.stats.NotSegments++
			continue
		}
		if err != nil {
			return fail(err)
		}
		last, carry = rec.last, rec.carry
		prev = tip
		if rec.used || i == 0 || segs[i-1].epoch != tip.epoch {
			break
		}
		l.stats.UnusedSkipped++
	}
	seg, err := l.startSegment(ctx, segKey{epoch, last + 1}, prev)
	if err != nil {
		return fail(err)
	}
	l.mu.Lock()
	l.seg, l.next, l.lac, l.lacCut, l.cutTo = seg, last+1, last, last, last
	l.ackLocked(seg) // creates that finished before it became current
	l.stats.RecoveredTo = last
	l.mu.Unlock()
	if l.metrics, err = newWriterMetrics(l); err != nil {
		return fail(err)
	}
	l.mu.Lock()
	l.pumping, l.idleSpell = make([]bool, len(zones)), make([]int, len(zones))
	l.idleTimers = make([]*time.Timer, len(zones))
	l.kickLocked()
	l.mu.Unlock()
	if l.regional != nil {
		l.every(max(o.MoveAfter/4, time.Millisecond), l.moveOnce)
	}
	if o.RepairInterval > 0 {
		l.every(o.RepairInterval, l.repairOnce)
	}
	if len(carry) > 0 {
		// Records the old segment could not give W zones: they are the new
		// segment's first, at the offsets they had, before any new one.
		if off, err := l.Append(ctx, carry...); err != nil || off != last+1 {
			l.Close()
			return nil, fmt.Errorf("commitlog: carrying records %d..%d into segment %s: %w", last+1, last+int64(len(carry)), seg.key, err)
		}
		l.mu.Lock()
		l.stats.RecoveredTo = last + int64(len(carry))
		l.stats.Carried += int64(len(carry))
		l.mu.Unlock()
	}
	return l, nil
}

// Epoch is the writer's fencing token.
func (l *Log) Epoch() uint64 { return l.epoch }

// Stats returns the writer's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	st := l.stats
	l.mu.Unlock()
	for _, z := range l.zones {
		st.Foreign += z.foreign.Load()
	}
	return st
}

// Committed returns the last-add-confirmed: every record up to this offset is
// on W zones and will be served by readers.
func (l *Log) Committed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lac
}

// end is the offset of the next record appended.
func (l *Log) end() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// failure is the writer's error (ErrFenced, ErrClosed), nil while it runs.
func (l *Log) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Append appends records and returns the offset of the first once all of
// them are on W zones. Records get consecutive offsets in call order.
//
// A record acknowledged by a nil error is never lost, duplicated or moved.
// If Append fails, its error says whether the records may be in the log
// regardless: with ErrUncertain (the caller's context ended, or the writer
// was fenced or closed after some of them were handed to the zones), they
// may be, once each, at the offsets returned, as with any write whose
// acknowledgement was lost; a caller that must know reopens the log (Open
// recovers every record that may have been acknowledged) and reads from
// the first offset. Without it (fenced or closed before any was handed
// over), none of them is in the log and none ever will be.
func (l *Log) Append(ctx context.Context, records ...[]byte) (int64, error) {
	if len(records) == 0 {
		return 0, errors.New("commitlog: Append of no records")
	}
	owned := make([][]byte, len(records))
	for i, r := range records {
		owned[i] = bytes.Clone(r)
	}
	first, err := l.enqueue(owned, -1)
	if err != nil {
		return 0, err
	}
	last := first + int64(len(records)) - 1
	return first, l.await(ctx, first, last)
}

// enqueue hands records, which the writer keeps, to the pumps and returns
// the offset of the first, or the writer's error without handing them over.
// With at >= 0 the first must go at offset at, or none is handed over.
func (l *Log) enqueue(records [][]byte, at int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if at >= 0 && l.next != at {
		return 0, fmt.Errorf("commitlog: records due at %d, but the log is at %d", at, l.next)
	}
	first := l.next
	l.pending = append(l.pending, records...)
	l.next += int64(len(records))
	l.kickLocked()
	return first, nil
}

// await waits until every record up to last is acknowledged. Its error
// wraps ErrUncertain if a record from first on may be in the log all the
// same (see Append).
func (l *Log) await(ctx context.Context, first, last int64) error {
	l.mu.Lock()
	for l.lac < last {
		if l.err != nil {
			err := l.err
			if l.cutTo >= first {
				err = fmt.Errorf("%w (%w): records %d..%d", err, ErrUncertain, first, last)
			}
			l.mu.Unlock()
			return err
		}
		w := &waiter{last: last, ch: make(chan struct{})}
		heap.Push(&l.waiters, w)
		l.mu.Unlock()
		select {
		case <-w.ch:
		case <-ctx.Done():
			// The writer goes on with them; the waiter stays in the
			// heap until the LAC or an error passes it.
			return fmt.Errorf("%w (%w): records %d..%d", ctx.Err(), ErrUncertain, first, last)
		}
		l.mu.Lock()
	}
	l.mu.Unlock()
	return nil
}

// waiter is an Append waiting until the LAC reaches last.
type waiter struct {
	last int64
	ch   chan struct{} // closed when woken
}

type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].last < h[j].last }
func (h waiterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waiterHeap) Push(x any)        { *h = append(*h, x.(*waiter)) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}

// wakeLocked wakes the waiters the LAC covers, or, once the writer has
// failed, every one.
func (l *Log) wakeLocked() {
	for len(l.waiters) > 0 && (l.err != nil || l.waiters[0].last <= l.lac) {
		close(heap.Pop(&l.waiters).(*waiter).ch)
	}
}

// Close stops the writer. Appends in flight fail with ErrClosed (their
// records may still be in the log). The log stays open for a later writer.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.err == nil {
		l.setErrLocked(ErrClosed)
	}
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	for _, t := range append(l.idleTimers, l.timers...) {
		if t != nil {
			t.Stop()
		}
	}
	l.mu.Unlock()
	for _, z := range l.zones {
		z.closeStreams(nil)
	}
	l.metrics.close()
	return nil
}

func (l *Log) setErrLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	l.wakeLocked()
	l.cond.Broadcast()
}

// fail makes err the writer's error.
func (l *Log) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, ErrFenced) {
		l.stats.Fenced = true
	}
	l.setErrLocked(err)
}

// startSegment creates segment k after prev on at least W zones, then checks
// that no newer epoch exists. It does not wait for the other zones: their
// creates go on, and zones that fail catch up later from the frames kept in
// memory.
func (l *Log) startSegment(ctx context.Context, k segKey, prev segKey) (*openSeg, error) {
	header := encodeHeader(k, prev)
	seg := &openSeg{key: k, frames: []outFrame{{data: header, last: k.first - 1}}, zs: make([]zoneSeg, len(l.zones)), bytes: int64(len(header)), end: -1}
	type result struct {
		zone int
		err  error
	}
	ch := make(chan result, len(l.zones))
	create := func(z *zone) {
		zs := &seg.zs[z.idx]
		c, cancel := context.WithTimeout(l.ctx, l.opts.OpTimeout)
		err := l.createOn(c, z, seg, zs)
		cancel()
		if l.ctx.Err() != nil {
			z.closeStreams(nil) // the writer closed while this create ran
		}
		l.mu.Lock()
		zs.busy = false
		if err != nil {
			l.stats.ZoneErrors++
			zs.resync = true
			zs.fails++
			zs.wakeAt = time.Now().Add(l.opts.RetryBackoff)
			// The zone's pump sleeps until wakeAt: wake it then, as no
			// other change may come to (a lost wakeup hung an Append).
			time.AfterFunc(l.opts.RetryBackoff, func() {
				l.mu.Lock()
				l.kickLocked()
				l.mu.Unlock()
			})
		} else if zs.sent > 1 {
			// A create that finishes after the segment became current
			// may carry frames cut meanwhile: they count toward W now,
			// as a pump's append would (else no one acknowledges them).
			l.ackLocked(seg)
		}
		l.kickLocked()
		l.mu.Unlock()
		ch <- result{z.idx, err}
	}
	l.mu.Lock()
	for i := range seg.zs {
		seg.zs[i].resync, seg.zs[i].busy = true, true // not created yet; creating
	}
	l.mu.Unlock()
	for _, z := range l.zones {
		go create(z)
	}
	ok := 0
	errs := make([]error, len(l.zones))
	for i := range errs {
		errs[i] = errPending
	}
	for n := 0; n < len(l.zones) && ok < l.opts.WriteQuorum; n++ {
		var r result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		errs[r.zone] = r.err
		if r.err == nil {
			ok++
		} else if errors.Is(r.err, ErrFenced) {
			return nil, r.err
		}
	}
	if ok < l.opts.WriteQuorum {
		return nil, quorumErr("creating segment "+k.String(), l.opts.WriteQuorum, errs)
	}
	l.mu.Lock()
	seg.checked = true // creates that land from now on check for themselves
	l.mu.Unlock()
	if err := checkEpoch(ctx, l.zones, l.epoch, l.opts.OpTimeout); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.stats.Segments++
	l.mu.Unlock()
	return seg, nil
}

// createOn creates seg on z with the frames cut so far, or, if it exists
// (an earlier attempt took effect), reads back what z holds.
//
// A create that lands after startSegment began its epoch check (one left
// running once W zones had the segment, or a pump's retry of a create that
// failed) is not covered by that check, and may land on a zone that a newer
// writer's recovery fenced and that was then replaced by an empty bucket:
// the create succeeds there, and with the zones that recovery did not
// reach the writer would make W and acknowledge records the recovery never
// saw. So such a create checks the epoch again before z counts: the newer
// writer claimed its epoch before fencing, so before the zone was replaced,
// so before the create landed, and a majority of zones that hold the intact
// marker after that shows it.
func (l *Log) createOn(ctx context.Context, z *zone, seg *openSeg, zs *zoneSeg) error {
	l.mu.Lock()
	n := len(seg.frames)
	content := frameBytes(seg.frames)
	l.mu.Unlock()
	err := z.create(ctx, seg.key, content)
	l.mu.Lock()
	late := seg.checked
	l.mu.Unlock()
	if late && (err == nil || errors.Is(err, blob.ErrExists)) {
		if err := checkEpoch(ctx, l.zones, l.epoch, l.opts.OpTimeout); err != nil {
			return err // an ErrExists next time: read back, after a check
		}
	}
	l.mu.Lock()
	switch {
	case err == nil:
		zs.sent, zs.resync = n, false
		zs.pos = int64(len(content))
		if z.mode == modeSlots {
			zs.pos, zs.last = 1, content
		}
		zs.appends++
		l.stats.Appends++
	case errors.Is(err, blob.ErrExists):
		zs.sent, zs.pos = 0, 0
	}
	l.mu.Unlock()
	if errors.Is(err, blob.ErrExists) {
		return l.resyncOn(ctx, z, seg, zs)
	}
	return err
}

// resyncOn reads what z holds of seg after what it is known to hold, and
// counts the frames that are ours. A frame of a newer epoch is a fence.
//
// In the slot layout it reads from the slot before pos, which must still
// hold what this writer put or read there: a slot is created whether or
// not the ones before it exist, so the frames after it count only if the
// zone still holds this writer's copy (see zone.appendAfter).
func (l *Log) resyncOn(ctx context.Context, z *zone, seg *openSeg, zs *zoneSeg) error {
	l.mu.Lock()
	pos, prev := zs.pos, zs.last
	l.mu.Unlock()
	from := pos
	if z.mode == modeSlots && pos > 0 {
		from--
	}
	frames, _, err := z.read(ctx, seg.key, from)
	if err != nil && !(errors.Is(err, blob.ErrNotFound) && from < pos) || err == nil && len(frames) == 0 {
		// Nothing past where this writer was may be a copy now shorter
		// than that: a newer writer recovered the segment and moved it,
		// and the marker at its head says so. Without a look there the
		// writer would find nothing new, append, fail on the size, and
		// retry the zone until its Appends time out.
		if head, herr := z.readPrefix(ctx, seg.key, 64); herr == nil {
			if m, ok := movedIn(head); ok && m.epoch > l.epoch {
				return fmt.Errorf("%w: epoch %d moved segment %s off zone %d", ErrFenced, m.epoch, seg.key, z.idx)
			}
		}
		if err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < pos {
		var got []byte
		for len(frames) > 0 && frames[0].end == pos {
			got = append(got, frames[0].raw...)
			frames = frames[1:]
		}
		if !bytes.Equal(got, prev) {
			if e := maxEpochIn(frames); e > l.epoch {
				return fmt.Errorf("%w: epoch %d fenced segment %s on zone %d", ErrFenced, e, seg.key, z.idx)
			}
			zs.broken = true
			return fmt.Errorf("%w: zone %d no longer holds slot %d of segment %s as written", errCopyLost, z.idx, pos-1, seg.key)
		}
	}
	var slot []byte
	for _, f := range frames {
		if f.epoch > l.epoch {
			return fmt.Errorf("%w: epoch %d fenced segment %s on zone %d", ErrFenced, f.epoch, seg.key, z.idx)
		}
		if zs.sent < len(seg.frames) && bytes.Equal(f.raw, seg.frames[zs.sent].data) {
			if f.end != zs.pos {
				slot = nil
			}
			slot = append(slot, f.raw...)
			zs.sent++
			zs.pos = f.end
			if z.mode == modeSlots {
				zs.last = slot
			}
			continue
		}
		zs.broken = true
		return fmt.Errorf("commitlog: zone %d holds an unexpected frame in segment %s", z.idx, seg.key)
	}
	zs.resync = false
	return nil
}

// pump sends the frames of the open segment to zone i, in order, as they
// are cut; it cuts a frame itself when it is idle and records are waiting.
func (l *Log) pump(i int) {
	z := l.zones[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idleSpell[i]++ // the spell before this run, if any, is over
	var last segKey
	var prev *zoneSeg
	for {
		if l.err != nil {
			return
		}
		seg := l.seg
		if seg.key != last {
			// A zone's streams are used by its pump alone: end those of
			// earlier segments here, not while an append may be on them.
			if prev != nil && prev.inflight > 0 {
				l.cond.Wait()
				continue
			}
			last, prev = seg.key, &seg.zs[i]
			l.mu.Unlock()
			z.closeStreams(&last)
			l.mu.Lock()
			continue
		}
		zs := &seg.zs[i]
		now := time.Now()
		if zs.broken || zs.busy || seg.frozen || now.Before(zs.wakeAt) || zs.resync && zs.inflight > 0 {
			l.cond.Wait()
			continue
		}
		var op func(ctx context.Context) error
		switch {
		case zs.resync && zs.sent == 0:
			op = func(ctx context.Context) error { return l.createOn(ctx, z, seg, zs) }
		case zs.resync:
			op = func(ctx context.Context) error { return l.resyncOn(ctx, z, seg, zs) }
		default:
			if len(l.pending) > 0 && !seg.full {
				l.cutLocked(seg)
			}
			if st := l.pipeOf(z, seg); st != nil {
				if !l.sendLocked(z, seg, zs, st) {
					if zs.inflight == 0 {
						l.idleLocked(i)
						return
					}
					l.cond.Wait()
				}
				continue
			}
			if zs.sent == len(seg.frames) {
				l.idleLocked(i)
				return
			}
			to := len(seg.frames)
			batch := frameBytes(seg.frames[zs.sent:])
			pos, prev := zs.pos, zs.last
			op = func(ctx context.Context) error {
				start := time.Now()
				newPos, err := z.appendAfter(ctx, seg.key, pos, prev, batch)
				if err != nil {
					return err
				}
				l.mu.Lock()
				l.appendedLocked(z, zs, to, newPos, batch, start)
				l.mu.Unlock()
				return nil
			}
		}
		zs.busy = true
		l.mu.Unlock()
		ctx, cancel := context.WithTimeout(l.ctx, l.opts.OpTimeout)
		err := op(ctx)
		cancel()
		l.mu.Lock()
		zs.busy = false
		if seg.frozen {
			l.kickLocked() // a cut short waits for the appends in flight
		}
		if err != nil {
			if !l.zoneFailedLocked(seg, zs, err) {
				return
			}
			continue
		}
		zs.fails = 0
		l.ackLocked(seg)
		l.kickLocked()
	}
}

// kickLocked wakes the pumps for work: those waiting, and those that
// returned idle, started again.
func (l *Log) kickLocked() {
	l.cond.Broadcast()
	if l.err != nil || l.pumping == nil {
		return // closing or fenced (Close waits for l.wg), or still opening
	}
	for i := range l.zones {
		if !l.pumping[i] {
			l.pumping[i] = true
			l.wg.Go(func() { l.pump(i) })
		}
	}
}

// idleLocked ends zone i's pump, which has nothing to append and nothing
// in flight: anything that gives it work kicks it again. Its streams close
// once it has stayed idle for StreamIdle.
func (l *Log) idleLocked(i int) {
	l.pumping[i] = false
	if l.opts.StreamIdle < 0 || !l.zones[i].holdsStreams() {
		return
	}
	spell := l.idleSpell[i]
	fire := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil || l.pumping[i] || l.idleSpell[i] != spell || !l.quietLocked(i) {
			return
		}
		// This goroutine stands for the pump while it closes the streams,
		// so that no append starts on one being closed; it then runs the
		// pump, which finds the work that came meanwhile, if any.
		l.pumping[i] = true
		l.wg.Go(func() {
			l.zones[i].closeStreams(nil)
			l.pump(i)
		})
	}
	if t := l.idleTimers[i]; t != nil {
		t.Stop()
	}
	l.idleTimers[i] = time.AfterFunc(l.opts.StreamIdle, fire)
}

// quietLocked reports that no create or append is under way on zone i, on
// the open segment or on the one created ahead of its roll.
func (l *Log) quietLocked(i int) bool {
	seg := l.seg
	if zs := seg.zs[i]; zs.busy || zs.inflight > 0 {
		return false
	}
	if p := seg.next; p != nil {
		select {
		case <-p.done:
		default:
			return false
		}
	}
	return true
}

// every runs f every d while the writer lives, on a timer: no goroutine
// waits between runs.
func (l *Log) every(d time.Duration, f func()) {
	var t atomic.Pointer[time.Timer]
	run := func() {
		l.mu.Lock()
		live := l.err == nil
		if live {
			l.wg.Add(1) // before Close waits: it sets l.err first
		}
		l.mu.Unlock()
		if !live {
			return
		}
		defer l.wg.Done()
		f()
		t.Load().Reset(d)
	}
	// Armed only once stored, so run always finds it.
	t.Store(time.AfterFunc(time.Duration(math.MaxInt64), run))
	l.mu.Lock()
	l.timers = append(l.timers, t.Load())
	l.mu.Unlock()
	t.Load().Reset(d)
}

// zoneFailedLocked handles the failure of an operation on a zone's copy of
// seg: it reports false if the writer is done (fenced).
func (l *Log) zoneFailedLocked(seg *openSeg, zs *zoneSeg, err error) bool {
	if errors.Is(err, ErrFenced) {
		l.stats.Fenced = true
		l.setErrLocked(err)
		return false
	}
	l.stats.ZoneErrors++
	if isPartLimit(err) {
		// This zone takes no more appends to the segment; if too
		// few zones can, end it where W zones hold it.
		zs.broken = true
		usable := 0
		for _, o := range seg.zs {
			if !o.broken {
				usable++
			}
		}
		if usable < l.opts.WriteQuorum {
			l.cutShortLocked(seg)
		}
		l.kickLocked()
		return true
	}
	if zs.sent > 0 {
		l.stats.Resyncs++
	}
	zs.resync = true
	zs.fails++
	d := min(l.opts.RetryBackoff<<min(zs.fails-1, 10), time.Second)
	zs.wakeAt = time.Now().Add(d)
	time.AfterFunc(d, func() {
		l.mu.Lock()
		l.kickLocked()
		l.mu.Unlock()
	})
	return true
}

// pipeOf returns the pipelined stream this process holds on z's copy of
// seg, if it holds one and pipelining is on; it does no I/O (a stream is
// taken over, when none is held, by the one-at-a-time path).
func (l *Log) pipeOf(z *zone, seg *openSeg) blob.PipelinedAppendStream {
	if z.mode != modeStream || l.opts.MaxInFlight < 2 {
		return nil
	}
	st, _ := z.held(seg.key).(blob.PipelinedAppendStream)
	return st
}

// sendLocked hands the frames of seg that z's stream has not been given to
// it without waiting for those in flight, up to MaxInFlight Sends; each is
// acknowledged as its reply comes, in order. It reports false if it had
// nothing to send or no room.
func (l *Log) sendLocked(z *zone, seg *openSeg, zs *zoneSeg, st blob.PipelinedAppendStream) bool {
	if zs.inflight == 0 {
		zs.queued, zs.qpos = zs.sent, zs.pos // every Send so far was answered
	}
	if zs.queued == len(seg.frames) || zs.inflight >= l.opts.MaxInFlight {
		return false
	}
	to := len(seg.frames)
	batch := frameBytes(seg.frames[zs.queued:])
	pos := zs.qpos
	end := pos + int64(len(batch))
	if zs.inflight == 0 && st.Size() != pos {
		// The stream holds something else: read back what the zone
		// holds, and take the object over again.
		z.forget(seg.key, st)
		zs.resync = true
		return true
	}
	zs.queued, zs.qpos = to, end
	zs.inflight++
	start := time.Now()
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.OpTimeout)
	done := func(err error) {
		cancel()
		l.mu.Lock()
		defer l.mu.Unlock()
		zs.inflight--
		if err != nil {
			l.sendFailedLocked(z, seg, zs, st, err)
			l.kickLocked()
			return
		}
		l.appendedLocked(z, zs, to, end, batch, start)
		zs.fails = 0
		l.ackLocked(seg)
		l.kickLocked()
	}
	l.mu.Unlock()
	err := st.Send(ctx, batch, done)
	l.mu.Lock()
	if err != nil {
		cancel()
		zs.inflight--
		l.sendFailedLocked(z, seg, zs, st, err)
	}
	return true
}

// sendFailedLocked handles a pipelined stream's failure: every later Send
// fails too, so the zone forgets the stream and, once none is in flight,
// reads back what it holds; the first failure alone counts.
func (l *Log) sendFailedLocked(z *zone, seg *openSeg, zs *zoneSeg, st blob.AppendStream, err error) {
	z.forget(seg.key, st)
	if !zs.resync && l.err == nil {
		l.zoneFailedLocked(seg, zs, err)
	}
}

// appendedLocked counts an append that made the zone hold the frames of
// its segment up to to, ending at pos; batch is what it appended.
func (l *Log) appendedLocked(z *zone, zs *zoneSeg, to int, pos int64, batch []byte, start time.Time) {
	l.metrics.recordFlush(z.idx, time.Since(start))
	zs.sent, zs.pos = to, pos
	if z.mode == modeSlots {
		zs.last = batch
	}
	zs.appends++
	l.stats.Appends++
}

// frameBytes is frames as they are appended: one after another.
func frameBytes(frames []outFrame) []byte {
	n := 0
	for _, f := range frames {
		n += len(f.data)
	}
	b := make([]byte, 0, n)
	for _, f := range frames {
		b = append(b, f.data...)
	}
	return b
}

// cutLocked moves waiting records into a new frame of seg.
func (l *Log) cutLocked(seg *openSeg) {
	first := l.next - int64(len(l.pending))
	n, size := 0, 0
	for n < len(l.pending) && (n == 0 || size+len(l.pending[n]) <= l.opts.MaxFrameBytes) {
		size += len(l.pending[n])
		n++
	}
	if seg.end >= 0 {
		n = min(n, int(seg.end-first+1))
		if n <= 0 {
			seg.full = true
			return
		}
	}
	recs := slices.Clone(l.pending[:n])
	data := encodeFrame(frameData, l.epoch, first, l.lac, recs)
	l.pending = slices.Delete(l.pending, 0, n)
	l.cutTo = max(l.cutTo, first+int64(n)-1)
	l.appendFrameLocked(seg, data, first+int64(n)-1)
	seg.frames[len(seg.frames)-1].first, seg.frames[len(seg.frames)-1].recs = first, recs
	if seg.end >= 0 && first+int64(n)-1 >= seg.end {
		seg.full = true // planned end reached
	}
	l.stats.Frames++
	l.metrics.recordFrame(n)
}

func (l *Log) appendFrameLocked(seg *openSeg, data []byte, last int64) {
	seg.frames = append(seg.frames, outFrame{data: data, last: last})
	seg.bytes += int64(len(data))
	l.lacCut = l.lac
	if seg.end < 0 && !seg.full && (len(seg.frames) >= l.opts.MaxSegmentAppends/4 || seg.bytes >= l.opts.MaxSegmentBytes/4) {
		l.planRollLocked(seg)
	}
	// Each zone takes at most one append per frame: a segment of at most
	// MaxSegmentAppends frames (its seal included) stays under the
	// stores' limit on appends to one object.
	if len(seg.frames) >= l.opts.MaxSegmentAppends-1 || seg.bytes >= l.opts.MaxSegmentBytes {
		seg.full = true
	}
}

// planRollLocked fixes where seg ends and starts creating the segment after
// it. The end leaves room for half the frames left, at the records per frame
// seen so far: the other half covers the frames that only publish the LAC
// (at most one per data frame) and a drop in load. If the frames still run
// out first, the segment ends early and one created on the spot carries the
// records up to the planned end (see roll).
func (l *Log) planRollLocked(seg *openSeg) {
	lastCut := seg.frames[len(seg.frames)-1].last
	perFrame := max((lastCut-seg.key.first+1)/int64(max(len(seg.frames)-1, 1)), 1)
	room := int64(l.opts.MaxSegmentAppends-len(seg.frames)-2) / 2 * perFrame
	seg.end = lastCut + max(room, 0)
	if seg.end == lastCut {
		seg.full = true
	}
	p := &prewarm{key: segKey{l.epoch, seg.end + 1}, done: make(chan struct{})}
	seg.next = p
	l.stats.Prewarms++
	prev := seg.key
	l.wg.Go(func() {
		p.seg, p.err = l.startSegment(l.ctx, p.key, prev)
		close(p.done)
	})
}

// cutShortLocked ends seg after the frames W zones hold, because the stores
// refuse more appends to it: no new append starts, and once those in flight
// have returned, the frames W zones hold are final (so a reader that finds a
// record on W zones finds one this segment keeps); the records of the frames
// after them are sent again in the next segment, at the same offsets
// (readers never serve them from this one, whose end is where the next
// begins).
func (l *Log) cutShortLocked(seg *openSeg) {
	if seg.frozen || seg.rolled || seg != l.seg {
		return
	}
	seg.frozen, seg.full, seg.rolled = true, true, true
	l.stats.CutShort++
	l.wg.Go(func() {
		l.mu.Lock()
		for slices.ContainsFunc(seg.zs, func(zs zoneSeg) bool { return zs.busy || zs.inflight > 0 }) && l.err == nil {
			l.cond.Wait()
		}
		l.advanceLocked(seg)
		var recs [][]byte
		for _, f := range seg.frames[seg.acked:] {
			recs = append(recs, f.recs...)
		}
		l.pending = append(recs, l.pending...)
		l.mu.Unlock()
		l.roll(seg)
	})
}

// isPartLimit reports a store's refusal of one more append to an object
// that has as many as it may have: S3's TooManyParts (10,000 parts, each
// append one), Azure's BlockCountExceedsLimit (50,000 committed blocks).
func isPartLimit(err error) bool {
	var coded interface{ ErrorCode() string }
	if !errors.As(err, &coded) {
		return false
	}
	switch coded.ErrorCode() {
	case "TooManyParts", "BlockCountExceedsLimit":
		return true
	}
	return false
}

// ackLocked advances the LAC to what W zones hold, and seals and rolls the
// segment once it is full and wholly acknowledged.
func (l *Log) ackLocked(seg *openSeg) {
	if seg != l.seg || seg.frozen {
		return
	}
	l.advanceLocked(seg)
	if seg.full && seg.acked == len(seg.frames) {
		switch {
		case !seg.sealed:
			seg.sealed = true
			l.appendFrameLocked(seg, encodeFrame(frameSeal, l.epoch, 0, l.lac, nil), l.lac)
		case !seg.rolled:
			seg.rolled = true
			l.wg.Go(func() { l.roll(seg) })
		}
	}
}

// advanceLocked advances seg.acked and the LAC to the frames W zones hold.
func (l *Log) advanceLocked(seg *openSeg) {
	sent := make([]int, len(seg.zs))
	for i, zs := range seg.zs {
		sent[i] = zs.sent
	}
	slices.Sort(sent)
	acked := sent[len(sent)-l.opts.WriteQuorum]
	if acked > seg.acked {
		seg.acked = acked
		if last := seg.frames[acked-1].last; last > l.lac {
			l.stats.Records += last - l.lac
			l.lac = last
			l.wakeLocked()
			l.scheduleLACLocked()
		}
	}
}

// scheduleLACLocked publishes the LAC in a frame of its own if no frame
// carries it within LACDelay.
func (l *Log) scheduleLACLocked() {
	if l.opts.LACDelay < 0 || l.lacScheduled {
		return
	}
	l.lacScheduled = true
	time.AfterFunc(l.opts.LACDelay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lacScheduled = false
		seg := l.seg
		if l.err != nil || l.lacCut >= l.lac || seg.full {
			return
		}
		if len(l.pending) > 0 {
			l.cutLocked(seg)
		} else {
			l.appendFrameLocked(seg, encodeFrame(frameData, l.epoch, l.lac+1, l.lac, nil), seg.frames[len(seg.frames)-1].last)
			l.stats.LACFrames++
		}
		l.kickLocked()
	})
}

// roll starts the segment after seg, whose frames up to acked are
// acknowledged (all of them unless it was cut short). If the segment ends
// where it was planned to, the next one was created ahead and the roll only
// switches to it; if it ends before (cut short), a segment is created for
// the records up to the planned end, after which the one created ahead
// follows.
func (l *Log) roll(seg *openSeg) {
	l.mu.Lock()
	last := seg.frames[seg.acked-1].last
	l.mu.Unlock()
	for attempt := 0; ; attempt++ {
		var next *openSeg
		var err error
		switch p := seg.next; {
		case p != nil && last == seg.end:
			select {
			case <-p.done:
			default:
				l.mu.Lock()
				l.stats.RollWaits++
				l.mu.Unlock()
				select {
				case <-p.done:
				case <-l.ctx.Done():
					return
				}
			}
			next, err = p.seg, p.err
			if err != nil && !errors.Is(err, ErrFenced) {
				// Create it again (what exists of it is read back).
				p.seg, p.err = l.startSegment(l.ctx, p.key, seg.key)
				next, err = p.seg, p.err
			}
		default:
			next, err = l.startSegment(l.ctx, segKey{l.epoch, last + 1}, seg.key)
		}
		if err == nil {
			l.mu.Lock()
			if p := seg.next; p != nil && next.key != p.key {
				next.end, next.next = seg.end, p
			}
			l.seg = next
			l.ackLocked(next) // creates that finished before the switch
			// A segment cut short has no seal to carry the LAC (and the
			// frame that carried it last may be among those refused):
			// publish it in the next one.
			if seg.frozen {
				l.lacCut = -1
			}
			if l.lacCut < l.lac {
				l.scheduleLACLocked()
			}
			l.kickLocked()
			l.mu.Unlock()
			return
		}
		if errors.Is(err, ErrFenced) || l.ctx.Err() != nil {
			l.fail(err)
			return
		}
		if sleep(l.ctx, min(l.opts.RetryBackoff<<min(attempt, 10), time.Second)) != nil {
			return
		}
	}
}
