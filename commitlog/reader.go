package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// Record is one record of the log.
type Record struct {
	Offset int64
	Data   []byte
}

// ErrTruncated is returned by a Reader asked for an offset before the first
// segment the log still holds.
var ErrTruncated = errors.New("commitlog: offset before the start of the log")

// Reader reads a log in offset order from a chosen offset, without gaps or
// duplicates, and only records that are committed (on W zones). It is not
// safe for concurrent use; open one per consumer.
type Reader struct {
	zones    []*zone
	regional *zone // nil without Options.Regional
	opts     Options
	need     int // zones that must answer a listing

	pos     int64 // offset of the next record to return
	lac     int64
	chain   []segInfo // segments from the one covering pos to the tip
	headers map[segKey]frame
	// notSegments are listed names found to be no segment (errNoSegment).
	notSegments map[segKey]bool
	cur         *cursor
	relist      bool
	listed      time.Time
	lat         []time.Duration // smoothed read latency per zone
	zoneLAC     []int64         // highest LAC each zone has shown, -1 after a failure

	// Reads of the tip run in the background, a new one every PollInterval
	// while earlier ones are in flight, so that a record appended while one
	// read is on its way is found by the next, not after it.
	bg       context.Context
	stop     context.CancelFunc
	results  chan tailRead
	inflight int
	launched time.Time
	launches int
	// zoneInflight counts the reads of the tip in flight per zone, and
	// readBytes the bytes a read of a zone's tip returns, the largest
	// recent read decaying by an eighth a read: see zoneReadLimit.
	zoneInflight []int
	readBytes    []int64
	// wantRead: a probe found the zone holding more than a zone tailed
	// (see tailZones).
	wantRead []bool
	// quietSince is when the reader last found a record (zero while it
	// finds them): the poll interval grows with the time since.
	quietSince time.Time

	mu      sync.Mutex
	stats   ReaderStats
	metrics *readerMetrics
}

// ReaderStats counts what a reader did.
type ReaderStats struct {
	Records   int64 // records returned
	Reads     int64 // segment reads, all zones together
	Fallbacks int64 // reads sent to another zone because the preferred one lacked committed records or failed
	Lists     int64 // segment listings
	Polls     int64 // waits at the tail
	// Probes counts the Stats of a zone's copy of the tip that tell
	// whether a zone not tailed caught up (see Reader.tailZones).
	Probes int64
	// BytesRead counts the bytes of frames the reads of segments returned
	// (regional reads aside), those read again by overlapping reads of the
	// tip included.
	BytesRead int64
	// RegionalReads counts reads of segments moved to the regional store.
	RegionalReads int64
	// NotSegments counts names under the segments' prefix that no zone
	// holds a header for, passed over.
	NotSegments int64
}

// add adds o's counts to s (a striped reader's stripes, added up).
func (s *ReaderStats) add(o ReaderStats) {
	s.Records += o.Records
	s.Reads += o.Reads
	s.Fallbacks += o.Fallbacks
	s.Lists += o.Lists
	s.Polls += o.Polls
	s.Probes += o.Probes
	s.BytesRead += o.BytesRead
	s.RegionalReads += o.RegionalReads
	s.NotSegments += o.NotSegments
}

type segInfo struct {
	key segKey
	end int64 // last offset; -1 for the tip, whose end is not known yet
	// recovered: the next segment on the chain is a newer writer's, which
	// started it only after copying every record up to end to W zones, so
	// they are all committed. Otherwise (the next segment is the same
	// writer's) a record is committed once a LAC covers it: the next
	// segment may have been created ahead of its roll, before this one
	// was complete.
	recovered bool
}

// servable reports whether the record at offset o of the cursor's segment
// is committed.
func (r *Reader) servable(c *cursor, o int64) bool {
	return o <= r.lac || (c.seg.end >= o && c.seg.recovered)
}

type cursor struct {
	seg segInfo
	// zoneHigh is, per zone, the last offset read from the zone's copy of
	// the segment. A zone holds a prefix of the segment's frames, so it
	// holds every record up to it; the W-th highest is on W zones, which is
	// what the writer's acknowledgement means: committed.
	zoneHigh []int64
	moved    *frame           // the segment moved to the regional store: its marker
	loaded   bool             // the regional copy was read into buf
	zonePos  []int64          // per zone: position in the segment read up to
	buf      map[int64][]byte // records read, not yet returned
}

