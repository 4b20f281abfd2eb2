package commitlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// A striped log spreads its records over K ordinary logs, its stripes, so
// that each zone writes K segment objects at once: a log's bandwidth on a
// zone is then K streams' and not one's (see docs/commitlog.md). Record g of
// the striped log is record g/K of stripe g%K, so the order of the striped
// log is a fixed function of what its stripes hold; each stripe keeps its
// own protocol, recovery, repair, moves and truncation unchanged.
//
// The writer hands record g to stripe g%K in the order of g, and
// acknowledges an Append once every record up to its last is committed in
// its stripe. A writer that crashed may leave a stripe with records past a
// record another stripe never got: the next writer, once it has opened
// (and so fenced) every stripe, fills each such gap with a filler record,
// and starts after the last record any stripe holds. Fillers are never
// served; records the crashed writer had not had acknowledged may then be
// served (as with any write whose acknowledgement was lost), and no
// acknowledged record moves: an acknowledged record had every record below
// it committed, so the next writer finds them all and fills only above it.
// The offsets a reader is served are therefore increasing but may skip the
// fillers'.
//
// Layout: stripe i of log name is the log name/stripe/<i>; name/stripes
// holds K, written with IfNotExist on every zone by the first writer. A
// writer or reader opened with another K fails.

// Record kinds inside a stripe: every record a striped log writes starts
// with one of these bytes.
const (
	stripeData   byte = 0
	stripeFiller byte = 1
)

// MaxStripes bounds a striped log's stripes.
const MaxStripes = 64

// ErrStripes is returned when a striped log is opened with another number
// of stripes than it was created with.
var ErrStripes = errors.New("commitlog: the log was created with another number of stripes")

func stripeName(name string, i int) string { return name + "/stripe/" + strconv.Itoa(i) }

func stripesKey(name string) string { return name + "/stripes" }

// Striped is the one writer of a striped log. Append is safe for concurrent
// use.
type Striped struct {
	name string
	k    int64
	subs []*Log
	opts Options

	mu      sync.Mutex
	next    int64 // offset of the next record
	err     error // sticky: the first stripe's failure, or ErrClosed
	fillers int64
	recov   int64
}

// StripedStats counts what a striped writer did.
type StripedStats struct {
	// Stripes holds each stripe's writer's counters.
	Stripes []Stats
	// Fillers counts the filler records Open wrote into gaps a crashed
	// writer left; RecoveredTo is the last offset Open found held (-1 if
	// none).
	Fillers     int64
	RecoveredTo int64
}

func validStripes(k int) error {
	if k < 1 || k > MaxStripes {
		return fmt.Errorf("commitlog: %d stripes: a striped log has 1 to %d: %w", k, MaxStripes, blob.ErrInvalidArgument)
	}
	return nil
}

// stripeOptions are the options of one stripe: retention by bytes is
// shared out among the stripes.
func stripeOptions(o Options, k int) Options {
	if o.RetainBytes > 0 {
		o.RetainBytes = max(o.RetainBytes/int64(k), 1)
	}
	return o
}

