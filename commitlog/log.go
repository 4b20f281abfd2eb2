package commitlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

var (
	// ErrFenced is returned by a writer's Append (and by Open) once another
	// writer has opened the log with a higher epoch: this writer's appends
	// will never again be acknowledged.
	ErrFenced = errors.New("commitlog: fenced by a newer writer")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("commitlog: closed")
	// ErrNotEnoughZones is returned when fewer zones answer than the
	// operation needs (W for an append, N-W+1 for a recovery or a listing,
	// a majority for an epoch).
	ErrNotEnoughZones = errors.New("commitlog: not enough zones")
	// ErrUncertain accompanies an Append's error when its records may be
	// in the log all the same: some of them had been handed to the zones
	// (or, when the caller's context ended, they still will be). A reader
	// may find them, once each, at the offsets Append returned. Without
	// ErrUncertain a failed Append's records are not in the log.
	ErrUncertain = errors.New("commitlog: outcome uncertain, the records may be in the log")
)

// Options configure a log. The zero value is usable.
type Options struct {
	// WriteQuorum (W) is how many zones must hold a record before Append
	// acknowledges it. 0 means a majority of the zones.
	WriteQuorum int
	// MaxSegmentAppends rolls a segment after this many appends on one zone
	// (default 5000: S3 Express accepts 10,000 appends to one object).
	MaxSegmentAppends int
	// MaxSegmentBytes rolls a segment once it is this long (default 64 MiB).
	MaxSegmentBytes int64
	// MaxFrameBytes bounds the records of one frame (default 4 MiB); a record
	// larger than this still travels alone in its own frame.
	MaxFrameBytes int
	// LACDelay is how long an idle writer waits after an acknowledgement
	// before it appends a frame with no records that only publishes the
	// last-add-confirmed, so that readers can serve the last records
	// (default 1ms; negative: never, readers then wait for the next append).
	LACDelay time.Duration
	// PollInterval is how often a reader at the tail looks for more while
	// records keep arriving (default 2ms): each time it reads the tip on W
	// zones, so a busy reader makes up to W/PollInterval reads a second
	// (1000 a second for W=2 at the default), which a store bills.
	PollInterval time.Duration
	// MaxPollInterval bounds how far a reader that finds nothing new backs
	// off (default 50ms, never below PollInterval): after 50 PollIntervals
	// without a record its interval is an eighth of the time since it last
	// found one, so a reader idle at
	// the tail makes W/MaxPollInterval reads a second (40 for W=2 at the
	// defaults, not 1000), and the first record after a pause waits at most
	// MaxPollInterval longer to be seen. Set it to PollInterval for no backoff.
	MaxPollInterval time.Duration
	// RelistInterval is how often a reader at the tail lists segments, to
	// notice a new writer or a new segment that no frame announced (default 200ms).
	RelistInterval time.Duration
	// MaxInFlight is how many appends may be in flight on one zone's
	// segment at once where its stream pipelines them
	// (blob.PipelinedAppendStream; default DefaultMaxInFlight, 1 for one at
	// a time): a frame then waits for its own flush and not also for the
	// one before it. Elsewhere each zone has one append in flight.
	MaxInFlight int
	// StreamIdle is how long a zone's append stream stays open with
	// nothing to append (default 30s; negative: open while the writer
	// lives). An open stream costs a goroutine of its own in the gRPC
	// client and state on the service; the next append after it is
	// closed takes the object over again, one round trip more. Where
	// appends are requests (S3 Express, Azure, slots) there is no stream.
	StreamIdle time.Duration
	// OpTimeout bounds each operation on one zone (default 10s), so that a
	// zone that hangs is treated as down.
	OpTimeout time.Duration
	// RetryBackoff is the first wait before retrying a failed zone; it
	// doubles up to 1s (default 5ms).
	RetryBackoff time.Duration
	// MeterProvider receives the OpenTelemetry metrics (records, frames and
	// records per frame, flush duration per zone, zone errors, segments,
	// fencing, the LAC, and a reader's lag in records); nil means the
	// global provider.
	MeterProvider metric.MeterProvider
	// Regional, if set, is the regional store that sealed segments move to
	// once they have been sealed for MoveAfter (see tier.go: the zonal
	// copies become small markers). Readers must be given it too; they read
	// across both tiers without noticing. Logs stored as slot directories
	// (stores without appends) keep their segments on the zones.
	Regional blob.Store
	// MoveAfter is how long a segment stays on the zonal stores after the
	// writer saw it sealed (default 10m).
	MoveAfter time.Duration
	// RepairInterval is how often the writer looks for sealed segments
	// that a zone lacks (a zone replaced by an empty bucket, or one that
	// lost objects) and copies them back (default DefaultRepairInterval;
	// negative: never). A
	// segment is repaired once the writer has seen it sealed for an
	// interval, so its own late appends are done.
	RepairInterval time.Duration
	// RepairBytesPerSecond bounds the rate of those copies (default 16 MiB/s).
	RepairBytesPerSecond int64
	// RetainFor and RetainBytes, when set, make the writer truncate the log
	// (TruncateBefore) at each repair pass: the sealed segments whose last
	// write is older than RetainFor go, and the oldest sealed segments
	// beyond the newest RetainBytes of them. Segments are whole, so the log
	// keeps at least what they say, up to a segment more; the segment being
	// written is never counted or removed. A segment's age is its last
	// write's on the store that holds it (its regional copy once moved,
	// which is written after it sealed: a moved segment stays a little
	// longer), its size the bytes stored.
	RetainFor   time.Duration
	RetainBytes int64
	// Slots stores segments as directories of slot objects created with
	// IfNotExist even where the stores can append. A log must always be
	// opened with the same layout; stores without appends always use slots.
	Slots bool
}