// NewReader opens a reader of log name over stores (the same zones as the
// writer's, in any order) from offset from. It takes no lock and does not
// disturb the writer. opts may be nil; WriteQuorum must be the writer's.
func NewReader(stores []blob.Store, name string, from int64, opts *Options) (*Reader, error) {
	o, err := opts.withDefaults(len(stores))
	if err != nil {
		return nil, err
	}
	zones, err := zonesFor(stores, name, o)
	if err != nil {
		return nil, err
	}
	if from < 0 {
		return nil, fmt.Errorf("commitlog: negative offset %d", from)
	}
	r := &Reader{zones: zones, regional: regionalZone(o.Regional, name), opts: o, need: len(zones) - o.WriteQuorum + 1, pos: from, lac: -1,
		headers: map[segKey]frame{}, notSegments: map[segKey]bool{}, lat: make([]time.Duration, len(zones)), zoneLAC: make([]int64, len(zones)),
		zoneInflight: make([]int, len(zones)), readBytes: make([]int64, len(zones)), wantRead: make([]bool, len(zones)),
		results: make(chan tailRead, maxTailReads*o.WriteQuorum+1)}
	if r.metrics, err = newReaderMetrics(o.MeterProvider); err != nil {
		return nil, err
	}
	r.bg, r.stop = context.WithCancel(context.Background())
	return r, nil
}

// maxTailReads bounds the reads of the tip in flight at once, per zone of
// the write quorum: enough to start a read every PollInterval while reads
// take up to 8 PollIntervals.
const maxTailReads = 8

// tailReadBudget bounds the bytes that overlapping reads of one zone's tip
// read again: each read starts where the zone's last returned read ended,
// so a read started while another is in flight reads that one's bytes
// again. With small records that costs little and finds a new record a poll
// interval after it lands instead of a read's round trip; with large ones
// it multiplies the bytes read (and the CPU both sides spend on them) by
// the reads in flight, which a reader that is behind makes worse.
const tailReadBudget = 64 << 10

// zoneReadLimit is how many reads of zone z's tip may be in flight at once:
// as many as keep the bytes read again within tailReadBudget, judged by
// what its reads returned so far, at least one and at most maxTailReads.
func (r *Reader) zoneReadLimit(z int) int {
	return int(min(max(tailReadBudget/max(r.readBytes[z], 1), 1), maxTailReads))
}

// framesSize is the size of frames as read.
func framesSize(frames []frame) int64 {
	var n int64
	for _, f := range frames {
		n += int64(len(f.raw))
	}
	return n
}

// Close stops the reader's background reads.
func (r *Reader) Close() error {
	r.stop()
	return nil
}

// NewReader opens a reader of l's log from offset from (see NewReader).
func (l *Log) NewReader(from int64) (*Reader, error) {
	stores := make([]blob.Store, len(l.zones))
	for i, z := range l.zones {
		stores[i] = z.s
	}
	o := l.opts
	return NewReader(stores, l.name, from, &o)
}

// Offset returns the offset of the record the next Next returns.
func (r *Reader) Offset() int64 { return r.pos }