// OpenStriped opens the striped log name over stores (one per zone) with
// stripes stripes as its only writer: it opens every stripe (each claims
// its epoch, fencing the stripe's earlier writer, and recovers), fills the
// gaps a crashed writer left (see the comment at the top of striped.go),
// and starts after the last record held. opts are every stripe's, and may
// be nil; Options.RetainBytes is shared out among the stripes.
func OpenStriped(ctx context.Context, stores []blob.Store, name string, stripes int, opts *Options) (*Striped, error) {
	if err := validStripes(stripes); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults(len(stores))
	if err != nil {
		return nil, err
	}
	if _, err := zonesFor(stores, stripeName(name, stripes-1), o); err != nil {
		return nil, err
	}
	if err := claimStripes(ctx, stores, name, stripes, o.OpTimeout); err != nil {
		return nil, err
	}
	so := stripeOptions(o, stripes)
	s := &Striped{name: name, k: int64(stripes), subs: make([]*Log, stripes), opts: o}
	errs := make([]error, stripes)
	parallel.Do(stripes, stripes, func(i int) {
		s.subs[i], errs[i] = Open(ctx, stores, stripeName(name, i), &so)
	})
	fail := func(err error) (*Striped, error) {
		for _, l := range s.subs {
			if l != nil {
				l.Close()
			}
		}
		return nil, err
	}
	for i, err := range errs {
		if err != nil {
			return fail(fmt.Errorf("commitlog: opening stripe %d of %s: %w", i, name, err))
		}
	}
	// Every stripe is fenced now: what they hold is final below their ends.
	ends := make([]int64, stripes)
	last := int64(-1)
	for i, l := range s.subs {
		ends[i] = l.end()
		if ends[i] > 0 {
			last = max(last, s.global(i, ends[i]-1))
		}
	}
	filled := make([]int64, stripes)
	parallel.Do(stripes, stripes, func(i int) {
		n := s.heldBy(i, last) - ends[i]
		if n <= 0 {
			return
		}
		fillers := make([][]byte, n)
		for j := range fillers {
			fillers[j] = []byte{stripeFiller}
		}
		var off int64
		off, errs[i] = s.subs[i].Append(ctx, fillers...)
		if errs[i] == nil && off != ends[i] {
			errs[i] = fmt.Errorf("commitlog: stripe %d of %s: fillers at %d, not at its end %d", i, name, off, ends[i])
		}
		filled[i] = n
	})
	for i, err := range errs {
		if err != nil {
			return fail(fmt.Errorf("commitlog: filling stripe %d of %s: %w", i, name, err))
		}
		s.fillers += filled[i]
	}
	// Every stripe still ours, now that all are open: two Opens that raced
	// stripe by stripe could otherwise each return holding some stripes,
	// the other's offsets acknowledged in between (an Append at an offset
	// below one the other had acknowledged before it began). Of two Opens
	// that crossed, the one that checks last finds the other's newer claim
	// on a stripe it opened first, since each checks only after all its
	// claims are made: at most one returns.
	parallel.Do(stripes, stripes, func(i int) {
		errs[i] = s.subs[i].stillCurrent(ctx)
	})
	for i, err := range errs {
		if err != nil {
			return fail(fmt.Errorf("commitlog: stripe %d of %s after opening every stripe: %w", i, name, err))
		}
	}
	s.next, s.recov = last+1, last
	return s, nil
}

// global is the striped log's offset of stripe i's record at local.
func (s *Striped) global(i int, local int64) int64 { return local*s.k + int64(i) }

// heldBy is how many records stripe i holds when the striped log holds
// every record up to g.
func (s *Striped) heldBy(i int, g int64) int64 {
	if g < int64(i) {
		return 0
	}
	return (g-int64(i))/s.k + 1
}

// stripeMarkers reads the number of stripes each zone holds for log name:
// "" where the zone holds none, and an error where it did not answer.
func stripeMarkers(ctx context.Context, stores []blob.Store, name string, timeout time.Duration) ([]string, []error) {
	vals, errs := make([]string, len(stores)), make([]error, len(stores))
	parallel.Do(len(stores), len(stores), func(i int) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		b, err := blob.ReadAll(ctx, stores[i], stripesKey(name))
		switch {
		case errors.Is(err, blob.ErrNotFound):
		case err != nil:
			errs[i] = err
		default:
			vals[i] = string(b)
		}
	})
	return vals, errs
}

// majorityOf returns the value a majority of zones hold, if any.
func majorityOf(vals []string, errs []error) (string, bool) {
	count := map[string]int{}
	for i, v := range vals {
		if errs[i] == nil {
			count[v]++
		}
	}
	for v, n := range count {
		if n >= len(vals)/2+1 {
			return v, true
		}
	}
	return "", false
}

// claimStripes checks the number of stripes of log name against k before
// the writer opens any stripe, and writes it where it lacks.
//
// It reads every zone's marker first, so that a writer opened with the
// wrong number plants nothing. A majority holding k: the zones that hold
// another number or none are given k. A majority holding another number:
// ErrStripes. Neither (a new log, or markers lost with replaced zones):
// the stripes the zones hold decide. A log that has stripes must have
// exactly stripes 0..k-1; one that has none takes k with IfNotExist on
// every zone, and goes on only once a majority holds it, so that of two
// writers creating it with different numbers at most one goes on.
func claimStripes(ctx context.Context, stores []blob.Store, name string, k int, timeout time.Duration) error {
	want := strconv.Itoa(k)
	heldOther := func(held string) error {
		return fmt.Errorf("%w: a majority of zones hold %s stripes for %s, opened with %d", ErrStripes, held, name, k)
	}
	vals, errs := stripeMarkers(ctx, stores, name, timeout)
	held, ok := majorityOf(vals, errs)
	switch {
	case ok && held == want:
	case ok && held != "":
		return heldOther(held)
	default:
		n, err := countStripes(ctx, stores, name, timeout)
		if err != nil {
			return err
		}
		if n > 0 && n != k {
			return fmt.Errorf("%w: the zones hold stripes 0..%d of %s, opened with %d", ErrStripes, n-1, name, k)
		}
		if n == 0 {
			// A new log: the first to write a zone's marker has it.
			parallel.Do(len(stores), len(stores), func(i int) {
				if errs[i] == nil && vals[i] == "" {
					ctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					blob.Put(ctx, stores[i], stripesKey(name), []byte(want), &blob.WriterOptions{If: blob.IfNotExist()})
				}
			})
			vals, errs = stripeMarkers(ctx, stores, name, timeout)
			held, ok = majorityOf(vals, errs)
			if !ok || held != want {
				if ok && held != "" {
					return heldOther(held)
				}
				return fmt.Errorf("%w: %d zones needed to record the stripes of %s: %v, %w", ErrNotEnoughZones, len(stores)/2+1, name, vals, errors.Join(errs...))
			}
		}
	}
	// Give k to the zones that lack it (replaced, or down when the log
	// began) or hold another number (a writer opened with the wrong one
	// before these checks): best effort, the next Open tries again.
	parallel.Do(len(stores), len(stores), func(i int) {
		if errs[i] == nil && vals[i] != want {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			blob.Put(ctx, stores[i], stripesKey(name), []byte(want), nil)
		}
	})
	return nil
}

