package tiered

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// The compactor lease. The compactors of one pair of tiers elect one holder
// through a lease object in cold, written only on condition of the
// generation its writer last saw: whoever holds it runs passes, everyone
// else runs none. It lives in cold (unless Options.LeaseStore names
// another store), beside the pack log and its inventory that a pass
// writes: a renewal is one regional write (over a quorum hot tier it would
// be a consensus round, three zonal writes), and a process cut off from
// cold can commit nothing a pass makes anyway.
//
// Clocks. The holder acts only while its own clock is before the lease's
// expiry less MaxClockSkew; a contender takes the lease over only once its
// clock is past the expiry plus MaxClockSkew. With any two clocks within
// MaxClockSkew of each other, the holder has stopped acting by real time
// before a successor starts, with MaxClockSkew to spare for a write already
// on the wire to land. A lease must therefore last more than two
// MaxClockSkews, and by default lasts three (the holder renews it every
// third of it, and must still hold it between renewals).
//
// Fencing. Every write a pass makes goes out under a context that carries
// the holder's epoch (passContext); fence, called before each of them,
// refuses the write once the lease is lost or its acting deadline has
// passed, and the context itself ends at that deadline. A holder stopped
// past its lease (a process paused, a machine suspended) finds on waking
// that every later write of its pass is refused: its markers, packs, log
// entries, tombstones, hot deletes and retirements. What it cannot recall is
// a write it had already sent when it stopped; MaxClockSkew of margin covers
// one that lands soon after, and the conditional writes of the move
// protocols (markers IfNotExist, hot deletes on a generation, the inventory
// on its generation) refuse the rest where it matters.
const leaseKey = markerPrefix + "lease"

// leaseMetaKey holds the lease in the object's metadata, so that one Stat
// reads the lease and its generation: "holder epoch since expires released"
// (times in Unix nanoseconds, released 0 or 1).
const leaseMetaKey = "zonalblob-tiered-lease"

// errNotHolder is the error of a pass that another process's lease keeps
// from running, and of a write of a pass whose lease ended.
var errNotHolder = errors.New("tiered: this process does not hold the compactor lease")

// minLeaseDuration is the shortest default lease, whatever the clock skew:
// a renewal is a regional write, made while a pass keeps the process busy,
// and under the race detector on a busy machine the renewals of a
// one-second lease came late during a pass of 10,000 objects, which the
// lease's loss cut short.
const minLeaseDuration = 10 * time.Second

// leaseDuration is how long a lease lasts from its writing.
func (o Options) leaseDuration() time.Duration {
	if o.LeaseDuration > 0 {
		return o.LeaseDuration
	}
	return max(3*o.MaxClockSkew, minLeaseDuration)
}

// LeaseStats is what a Store knows of the compactor lease.
type LeaseStats struct {
	// Holder is the Owner that held the lease when this Store last read or
	// wrote it ("" if none ever did), Epoch its epoch (each new holder's is
	// one more), Since when that epoch began and Expires when it ends
	// unless renewed (on the holder's clock).
	Holder  string
	Epoch   uint64
	Since   time.Time
	Expires time.Time
	// Held reports that this Store holds the lease now.
	Held bool
	// Acquired counts the epochs this Store began; Lost those it lost
	// before it released them (a renewal that failed or came too late, a
	// takeover by another process); Skipped the passes it did not run
	// because another process held the lease.
	Acquired, Lost, Skipped int64
}

// leaseRecord is the lease as stored.
type leaseRecord struct {
	holder   string
	epoch    uint64
	since    time.Time
	expires  time.Time
	released bool
}

func (r leaseRecord) encode() string {
	rel := 0
	if r.released {
		rel = 1
	}
	return fmt.Sprintf("%s %d %d %d %d", url.QueryEscape(r.holder), r.epoch, r.since.UnixNano(), r.expires.UnixNano(), rel)
}