// Stats returns the reader's counters.
func (r *Reader) Stats() ReaderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Reader) count(f func(*ReaderStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// Next returns the record at Offset, waiting until it is committed or ctx is done.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	idle := time.Time{}
	for {
		if rec, ok := r.take(); ok {
			r.quietSince = time.Time{}
			return rec, nil
		}
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		if r.cur == nil || r.relist || (!idle.IsZero() && time.Since(r.listed) >= r.opts.RelistInterval) {
			if err := r.refresh(ctx); err != nil {
				if ctx.Err() != nil {
					return Record{}, ctx.Err()
				}
				if errors.Is(err, ErrTruncated) {
					return Record{}, err
				}
				if err := sleep(ctx, r.pollInterval()); err != nil {
					return Record{}, err
				}
				continue
			}
			if r.cur == nil { // no segment yet
				r.count(func(s *ReaderStats) { s.Polls++ })
				if err := sleep(ctx, r.pollInterval()); err != nil {
					return Record{}, err
				}
				idle = time.Now()
				continue
			}
		}
		if r.advance() {
			continue
		}
		if r.cur.seg.end < 0 {
			progressed, err := r.pollTail(ctx)
			if err != nil {
				return Record{}, err
			}
			if progressed {
				idle = time.Time{}
				r.quietSince = time.Time{}
			} else if idle.IsZero() {
				idle = time.Now()
			}
			continue
		}
		progressed, err := r.readCur(ctx)
		if err != nil && ctx.Err() != nil {
			return Record{}, ctx.Err()
		}
		if errors.Is(err, ErrNoRegional) || errors.Is(err, blob.ErrCorrupt) {
			// No other copy will appear: waiting would hang the reader.
			return Record{}, err
		}
		if progressed {
			idle = time.Time{}
			r.quietSince = time.Time{}
			continue
		}
		if idle.IsZero() {
			idle = time.Now()
		}
		r.count(func(s *ReaderStats) { s.Polls++ })
		if err := sleep(ctx, r.pollInterval()); err != nil {
			return Record{}, err
		}
	}
}

// take returns the record at pos if it is read and committed.
func (r *Reader) take() (Record, bool) {
	c := r.cur
	if c == nil {
		return Record{}, false
	}
	data, ok := c.buf[r.pos]
	if !ok || !r.servable(c, r.pos) {
		return Record{}, false
	}
	delete(c.buf, r.pos)
	r.metrics.behind.Record(context.Background(), max(r.lac-r.pos, 0))
	rec := Record{Offset: r.pos, Data: data}
	r.pos++
	r.count(func(s *ReaderStats) { s.Records++ })
	return rec, true
}

// advance moves to the next segment of the chain once pos is past the
// current one's end.
func (r *Reader) advance() bool {
	c := r.cur
	if c.seg.end < 0 || r.pos <= c.seg.end {
		return false
	}
	i := slices.IndexFunc(r.chain, func(s segInfo) bool { return s.key == c.seg.key })
	if i < 0 || i+1 >= len(r.chain) {
		r.relist = true
		r.cur = nil
		return true
	}
	r.cur = r.newCursor(r.chain[i+1])
	return true
}

// sealed takes the seal frame of the tip c: its writer sealed it after its
// last record, last, once every record was on W zones, and went on in the
// segment that starts after it, of the same epoch. The reader moves there
// without listing. Should a newer writer have recovered the segment instead
// (the next one then never used), nothing is served from the unused one and
// the next listing finds the newer writer's.
func (r *Reader) sealed(c *cursor, last int64) {
	c.seg.end = last
	i := slices.IndexFunc(r.chain, func(s segInfo) bool { return s.key == c.seg.key })
	if i < 0 {
		r.relist = true
		return
	}
	r.chain[i].end = last
	if i+1 == len(r.chain) {
		r.chain = append(r.chain, segInfo{key: segKey{c.seg.key.epoch, last + 1}, end: -1})
	}
}

func (r *Reader) newCursor(s segInfo) *cursor {
	c := &cursor{seg: s, zonePos: make([]int64, len(r.zones)), buf: map[int64][]byte{}, zoneHigh: make([]int64, len(r.zones))}
	for i := range c.zoneHigh {
		c.zoneHigh[i] = s.key.first - 1
	}
	return c
}

// heldByQuorum returns the last offset of the cursor's segment that W zones
// are known to hold (the W-th highest of zoneHigh): every record up to it
// is committed.
func (r *Reader) heldByQuorum(c *cursor) int64 {
	h := slices.Clone(c.zoneHigh)
	slices.Sort(h)
	return h[len(h)-r.opts.WriteQuorum]
}

// readCur reads the current segment from the fastest zone, falling back to
// the others if it fails or lacks records known to be committed. It reports
// whether a record became available.
func (r *Reader) readCur(ctx context.Context) (bool, error) {
	c := r.cur
	if c.moved != nil {
		return r.readMoved(ctx)
	}
	order := make([]int, len(r.zones))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(r.lat[a] - r.lat[b]) })
	var errs []error
	for n, i := range order {
		if n > 0 {
			// Another zone is worth a read only if this segment has
			// committed records we have not found.
			committed := c.seg.end >= r.pos || (c.seg.end < 0 && r.lac >= r.pos)
			if !committed {
				break
			}
			r.count(func(s *ReaderStats) { s.Fallbacks++ })
		}
		start := time.Now()
		c2, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
		frames, pos, err := r.zones[i].readSome(c2, c.seg.key, c.zonePos[i], maxReadBytes)
		cancel()
		d := time.Since(start)
		r.count(func(s *ReaderStats) { s.Reads++; s.BytesRead += framesSize(frames) })
		if err != nil {
			d += time.Second // a failing zone goes to the back
		}
		r.observe(i, d)
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			errs = append(errs, err)
		}
		r.merge(c, i, frames, pos)
		if c.moved != nil {
			return r.readMoved(ctx)
		}
		if _, ok := c.buf[r.pos]; ok && r.servable(c, r.pos) {
			return true, nil
		}
	}
	if _, ok := c.buf[r.pos]; ok && c.seg.end >= r.pos {
		// Read but not known to be committed: the LAC that covers it is
		// in the segment's seal frame, on a zone not read yet, or in the
		// frames of the next segment.
		if r.peekLAC(ctx, order) {
			return true, nil
		}
	} else if !ok && c.seg.end >= r.pos && r.zones[0].mode != modeSlots {
		// Records known to exist and no zone shows them past where it
		// was read: the segment may have moved to the regional store
		// while this reader was in it, its copies now short markers.
		for _, i := range order {
			c2, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
			head, _ := r.zones[i].readPrefix(c2, c.seg.key, 64)
			cancel()
			if m, ok := movedIn(head); ok {
				m.raw = nil
				c.moved = &m
				return r.readMoved(ctx)
			}
		}
	}
	return false, errors.Join(errs...)
}