// countStripes returns how many stripes the zones hold for log name: one
// past the highest stripe any of a majority of zones lists.
func countStripes(ctx context.Context, stores []blob.Store, name string, timeout time.Duration) (int, error) {
	prefix := name + "/stripe/"
	highest := make([]int, len(stores))
	errs := make([]error, len(stores))
	parallel.Do(len(stores), len(stores), func(i int) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		highest[i] = -1
		for o, err := range blob.All(ctx, stores[i], &blob.ListOptions{Prefix: prefix, Delimiter: "/"}) {
			if err != nil {
				errs[i] = err
				return
			}
			if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/")); err == nil && n >= 0 {
				highest[i] = max(highest[i], n)
			}
		}
	})
	n, answered := 0, 0
	for i, err := range errs {
		if err == nil {
			answered++
			n = max(n, highest[i]+1)
		}
	}
	if answered < len(stores)/2+1 {
		return 0, fmt.Errorf("%w: listing the stripes of %s: %w", ErrNotEnoughZones, name, errors.Join(errs...))
	}
	return n, nil
}

// Append appends records and returns the offset of the first once every
// record up to the last is committed. Records get consecutive offsets in
// call order. Its errors are Log.Append's: with ErrUncertain the records
// may be in the log all the same (a reader may find them, once each, at the
// offsets returned), each whatever became of the others, since they went to
// different stripes. Once a stripe's writer fails (fenced, closed), every
// later Append fails with its error.
func (s *Striped) Append(ctx context.Context, records ...[]byte) (int64, error) {
	if len(records) == 0 {
		return 0, errors.New("commitlog: Append of no records")
	}
	// Each stripe's records, in order, with the kind byte in front.
	batches := make([][][]byte, s.k)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	first := s.next
	last := first + int64(len(records)) - 1
	s.next = last + 1
	for j, r := range records {
		i := (first + int64(j)) % s.k
		b := make([]byte, 1+len(r))
		b[0] = stripeData
		copy(b[1:], r)
		batches[i] = append(batches[i], b)
	}
	// Handed over under the lock, so each stripe gets records in the order
	// of their offsets.
	own := make([]int64, s.k) // the first local offset of ours per stripe
	handed := false
	for i, b := range batches {
		own[i] = math.MaxInt64
		if len(b) == 0 {
			continue
		}
		want := (first + int64((int64(i)-first%s.k+s.k)%s.k)) / s.k
		// Never expected to miss: only this writer hands the stripe
		// records, under s.mu. If it did, nothing more could be appended
		// in order.
		off, err := s.subs[i].enqueue(b, want)
		if err != nil {
			s.failLocked(err)
			s.mu.Unlock()
			if handed {
				err = fmt.Errorf("%w (%w): records %d..%d", err, ErrUncertain, first, last)
			}
			return first, err
		}
		own[i], handed = off, true
	}
	s.mu.Unlock()
	// Acknowledged once every stripe has committed its records up to last.
	var cause error
	maybeIn := false
	for i := range s.subs {
		need := s.heldBy(i, last) - 1
		if need < 0 {
			continue
		}
		err := s.subs[i].await(ctx, own[i], need)
		switch {
		case err == nil:
			maybeIn = maybeIn || own[i] != math.MaxInt64
		case errors.Is(err, ErrUncertain) && own[i] != math.MaxInt64:
			maybeIn = true
			cause = cmp.Or(cause, err)
		default:
			cause = cmp.Or(cause, err)
		}
	}
	if cause == nil {
		return first, nil
	}
	// A stripe's writer that failed fails every later Append with its own
	// error (not this one's, which names this Append's records).
	for _, sub := range s.subs {
		if err := sub.failure(); err != nil {
			s.mu.Lock()
			s.failLocked(err)
			s.mu.Unlock()
			cause = err
			break
		}
	}
	if err := ctx.Err(); err != nil {
		cause = err // every record was handed over: the writer goes on with them
		maybeIn = true
	}
	if maybeIn {
		return first, fmt.Errorf("%w (%w): records %d..%d", cause, ErrUncertain, first, last)
	}
	return first, cause
}