func parseLease(s string) (leaseRecord, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return leaseRecord{}, fmt.Errorf("tiered: malformed compactor lease %q", s)
	}
	var r leaseRecord
	var err error
	var since, expires int64
	if r.holder, err = url.QueryUnescape(f[0]); err != nil {
		return leaseRecord{}, fmt.Errorf("tiered: malformed compactor lease %q", s)
	}
	if r.epoch, err = strconv.ParseUint(f[1], 10, 64); err == nil {
		if since, err = strconv.ParseInt(f[2], 10, 64); err == nil {
			expires, err = strconv.ParseInt(f[3], 10, 64)
		}
	}
	if err != nil || (f[4] != "0" && f[4] != "1") {
		return leaseRecord{}, fmt.Errorf("tiered: malformed compactor lease %q", s)
	}
	r.since, r.expires, r.released = time.Unix(0, since), time.Unix(0, expires), f[4] == "1"
	return r, nil
}

// lease is this Store's side of the compactor lease.
type lease struct {
	s        *Store
	store    blob.Store // where the lease lives: Options.LeaseStore, or cold
	duration time.Duration
	skew     time.Duration

	// keepMu runs one keep at a time: two renewals of one process racing
	// on the lease's generation would have the loser give up what the
	// winner renewed.
	keepMu sync.Mutex

	mu    sync.Mutex
	rec   leaseRecord // as last read or written
	gen   string      // its generation, "" if none was seen
	held  bool
	until time.Time // while held: when this Store stops acting
	// cancels ends the contexts of the passes running under the epoch
	// held, when it is lost.
	cancels map[*passHold]context.CancelCauseFunc

	acquired, lost, skipped atomic.Int64
}

func newLease(s *Store) *lease {
	store := s.opts.LeaseStore
	if store == nil {
		store = s.cold
	}
	return &lease{s: s, store: store, duration: s.opts.leaseDuration(), skew: s.opts.MaxClockSkew, cancels: map[*passHold]context.CancelCauseFunc{}}
}

// stats reports the lease for Stats.
func (l *lease) stats() LeaseStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LeaseStats{
		Holder: l.rec.holder, Epoch: l.rec.epoch, Since: l.rec.since, Expires: l.rec.expires,
		Held:     l.held && time.Now().Before(l.until),
		Acquired: l.acquired.Load(), Lost: l.lost.Load(), Skipped: l.skipped.Load(),
	}
}

// read reads the lease: ok is false if there is none.
func (l *lease) read(ctx context.Context) (rec leaseRecord, gen string, ok bool, err error) {
	a, err := l.store.Stat(ctx, leaseKey)
	if errors.Is(err, blob.ErrNotFound) {
		return leaseRecord{}, "", false, nil
	} else if err != nil {
		return leaseRecord{}, "", false, err
	}
	rec, err = parseLease(a.Metadata[leaseMetaKey])
	if err != nil {
		return leaseRecord{}, "", false, blob.Errorf("lease", leaseKey, blob.ErrCorrupt, "%v", err)
	}
	return rec, a.Generation, true, nil
}

// write writes rec on condition of generation gen ("": none), and reads
// back the generation written.
func (l *lease) write(ctx context.Context, rec leaseRecord, gen string) (string, error) {
	cond := blob.IfNotExist()
	if gen != "" {
		cond = blob.IfGenerationMatch(gen)
	}
	body := []byte(rec.encode() + "\n")
	err := blob.Put(ctx, l.store, leaseKey, body, &blob.WriterOptions{If: cond, ContentType: "text/plain", Metadata: map[string]string{leaseMetaKey: rec.encode()}})
	if err != nil {
		return "", err
	}
	got, g, ok, err := l.read(ctx)
	if err != nil {
		return "", err
	}
	if !ok || got.encode() != rec.encode() {
		return "", fmt.Errorf("%w: the lease changed as it was written", errNotHolder)
	}
	return g, nil
}