// readMoved reads the current segment's regional copy, once.
func (r *Reader) readMoved(ctx context.Context) (bool, error) {
	c := r.cur
	if !c.loaded {
		rc, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
		frames, err := readRegional(rc, r.regional, c.seg.key, *c.moved)
		cancel()
		r.count(func(s *ReaderStats) { s.Reads++; s.RegionalReads++ })
		if err != nil {
			return false, err
		}
		c.loaded = true
		// Only committed segments move: every record up to the marker's
		// last offset is committed.
		r.lac = max(r.lac, c.moved.lac)
		for _, f := range frames {
			if f.kind != frameData {
				continue
			}
			for j, rec := range f.records {
				if o := f.first + int64(j); o >= r.pos && (c.seg.end < 0 || o <= c.seg.end) {
					c.buf[o] = rec
				}
			}
		}
	}
	_, ok := c.buf[r.pos]
	return ok && r.servable(c, r.pos), nil
}

// peekLAC reads the head of the segment after the current one for the LAC
// its frames carry, zone by zone in order until one covers pos.
func (r *Reader) peekLAC(ctx context.Context, order []int) bool {
	i := slices.IndexFunc(r.chain, func(s segInfo) bool { return s.key == r.cur.seg.key })
	if i < 0 || i+1 >= len(r.chain) {
		return false
	}
	next := r.chain[i+1].key
	for _, z := range order {
		c, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
		frames, _ := r.zones[z].readPrefix(c, next, 64<<10)
		cancel()
		r.count(func(s *ReaderStats) { s.Reads++ })
		for _, f := range frames {
			r.lac = max(r.lac, f.lac)
		}
		if r.servable(r.cur, r.pos) {
			return true
		}
	}
	return false
}

type tailRead struct {
	zone   int
	key    segKey
	frames []frame
	pos    int64
	err    error
	took   time.Duration
	bytes  int64
	// probe: Stats of the zone's copy and of the weakest zone tailed's;
	// ahead: the first holds more than four reads of the second return of
	// late, or the second did not answer.
	probe bool
	ahead bool
}