func (o *Options) withDefaults(n int) (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.WriteQuorum == 0 {
		r.WriteQuorum = n/2 + 1
	}
	if r.WriteQuorum < 1 || r.WriteQuorum > n {
		return r, fmt.Errorf("commitlog: write quorum %d with %d zones", r.WriteQuorum, n)
	}
	if r.MaxSegmentAppends <= 0 {
		r.MaxSegmentAppends = 5000
	}
	if r.MaxSegmentBytes <= 0 {
		r.MaxSegmentBytes = 64 << 20
	}
	if r.MaxFrameBytes <= 0 {
		r.MaxFrameBytes = 4 << 20
	}
	if r.LACDelay == 0 {
		r.LACDelay = time.Millisecond
	}
	if r.PollInterval <= 0 {
		r.PollInterval = 2 * time.Millisecond
	}
	if r.MaxPollInterval <= 0 {
		r.MaxPollInterval = 50 * time.Millisecond
	}
	r.MaxPollInterval = max(r.MaxPollInterval, r.PollInterval)
	if r.RelistInterval <= 0 {
		r.RelistInterval = 200 * time.Millisecond
	}
	if r.OpTimeout <= 0 {
		r.OpTimeout = 10 * time.Second
	}
	if r.MaxInFlight <= 0 {
		r.MaxInFlight = DefaultMaxInFlight
	}
	if r.StreamIdle == 0 {
		r.StreamIdle = 30 * time.Second
	}
	if r.MoveAfter <= 0 {
		r.MoveAfter = 10 * time.Minute
	}
	if r.RetryBackoff <= 0 {
		r.RetryBackoff = 5 * time.Millisecond
	}
	if r.RepairInterval == 0 {
		r.RepairInterval = DefaultRepairInterval
	}
	if r.RetainFor < 0 || r.RetainBytes < 0 {
		return r, fmt.Errorf("commitlog: negative retention (RetainFor %v, RetainBytes %d)", r.RetainFor, r.RetainBytes)
	}
	if (r.RetainFor > 0 || r.RetainBytes > 0) && r.RepairInterval < 0 {
		return r, fmt.Errorf("commitlog: retention runs with the repair passes, which RepairInterval %v turns off", r.RepairInterval)
	}
	if r.RepairBytesPerSecond <= 0 {
		r.RepairBytesPerSecond = 16 << 20
	}
	return r, nil
}

// zonesFor builds the zones of log name over stores.
func zonesFor(stores []blob.Store, name string, opts Options) ([]*zone, error) {
	if len(stores) == 0 {
		return nil, errors.New("commitlog: no stores")
	}
	if err := blob.ValidateKey(driver.OpOpen, name+"/seg/"); err != nil {
		return nil, err
	}
	// Each zone appends its own way: over a stream where its store serves
	// them, by conditional appends otherwise; both address frames by byte
	// position, so zones of both kinds make one log. Slots address frames
	// by number, so a log is all slots or none.
	modes := make([]mode, len(stores))
	var canAppend, cannot []int
	for i, s := range stores {
		switch {
		case blob.ServesAppendStreams(s):
			modes[i] = modeStream
		case blob.CapabilitiesOf(s).Append:
			modes[i] = modeAppend
		default:
			modes[i] = modeSlots
			cannot = append(cannot, i)
			continue
		}
		canAppend = append(canAppend, i)
	}
	if opts.Slots || len(canAppend) == 0 {
		for i := range modes {
			modes[i] = modeSlots
		}
	} else if len(cannot) > 0 {
		return nil, blob.Errorf(driver.OpOpen, name, blob.ErrInvalidArgument,
			"commitlog: zones %v cannot append (%T) but zones %v can: a log's zones all append or all use slots (Options.Slots)", cannot, stores[cannot[0]], canAppend)
	}
	zs := make([]*zone, len(stores))
	for i, s := range stores {
		zs[i] = &zone{idx: i, s: s, log: name, mode: modes[i], streams: map[segKey]blob.AppendStream{}}
	}
	return zs, nil
}