// keep acquires the lease, or renews it if held: it reports whether this
// Store holds it afterwards. A renewal or takeover whose write fails leaves
// the lease as the next read finds it (a write of unknown outcome that
// took effect names this Owner, and is taken over at once).
func (l *lease) keep(ctx context.Context) (bool, error) {
	l.keepMu.Lock()
	defer l.keepMu.Unlock()
	return l.keepLocked(ctx)
}

// keepLocked is keep, with keepMu held.
func (l *lease) keepLocked(ctx context.Context) (bool, error) {
	cur, gen, ok, err := l.read(ctx)
	if err != nil {
		l.noteLost(err)
		return false, err
	}
	me := l.s.opts.Owner
	now := time.Now()
	var next leaseRecord
	l.mu.Lock()
	mine := l.held && ok && cur.holder == me && cur.epoch == l.rec.epoch && gen == l.gen
	l.mu.Unlock()
	switch {
	case mine:
		next = cur
		next.expires = now.Add(l.duration)
	case !ok:
		next = leaseRecord{holder: me, epoch: 1, since: now, expires: now.Add(l.duration)}
	case cur.released || cur.holder == me || now.After(cur.expires.Add(l.skew)):
		// Released, ended by every clock, or left by an earlier
		// process of this Owner (never two live processes with one
		// Owner): a new epoch begins.
		next = leaseRecord{holder: me, epoch: cur.epoch + 1, since: now, expires: now.Add(l.duration)}
	default:
		l.mu.Lock()
		l.rec, l.gen = cur, gen
		l.mu.Unlock()
		l.noteLost(nil)
		return false, nil
	}
	g, err := l.write(ctx, next, gen)
	if err != nil {
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrExists) {
			err = nil // another process wrote it first
		}
		l.noteLost(err)
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !mine {
		l.acquired.Add(1)
	}
	l.rec, l.gen, l.held = next, g, true
	// Acting ends MaxClockSkew before the expiry, counted from before the
	// write went out.
	l.until = now.Add(l.duration - l.skew)
	return true, nil
}

// noteLost records that this Store does not hold the lease (any more),
// ending the passes that ran under it.
func (l *lease) noteLost(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && time.Now().Before(l.until) && err != nil {
		// A renewal that failed: the lease holds until its deadline,
		// and the next renewal may still make it.
		return
	}
	if l.held {
		l.lost.Add(1)
	}
	l.held = false
	for h, cancel := range l.cancels {
		cancel(errNotHolder)
		delete(l.cancels, h)
	}
}

// release gives the lease up, once this Store's passes have ended, so that
// another process may take it at once.
func (l *lease) release(ctx context.Context) {
	l.keepMu.Lock()
	defer l.keepMu.Unlock()
	l.releaseLocked(ctx)
}

// releaseLocked is release, with keepMu held.
func (l *lease) releaseLocked(ctx context.Context) {
	l.mu.Lock()
	held, rec, gen := l.held && time.Now().Before(l.until), l.rec, l.gen
	l.held = false
	l.mu.Unlock()
	if !held {
		return
	}
	rec.released = true
	rec.expires = time.Now()
	if g, err := l.write(ctx, rec, gen); err == nil {
		l.mu.Lock()
		l.rec, l.gen = rec, g
		l.mu.Unlock()
	}
}

// valid reports whether this Store holds the lease and may act under epoch.
func (l *lease) valid(epoch uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held && l.rec.epoch == epoch && time.Now().Before(l.until)
}

// passHold is the lease a pass runs under, carried in its context.
type passHold struct {
	l     *lease
	epoch uint64
	timer *time.Timer
}

type passKey struct{}