// pollTail reads the tip: it starts a read of each zone of tailZones if the
// last started a poll interval ago (see pollInterval) and fewer than that
// zone's zoneReadLimit are in flight, and takes what the reads return until
// one is due. It reports whether a record became available.
func (r *Reader) pollTail(ctx context.Context) (bool, error) {
	c := r.cur
	every := r.pollInterval()
	if r.inflight < r.maxInflight() && time.Since(r.launched) >= every {
		started := false
		zs, probe := r.tailZones()
		for _, z := range zs {
			if r.zoneInflight[z] >= r.zoneReadLimit(z) {
				continue
			}
			started = true
			key, pos := c.seg.key, c.zonePos[z]
			r.inflight++
			r.zoneInflight[z]++
			r.wantRead[z] = false
			r.count(func(s *ReaderStats) { s.Reads++ })
			go func() {
				rctx, cancel := context.WithTimeout(r.bg, r.opts.OpTimeout)
				defer cancel()
				start := time.Now()
				frames, pos, err := r.zones[z].readSome(rctx, key, pos, maxReadBytes)
				r.results <- tailRead{zone: z, key: key, frames: frames, pos: pos, err: err, took: time.Since(start), bytes: framesSize(frames)}
			}()
		}
		if probe >= 0 && r.zoneInflight[probe] == 0 {
			started = true
			key, weakest := c.seg.key, zs[r.opts.WriteQuorum-1]
			margin := 4 * max(r.readBytes[weakest], tailReadBudget)
			r.inflight++
			r.zoneInflight[probe]++
			r.count(func(s *ReaderStats) { s.Probes++ })
			go func() {
				rctx, cancel := context.WithTimeout(r.bg, r.opts.OpTimeout)
				defer cancel()
				var sizes [2]int64
				var errs [2]error
				parallel.Do(2, 2, func(i int) {
					z := r.zones[[]int{probe, weakest}[i]]
					a, err := z.s.Stat(rctx, z.segKey(key))
					if err == nil {
						sizes[i] = a.Size
					}
					errs[i] = err
				})
				r.results <- tailRead{zone: probe, key: key, probe: true,
					ahead: errs[0] == nil && (errs[1] != nil || sizes[0] > sizes[1]+margin)}
			}()
		}
		if started {
			r.launched = time.Now()
			r.launches++
		}
	}
	// A read was due and none could start (as many in flight as allowed):
	// wait for one to return, not for a timer that has already fired,
	// which would spin.
	var due <-chan time.Time
	if wait := every - time.Since(r.launched); wait > 0 || r.inflight == 0 {
		t := time.NewTimer(max(wait, 0))
		defer t.Stop()
		due = t.C
	} else {
		r.count(func(s *ReaderStats) { s.Polls++ })
	}
	select {
	case res := <-r.results:
		r.inflight--
		r.zoneInflight[res.zone]--
		if res.probe {
			if res.key == c.seg.key {
				r.wantRead[res.zone] = res.ahead
			}
			return false, nil
		}
		r.count(func(s *ReaderStats) { s.BytesRead += res.bytes })
		// Up at once, down slowly: reads that grow stop overlapping now,
		// and a few small ones do not start the overlap again.
		r.readBytes[res.zone] = max(res.bytes, r.readBytes[res.zone]*7/8)
		if res.key != c.seg.key {
			return false, nil
		}
		d := res.took
		if res.err != nil && !errors.Is(res.err, blob.ErrNotFound) && r.bg.Err() == nil {
			d += time.Second
			r.zoneLAC[res.zone] = -1
		}
		r.observe(res.zone, d)
		r.merge(c, res.zone, res.frames, res.pos)
		if _, ok := c.buf[r.pos]; ok && r.pos <= r.lac {
			return true, nil
		}
		return false, nil
	case <-due:
		if r.inflight >= r.maxInflight() {
			r.count(func(s *ReaderStats) { s.Polls++ })
		}
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// pollInterval is how long the reader waits between looks at the tail:
// PollInterval while records arrive and for quietGrace intervals after the
// last one, then an eighth of the time since, up to MaxPollInterval, so that a reader idle at the tail does
// not read the tip hundreds of times a second for nothing.
func (r *Reader) pollInterval() time.Duration {
	if r.quietSince.IsZero() {
		r.quietSince = time.Now()
		return r.opts.PollInterval
	}
	// A pause shorter than quietGrace (a roll, a slow flush) keeps the
	// reader at PollInterval, so that backing off never adds to the lag of
	// a log that is being written.
	grace := quietGrace * r.opts.PollInterval
	return min(max((time.Since(r.quietSince)-grace)/8, r.opts.PollInterval), r.opts.MaxPollInterval)
}

// quietGrace is how many PollIntervals without a record a reader waits
// before it backs off.
const quietGrace = 50

// maxReadBytes bounds what one read of a segment returns (a frame longer
// than it aside): a reader far behind, or reading a zone it had not read for
// a while, gets its records a piece at a time, each read well inside
// OpTimeout, instead of waiting for, and holding, the rest of a segment of
// up to MaxSegmentBytes at once.
const maxReadBytes = 8 << 20

// maxInflight bounds the reads of the tip in flight at once.
func (r *Reader) maxInflight() int { return maxTailReads * r.opts.WriteQuorum }

// tailZones picks the zones for the next reads of the tip: the W zones that
// hold the most of the segment (the fastest among equals), read at once. A
// record is committed as soon as W zones are seen to hold it, so the reader
// learns it from the data it reads, one read after it landed, and need not
// wait for a later frame to carry the LAC; a slow zone that lags is not
// among them.
//
// Every eighth time another zone, in turn, is looked at too, so that a zone
// that fell behind and caught up (or one tailed that stopped answering) is
// noticed: probe is that zone, or -1. A probe Stats that zone's copy and
// the weakest tailed zone's, and does not read: a read would start where
// that zone was last read, and so read every byte of the tip a third time.
// A zone found to hold more than the weakest by more than four reads of the
// weakest return of late (or the weakest did not answer) is read at the
// next look, from where it was last read, and from then on ranked by what
// it holds. Sizes are compared as bytes of one sequence of frames, the
// writer's, which every copy of a segment being written holds a prefix of;
// where a recovery's fence made the copies differ, a read that was not
// needed, or a swap that does not happen, is the cost. Slot copies, which a
// Stat does not measure, are read instead.
func (r *Reader) tailZones() (zs []int, probe int) {
	zs, order := r.rankedZones()
	for _, z := range order[r.opts.WriteQuorum:] {
		if r.wantRead[z] {
			zs = append(zs, z)
		}
	}
	probe = -1
	if r.launches%8 == 7 {
		if z := (r.launches / 8) % len(r.zones); !slices.Contains(zs, z) {
			if r.zones[z].mode == modeSlots {
				zs = append(zs, z)
			} else {
				probe = z
			}
		}
	}
	return zs, probe
}

// rankedZones returns the W zones tailed and every zone in rank order.
func (r *Reader) rankedZones() (zs, order []int) {
	c := r.cur
	order = make([]int, len(r.zones))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c.zoneHigh[a] != c.zoneHigh[b] {
			return int(c.zoneHigh[b] - c.zoneHigh[a])
		}
		if r.zoneLAC[a] != r.zoneLAC[b] {
			return int(r.zoneLAC[b] - r.zoneLAC[a])
		}
		return int(r.lat[a] - r.lat[b])
	})
	return order[:r.opts.WriteQuorum:r.opts.WriteQuorum], order // appends to zs copy, never reach order
}