// onAll runs f on every zone at once, each bounded by timeout, and returns
// their errors by zone.
func onAll(ctx context.Context, zones []*zone, timeout time.Duration, f func(context.Context, *zone) error) []error {
	errs := make([]error, len(zones))
	var wg sync.WaitGroup
	for i, z := range zones {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = f(c, z)
		})
	}
	wg.Wait()
	return errs
}

// onQuorum runs f on every zone at once, each bounded by timeout, and
// returns as soon as need of them succeeded (amnesic zones not counted), or
// all returned. Calls still
// running go on (ctx still bounds them) and their results are dropped, so f
// must not share state with the caller except through its result. A zone
// that has not answered has a nil result and an errPending error.
func onQuorum[T any](ctx context.Context, zones []*zone, need int, timeout time.Duration, f func(context.Context, *zone) (T, error)) ([]T, []error) {
	return onQuorumOf(ctx, zones, need, timeout, f, func(z *zone, _ T) bool { return !z.amnesic.Load() })
}

// onQuorumOf is onQuorum counting the zones whose answer counts says count.
func onQuorumOf[T any](ctx context.Context, zones []*zone, need int, timeout time.Duration, f func(context.Context, *zone) (T, error), counts func(*zone, T) bool) ([]T, []error) {
	type result struct {
		i   int
		v   T
		err error
	}
	ch := make(chan result, len(zones))
	for i, z := range zones {
		go func() {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := f(c, z)
			ch <- result{i, v, err}
		}()
	}
	vals := make([]T, len(zones))
	errs := make([]error, len(zones))
	for i := range errs {
		errs[i] = errPending
	}
	ok := 0
	for range zones {
		r := <-ch
		vals[r.i], errs[r.i] = r.v, r.err
		if r.err == nil && counts(zones[r.i], r.v) {
			if ok++; ok >= need {
				break
			}
		}
	}
	return vals, errs
}

var errPending = errors.New("commitlog: zone has not answered yet")

func countNil(errs []error) int {
	n := 0
	for _, e := range errs {
		if e == nil {
			n++
		}
	}
	return n
}

// countIntact counts the zones that succeeded and hold the intact marker.
func countIntact(zones []*zone, errs []error) int {
	n := 0
	for i, e := range errs {
		if e == nil && !zones[i].amnesic.Load() {
			n++
		}
	}
	return n
}

func quorumErr(what string, need int, errs []error) error {
	return fmt.Errorf("%w: %s needs %d of %d zones, %d answered: %w", ErrNotEnoughZones, what, need, len(errs), countNil(errs), errors.Join(errs...))
}

// amnesicZones lists the zones without the intact marker.
func amnesicZones(zones []*zone) []int {
	var out []int
	for i, z := range zones {
		if z.amnesic.Load() {
			out = append(out, i)
		}
	}
	return out
}

// intactErr says that too few of the zones that answered hold the intact
// marker.
func intactErr(what string, need int, zones []*zone, errs []error) error {
	return lackingErr(what, need, errs, slices.DeleteFunc(amnesicZones(zones), func(i int) bool { return errs[i] != nil }))
}

// lackingErr is intactErr given the answering zones that lack the marker.
func lackingErr(what string, need int, errs []error, amnesic []int) error {
	if countNil(errs) < need {
		return quorumErr(what, need, errs)
	}
	err := fmt.Errorf("%w: %s needs %d of %d zones holding the log intact, %d answered, of which zones %v lack its intact marker (replaced or emptied, or down when the log began, until a writer's repair has given them what they could have held)",
		ErrNotEnoughZones, what, need, len(errs), countNil(errs), amnesic)
	if e := errors.Join(errs...); e != nil {
		err = fmt.Errorf("%w: %w", err, e)
	}
	return err
}