// passContext returns a context for a pass under the epoch held now, which
// ends when the lease is lost or its acting deadline passes (renewals move
// it), and a func that releases it; ok is false if the lease is not held.
func (l *lease) passContext(ctx context.Context) (context.Context, func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held || !time.Now().Before(l.until) {
		return nil, nil, false
	}
	pctx, cancel := context.WithCancelCause(ctx)
	h := &passHold{l: l, epoch: l.rec.epoch}
	l.cancels[h] = cancel
	var expire func()
	expire = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, live := l.cancels[h]; !live {
			return
		}
		if left := time.Until(l.until); l.held && l.rec.epoch == h.epoch && left > 0 {
			h.timer = time.AfterFunc(left, expire) // renewed meanwhile
			return
		}
		cancel(errNotHolder)
		delete(l.cancels, h)
	}
	h.timer = time.AfterFunc(time.Until(l.until), expire)
	return context.WithValue(pctx, passKey{}, h), func() {
		l.mu.Lock()
		h.timer.Stop()
		delete(l.cancels, h)
		l.mu.Unlock()
		cancel(nil)
	}, true
}

// fence refuses a write of a pass whose lease is no longer held (see the
// lease). Writes outside a pass (the Store's own operations) pass.
func (s *Store) fence(ctx context.Context) error {
	h, ok := ctx.Value(passKey{}).(*passHold)
	if !ok || h.l.valid(h.epoch) {
		return nil
	}
	return fmt.Errorf("%w (epoch %d ended)", errNotHolder, h.epoch)
}

// keepLease renews or acquires the lease every third of its duration
// until ctx ends (Close then releases it).
func (s *Store) keepLease(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	every := s.lease.duration / 3
	for {
		kctx, cancel := context.WithTimeout(ctx, every)
		if _, err := s.lease.keep(kctx); err != nil && ctx.Err() == nil {
			// A lease that cannot be read or written stops compaction
			// in every process: say so, as a failing pass does.
			s.fail(fmt.Errorf("tiered: compactor lease: %w", err))
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// holdLease returns a context for a pass that CompactOnce runs under the
// lease, and a func that ends it. The background compactor's keeper holds
// the lease already if this Store has it; a manual Store takes it for the
// pass, renews it while the pass runs, and gives it up after.
func (s *Store) holdLease(ctx context.Context) (context.Context, func(), error) {
	l := s.lease
	if !s.opts.Manual {
		if pctx, done, ok := l.passContext(ctx); ok {
			return pctx, done, nil
		}
	}
	// Taken and registered under keepMu, so that another pass of this
	// Store that ends meanwhile does not give the lease up in between.
	l.keepMu.Lock()
	held, err := l.keepLocked(ctx)
	var pctx context.Context
	var done func()
	ok := false
	if held {
		pctx, done, ok = l.passContext(ctx)
	}
	l.keepMu.Unlock()
	if !held {
		return nil, nil, l.notHolder(err)
	}
	if !ok {
		return nil, nil, l.notHolder(nil)
	}
	if !s.opts.Manual {
		return pctx, done, nil
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		every := l.duration / 3
		for {
			select {
			case <-rctx.Done():
				return
			case <-time.After(every):
			}
			kctx, cancel := context.WithTimeout(rctx, every)
			l.keep(kctx)
			cancel()
		}
	}()
	return pctx, func() {
		done()
		stop()
		<-renewed
		l.releaseIfIdle(context.WithoutCancel(ctx))
	}, nil
}

// notHolder is the error of a pass this Store may not run.
func (l *lease) notHolder(err error) error {
	if err != nil {
		return fmt.Errorf("%w: %w", errNotHolder, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Errorf("%w: %s holds epoch %d until %v", errNotHolder, l.rec.holder, l.rec.epoch, l.rec.expires.Format(time.RFC3339Nano))
}

// releaseIfIdle releases the lease if no pass runs under it.
func (l *lease) releaseIfIdle(ctx context.Context) {
	l.keepMu.Lock()
	defer l.keepMu.Unlock()
	l.mu.Lock()
	idle := len(l.cancels) == 0
	l.mu.Unlock()
	if idle {
		rctx, cancel := context.WithTimeout(ctx, l.duration/3)
		defer cancel()
		l.releaseLocked(rctx)
	}
}