func (r *Reader) observe(z int, d time.Duration) {
	if r.lat[z] == 0 {
		r.lat[z] = d
	} else {
		r.lat[z] = (r.lat[z]*7 + d) / 8
	}
}

// merge takes the frames a read of zone z returned, skipping those an
// earlier read of z returned already: reads of one zone return the same
// frames at the same positions, so the first new frame starts where z's
// position is.
func (r *Reader) merge(c *cursor, z int, frames []frame, pos int64) {
	for _, f := range frames {
		if f.end <= c.zonePos[z] {
			continue
		}
		r.lac = max(r.lac, f.lac)
		r.zoneLAC[z] = max(r.zoneLAC[z], f.lac)
		switch f.kind {
		case frameMoved:
			m := f
			m.raw = nil
			c.moved = &m
		case frameSeal:
			if f.epoch == c.seg.key.epoch && c.seg.end < 0 {
				r.sealed(c, f.lac)
			} else {
				r.relist = true
			}
		case frameFence:
			r.relist = true
		case frameData:
			for j, rec := range f.records {
				o := f.first + int64(j)
				if o >= r.pos && (c.seg.end < 0 || o <= c.seg.end) {
					c.buf[o] = rec
				}
			}
			if n := int64(len(f.records)); n > 0 {
				c.zoneHigh[z] = max(c.zoneHigh[z], f.first+n-1)
			}
		}
	}
	c.zonePos[z] = max(c.zonePos[z], pos)
	r.lac = max(r.lac, r.heldByQuorum(c))
}