// listChain lists the segments of the log from key from on (all if nil) on
// every zone and returns their union, in key order. It needs answers from
// need zones. With recheck (an Open's listing, whose union must hold every
// segment a writer may have acknowledged records in) a zone counts only if
// it holds the intact marker after its listing (see zone.recheckIntact).
func listChain(ctx context.Context, zones []*zone, need int, timeout time.Duration, from *segKey, recheck bool) ([]segKey, error) {
	type listing struct {
		keys  []segKey
		start int64
	}
	lists, errs := onQuorum(ctx, zones, need, timeout, func(ctx context.Context, z *zone) (listing, error) {
		ks, start, err := z.listLog(ctx, from)
		if err == nil && recheck {
			err = z.recheckIntact(ctx)
		}
		return listing{ks, start}, err
	})
	if countIntact(zones, errs) < need {
		return nil, intactErr("listing segments", need, zones, errs)
	}
	var keys [][]segKey
	var start int64
	for i, l := range lists {
		if errs[i] == nil {
			keys = append(keys, l.keys)
			start = max(start, l.start)
		}
	}
	return fromStart(union(keys), start), nil
}

// union returns the keys of lists, sorted, each once.
func union(lists [][]segKey) []segKey {
	var all []segKey
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.SortFunc(all, segKey.compare)
	return slices.Compact(all)
}

// errNoSegment: a name under the segments' prefix whose header no zone
// holds, every zone having answered (absent, or not a header). A writer
// creates a segment with its header in the same write, on W zones before any
// record in it is acknowledged; so with at most N-W zones damaged, such a
// name holds no acknowledged record: it is garbage (or a segment whose
// creation reached one zone and was damaged there), and readers and Open
// pass over it rather than wait for it.
var errNoSegment = errors.New("commitlog: not a segment: no zone holds its header")

// segmentHeader returns the header of segment k from the first zone (or
// the regional store, if not nil) that has it; errNoSegment if every one
// answered that it has none.
func segmentHeader(ctx context.Context, zones []*zone, regional *zone, k segKey, timeout time.Duration) (frame, error) {
	var errs []error
	definite := true
	try := func(z *zone) (frame, error) {
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		h, err := z.readHeader(c, k)
		if err != nil {
			errs = append(errs, err)
			if !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, errCorrupt) {
				definite = false // moved, or not known
			}
		}
		return h, err
	}
	for _, z := range zones {
		if h, err := try(z); err == nil {
			return h, nil
		} else if errors.Is(err, errMovedSegment) {
			break // the header is in the regional copy
		}
	}
	if regional != nil {
		if h, err := try(regional); err == nil {
			return h, nil
		}
	} else if !definite || len(errs) < len(zones) {
		definite = false
	}
	err := errors.Join(errs...)
	if definite {
		return frame{}, fmt.Errorf("%w: segment %s: %w", errNoSegment, k, err)
	}
	return frame{}, fmt.Errorf("commitlog: no zone has the header of segment %s: %w", k, err)
}

// DefaultRepairInterval is how often a writer's repair passes run unless
// Options.RepairInterval says otherwise. A pass over an idle log lists each
// zone twice (its segments, and its epoch claims above the writer's).
const DefaultRepairInterval = time.Minute

// DefaultMaxInFlight is Options.MaxInFlight's default.
const DefaultMaxInFlight = 8

// acquireEpoch claims an epoch higher than any claimed before on a majority
// of zones: the writer's fencing token. Two writers never hold the same epoch.
func acquireEpoch(ctx context.Context, zones []*zone, timeout time.Duration) (uint64, error) {
	majority := len(zones)/2 + 1
	var floor uint64
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		maxes := make([]uint64, len(zones))
		intact := make([]bool, len(zones))
		errs := onAll(ctx, zones, timeout, func(ctx context.Context, z *zone) error {
			var err error
			maxes[z.idx], intact[z.idx], err = z.claims(ctx)
			return err
		})
		if countNil(errs) < majority {
			return 0, quorumErr("reading epochs", majority, errs)
		}
		// A log none of whose answering zones holds a claim or the intact
		// marker is new: they all hold the marker from now on. So is one
		// older than the marker, with claims but no marker on any zone,
		// once every zone answers. Otherwise a zone without the marker is
		// amnesic until a repair: it may have lost what it held, and a
		// log whose intact zones do not answer is not taken for a new one.
		fresh := !slices.Contains(intact, true) &&
			(slices.Max(maxes) == 0 || countNil(errs) == len(zones))
		for i, z := range zones {
			// One that did not answer is not known intact: not counted.
			z.amnesic.Store(errs[i] != nil || !intact[i] && !fresh)
		}
		e := max(slices.Max(maxes), floor) + 1
		if e > maxSegEpoch {
			return 0, fmt.Errorf("commitlog: no epoch left to claim: %d is past the %d a segment name holds", e, uint64(maxSegEpoch))
		}
		if countIntact(zones, errs) < majority {
			if countNil(errs) == len(zones) {
				ok, err := neverWritten(ctx, zones, timeout, e)
				if err != nil {
					return 0, err
				}
				if ok {
					return e, nil
				}
			}
			return 0, intactErr("reading epochs", majority, zones, errs)
		}
		errs = onAll(ctx, zones, timeout, func(ctx context.Context, z *zone) error {
			if err := z.createEpoch(ctx, e); err != nil {
				return err
			}
			if fresh {
				if err := z.createEpoch(ctx, intactEpoch); err != nil && !errors.Is(err, blob.ErrExists) {
					return err
				}
			}
			return nil
		})
		if countNil(errs) >= majority {
			for i, z := range zones {
				if fresh && errs[i] != nil {
					z.amnesic.Store(true) // it may have no marker
				}
			}
			return e, nil
		}
		// Lost a race (or too few zones answered): try above it.
		floor = e
		if attempt > 100 {
			return 0, quorumErr("claiming an epoch", majority, errs)
		}
	}
}