// failLocked makes the first stripe failure the writer's error.
func (s *Striped) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
}

// Committed returns the last offset up to which every record is committed.
func (s *Striped) Committed() int64 {
	c := int64(math.MaxInt64)
	for i, l := range s.subs {
		c = min(c, s.global(i, l.Committed()+1)-1)
	}
	return c
}

// Stripes is the number of stripes.
func (s *Striped) Stripes() int { return int(s.k) }

// Stats returns the writer's counters.
func (s *Striped) Stats() StripedStats {
	st := StripedStats{Stripes: make([]Stats, s.k)}
	for i, l := range s.subs {
		st.Stripes[i] = l.Stats()
	}
	s.mu.Lock()
	st.Fillers, st.RecoveredTo = s.fillers, s.recov
	s.mu.Unlock()
	return st
}

// TruncateBefore truncates each stripe before its first record at or after
// offset (see Log.TruncateBefore) and returns the start: the first offset
// from which the log holds every record. Stripes are truncated by whole
// segments of their own, so a stripe may still hold records below the
// start; a reader opened below it is served those of them up to the first
// a stripe no longer holds, and then gets ErrTruncated.
func (s *Striped) TruncateBefore(ctx context.Context, offset int64) (int64, error) {
	// Never past what is committed: a stripe would otherwise delete
	// records no reader has been able to serve yet.
	offset = min(offset, s.Committed()+1)
	starts := make([]int64, s.k)
	errs := make([]error, s.k)
	parallel.Do(int(s.k), int(s.k), func(i int) {
		local := int64(0)
		if offset > int64(i) {
			local = (offset - int64(i) + s.k - 1) / s.k
		}
		starts[i], errs[i] = s.subs[i].TruncateBefore(ctx, local)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	start := int64(0)
	for i, st := range starts {
		start = max(start, s.global(i, st)-s.k+1)
	}
	return start, nil
}

// Close stops the writer and every stripe's. Appends in flight fail (their
// records may still be in the log).
func (s *Striped) Close() error {
	s.mu.Lock()
	s.failLocked(ErrClosed)
	s.mu.Unlock()
	errs := make([]error, s.k)
	parallel.Do(int(s.k), int(s.k), func(i int) { errs[i] = s.subs[i].Close() })
	return errors.Join(errs...)
}

// NewReader opens a reader of s's log from offset from.
func (s *Striped) NewReader(from int64) (*StripedReader, error) {
	stores := make([]blob.Store, len(s.subs[0].zones))
	for i, z := range s.subs[0].zones {
		stores[i] = z.s
	}
	o := s.opts
	return NewStripedReader(stores, s.name, int(s.k), from, &o)
}

// StripedReader reads a striped log in offset order from a chosen offset,
// only records that are committed, without duplicates; the offsets of the
// fillers a takeover wrote are skipped. Each stripe is tailed by a Reader
// of its own, in the background from the first Next until Close, up to
// stripeReadAhead records ahead, so that the stripes are read at once and
// not one after the other. It is not safe for concurrent use.
type StripedReader struct {
	stores  []blob.Store
	name    string
	k       int64
	subs    []*Reader
	pos     int64
	opts    Options
	checked bool
	// nextCheck: when to look for the number of stripes again, while no
	// majority of zones has answered it.
	nextCheck time.Time
	fillers   int64

	bg      context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	started bool
	ahead   []chan stripeRead
	errs    []error // a stripe's reader failed: every later Next of it fails so
	// readHook, if set, sees each record a stripe's reader returns as it
	// returns it (tests check that it is committed then).
	readHook func(stripe int, rec Record)
}

type stripeRead struct {
	rec Record
	err error
}

// stripeReadAhead is how many records a stripe's reader reads ahead of
// the merge.
const stripeReadAhead = 64

// NewStripedReader opens a reader of the striped log name with stripes
// stripes from offset from. opts may be nil; WriteQuorum must be the
// writer's.
func NewStripedReader(stores []blob.Store, name string, stripes int, from int64, opts *Options) (*StripedReader, error) {
	if err := validStripes(stripes); err != nil {
		return nil, err
	}
	if from < 0 {
		return nil, fmt.Errorf("commitlog: negative offset %d", from)
	}
	o, err := opts.withDefaults(len(stores))
	if err != nil {
		return nil, err
	}
	r := &StripedReader{stores: stores, name: name, k: int64(stripes), subs: make([]*Reader, stripes), pos: from, opts: o,
		ahead: make([]chan stripeRead, stripes), errs: make([]error, stripes)}
	r.bg, r.stop = context.WithCancel(context.Background())
	for i := range r.subs {
		local := int64(0)
		if from > int64(i) {
			local = (from - int64(i) + r.k - 1) / r.k
		}
		sub, err := NewReader(stores, stripeName(name, i), local, opts)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.subs[i] = sub
		r.ahead[i] = make(chan stripeRead, stripeReadAhead)
	}
	return r, nil
}

// readAhead reads stripe i into its channel until its reader fails or
// the StripedReader is closed.
func (r *StripedReader) readAhead(i int) {
	for {
		rec, err := r.subs[i].Next(r.bg)
		if r.bg.Err() != nil {
			return
		}
		if err == nil && r.readHook != nil {
			r.readHook(i, rec)
		}
		select {
		case r.ahead[i] <- stripeRead{rec, err}:
		case <-r.bg.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// Next returns the next record, waiting for it until ctx ends.
func (r *StripedReader) Next(ctx context.Context) (Record, error) {
	if r.bg.Err() != nil {
		return Record{}, ErrClosed
	}
	if !r.checked && !time.Now().Before(r.nextCheck) {
		if err := r.check(ctx); err != nil {
			return Record{}, err
		}
	}
	if !r.started {
		r.started = true
		for i := range r.subs {
			r.wg.Go(func() { r.readAhead(i) })
		}
	}
	for {
		i := r.pos % r.k
		if r.errs[i] != nil {
			return Record{}, r.errs[i]
		}
		var got stripeRead
		select {
		case got = <-r.ahead[i]:
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case <-r.bg.Done():
			return Record{}, ErrClosed
		}
		if got.err != nil {
			r.errs[i] = got.err
			return Record{}, got.err
		}
		rec := got.rec
		if want := r.pos / r.k; rec.Offset != want {
			r.errs[i] = blob.Errorf(driver.OpRead, stripeName(r.name, int(i)), blob.ErrCorrupt, "commitlog: stripe served offset %d, not %d", rec.Offset, want)
			return Record{}, r.errs[i]
		}
		g := r.pos
		if len(rec.Data) == 0 || rec.Data[0] > stripeFiller {
			r.errs[i] = blob.Errorf(driver.OpRead, stripeName(r.name, int(i)), blob.ErrCorrupt, "commitlog: record %d of the stripe is not a striped log's record", rec.Offset)
			return Record{}, r.errs[i]
		}
		r.pos++
		if rec.Data[0] == stripeFiller {
			r.fillers++
			continue
		}
		return Record{Offset: g, Data: rec.Data[1:]}, nil
	}
}

// check reads the number of stripes the log was created with from every
// zone: a majority holding another number fails the reader. Until a
// majority answers one way or the other (a log no writer has opened yet,
// zones down) the reader reads on and looks again a second later.
func (r *StripedReader) check(ctx context.Context) error {
	vals, errs := stripeMarkers(ctx, r.stores, r.name, r.opts.OpTimeout)
	held, ok := majorityOf(vals, errs)
	switch {
	case ok && held == strconv.FormatInt(r.k, 10):
		r.checked = true
	case ok && held != "":
		return fmt.Errorf("%w: a majority of zones hold %s stripes for %s, read with %d", ErrStripes, held, r.name, r.k)
	default:
		r.nextCheck = time.Now().Add(time.Second)
	}
	return nil
}

// Offset returns the offset the next Next looks at (the next record's,
// unless fillers come first).
func (r *StripedReader) Offset() int64 { return r.pos }

// Fillers counts the fillers the reader passed over.
func (r *StripedReader) Fillers() int64 { return r.fillers }

// Stats returns the counters of the stripes' readers, added up.
func (r *StripedReader) Stats() ReaderStats {
	var st ReaderStats
	for _, sub := range r.subs {
		st.add(sub.Stats())
	}
	return st
}

// Close stops the stripes' readers.
func (r *StripedReader) Close() error {
	r.stop()
	r.wg.Wait()
	for _, sub := range r.subs {
		if sub != nil {
			sub.Close()
		}
	}
	return nil
}