// refresh lists the segments and rebuilds the chain from the tip back to the
// segment that holds pos: within an epoch, segments follow each other by
// first offset; the first segment of an epoch names, in its header, the
// segment its writer recovered. A segment a fenced writer created but never
// used is on no chain.
func (r *Reader) refresh(ctx context.Context) error {
	// A chain only goes back to lower keys, so from the current segment it
	// is enough to list that segment and those after it; the full listing
	// is the fallback when the walk needs more.
	var from *segKey
	if r.cur != nil {
		k := r.cur.seg.key
		from = &k
	}
	for {
		chain, err := r.walk(ctx, from)
		if errors.Is(err, errListShort) {
			from = nil
			continue
		}
		if err != nil || chain == nil {
			if err == nil {
				r.cur = nil
			}
			return err
		}
		r.setChain(chain)
		return nil
	}
}

var errListShort = errors.New("commitlog: the chain goes back past the listing")

// walk lists the segments from key from on and returns the chain from the
// segment holding pos to the tip (nil if the log has no segment).
func (r *Reader) walk(ctx context.Context, from *segKey) ([]segKey, error) {
	r.count(func(s *ReaderStats) { s.Lists++ })
	keys, err := listChain(ctx, r.zones, r.need, r.opts.OpTimeout, from, false)
	if err != nil {
		return nil, err
	}
	r.listed, r.relist = time.Now(), false
	if len(keys) == 0 {
		if from != nil {
			return nil, errListShort
		}
		return nil, nil
	}
	// The tip must be a segment: a name whose header no zone holds is
	// garbage, passed over (see errNoSegment), not waited for.
	for len(keys) > 0 {
		tip := keys[len(keys)-1]
		if r.notSegments[tip] {
			keys = keys[:len(keys)-1]
			continue
		}
		if _, err := r.header(ctx, tip); errors.Is(err, errNoSegment) {
			r.notSegments[tip] = true
			r.count(func(s *ReaderStats) { s.NotSegments++ })
			continue
		} else if err != nil {
			return nil, err
		}
		break
	}
	if len(keys) == 0 {
		if from != nil {
			return nil, errListShort
		}
		return nil, nil
	}
	var chain []segKey
	cur := keys[len(keys)-1]
	for {
		var epochSegs []segKey
		for _, k := range keys {
			if k.epoch == cur.epoch && k.first <= cur.first {
				epochSegs = append(epochSegs, k)
			}
		}
		chain = append(epochSegs, chain...)
		if chain[0].first <= r.pos {
			break
		}
		if from != nil && chain[0] == *from {
			return nil, errListShort // the segment before it may be unlisted
		}
		h, err := r.header(ctx, chain[0])
		if err != nil {
			return nil, err
		}
		if h.prevEpoch == 0 {
			return nil, fmt.Errorf("%w: offset %d, the log starts at %d", ErrTruncated, r.pos, chain[0].first)
		}
		cur = segKey{h.prevEpoch, h.prevFirst}
		if !slices.Contains(keys, cur) {
			if from != nil {
				return nil, errListShort
			}
			return nil, fmt.Errorf("%w: offset %d, segment %s is gone", ErrTruncated, r.pos, cur)
		}
	}
	return chain, nil
}

// setChain makes chain (from the segment holding pos to the tip) the
// reader's.
func (r *Reader) setChain(chain []segKey) {
	// Keep only the segment covering pos and those after it.
	i := 0
	for j, k := range chain {
		if k.first <= r.pos {
			i = j
		}
	}
	chain = chain[i:]
	r.chain = r.chain[:0]
	for j, k := range chain {
		end, recovered := int64(-1), false
		if j+1 < len(chain) {
			end, recovered = chain[j+1].first-1, chain[j+1].epoch != k.epoch
		}
		r.chain = append(r.chain, segInfo{key: k, end: end, recovered: recovered})
	}
	first := r.chain[0]
	if r.cur != nil && r.cur.seg.key == first.key {
		r.cur.seg = first
		if first.end >= 0 {
			for o := range r.cur.buf {
				if o > first.end {
					delete(r.cur.buf, o)
				}
			}
		}
	} else {
		r.cur = r.newCursor(first)
	}
}

// header returns the header frame of segment k, from any zone or the
// regional store; errNoSegment if none holds it.
func (r *Reader) header(ctx context.Context, k segKey) (frame, error) {
	if h, ok := r.headers[k]; ok {
		return h, nil
	}
	h, err := segmentHeader(ctx, r.zones, r.regional, k, r.opts.OpTimeout)
	if err != nil {
		return frame{}, err
	}
	h.raw = nil
	r.headers[k] = h
	return h, nil
}