// neverWritten handles a log whose first Opens all failed part way: one
// wrote the marker on some zones and not on a majority (a write timed out),
// so that no later Open counts the others intact, and the log could never
// be opened. Such a log never held a record: a successful Open creates its
// first segment on W zones before it returns. So neverWritten claims e on a
// majority (every Open that has not yet checked its epoch is fenced from
// then on, and never acknowledges a record), then lists every zone: if none
// holds a segment, no record was ever acknowledged, and every zone holds
// the log intact; it gets the marker. It reports whether e is claimed and a
// majority holds the marker; false (and no error) if the log has segments,
// whose zones without the marker stay amnesic.
func neverWritten(ctx context.Context, zones []*zone, timeout time.Duration, e uint64) (bool, error) {
	majority := len(zones)/2 + 1
	errs := onAll(ctx, zones, timeout, func(ctx context.Context, z *zone) error {
		return z.createEpoch(ctx, e)
	})
	if countNil(errs) < majority {
		return false, quorumErr("claiming an epoch", majority, errs)
	}
	segs := make([]int, len(zones))
	errs = onAll(ctx, zones, timeout, func(ctx context.Context, z *zone) error {
		ks, err := z.listSegments(ctx, nil)
		segs[z.idx] = len(ks)
		return err
	})
	if countNil(errs) < len(zones) {
		return false, quorumErr("listing the segments of a log without its intact marker", len(zones), errs)
	}
	if slices.Max(segs) > 0 {
		return false, nil
	}
	errs = onAll(ctx, zones, timeout, func(ctx context.Context, z *zone) error {
		err := z.createEpoch(ctx, intactEpoch)
		if errors.Is(err, blob.ErrExists) {
			err = nil
		}
		z.amnesic.Store(err != nil)
		return err
	})
	if countNil(errs) < majority {
		return false, quorumErr("writing the intact marker", majority, errs)
	}
	return true, nil
}

// checkEpoch fails with ErrFenced if a zone shows an epoch above e, and
// with ErrNotEnoughZones unless a majority of zones holding the intact
// marker answered. A writer calls it after creating a segment and before
// using it: either the new writer's recovery lists the segment, or this
// check sees the new epoch (see createOn for a create that lands later).
// Each zone's claims above e are listed first, then its marker looked for,
// so that a zone replaced by an empty bucket (its claims gone with it) at
// any time before its listing is not counted, however long ago this writer
// last read the zone's marker.
func checkEpoch(ctx context.Context, zones []*zone, e uint64, timeout time.Duration) error {
	majority := len(zones)/2 + 1
	type claims struct {
		max    uint64
		intact bool
	}
	vals, errs := onQuorumOf(ctx, zones, majority, timeout, func(ctx context.Context, z *zone) (claims, error) {
		m, err := z.maxEpoch(ctx, e)
		if err != nil {
			return claims{}, err
		}
		intact, err := blob.Exists(ctx, z.s, z.epochKey(intactEpoch))
		return claims{m, intact}, err
	}, func(_ *zone, c claims) bool { return c.intact })
	var lacking []int
	for i, c := range vals {
		if errs[i] != nil {
			continue
		}
		if c.max > e {
			return fmt.Errorf("%w: epoch %d, found %d", ErrFenced, e, c.max)
		}
		if !c.intact {
			lacking = append(lacking, i)
		}
	}
	if countNil(errs)-len(lacking) < majority {
		return lackingErr("checking the epoch", majority, errs, lacking)
	}
	return nil
}
