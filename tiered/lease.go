package tiered

import (
	"cmp"
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
//
// Shards. With Options.Shards above one, the keys are split into that many
// shards (Options.ShardOf, by default a hash), each with a lease of its own:
// its own holder, epochs and fencing. A pass runs under one shard's lease
// and moves, packs and recovers that shard's keys only, so the holders of
// different shards never write one key, marker or pack. Shard 0's lease is
// leaseKey whatever the number of shards, and its record names that number
// (the layout): processes that disagree on it meet on that one object, and
// one whose number differs runs no pass while a lease of the layout in
// force may be held. The layout changes only when shard 0's lease is free:
// the process that takes it writes its own layout there, marked as coming
// from the old one, and acts under it only once a later look finds every
// other lease of the old layout free; the holder of any other shard, after
// each write of its own lease, reads shard 0's and acts only while it names
// that shard's layout in force. Each side writes before it reads the
// other's, so one of them sees the other: no two layouts act at once.
//
// What the holders of different shards write in common, at once:
//   - The pack log: packs and tombstones are new objects, written
//     IfNotExist under names of the writer's clock and a random suffix, so
//     no two writers ever write one; a kill names a key and a generation
//     and applies to that version in any pack, whoever wrote it. Pack move
//     markers in cold are named after their pack.
//   - Per key (one shard's): move markers and locks in hot, graves and
//     their retirement, a key's object in cold, its removal from hot.
//   - What removes log objects (pack rewrites, tombstones no pack needs)
//     and the inventory (written on condition of the generation its writer
//     read: a conflict fails that pass's maintenance, and the next one
//     writes it again from a fresh listing) run in shard 0's passes only,
//     so one process at a time, as with one shard; a rewrite copies one
//     pack into one (shards never mix) and waits for the markers of moves
//     in flight in any process, which are listed from cold. A full listing
//     of the log in shard 0's pass trusts that nothing was removed while it
//     ran (packlog.Catalog.refreshLocked); in another shard's it does not.
//   - The leases: each shard's its own object, written on condition of the
//     generation its writer read; a contender's request (see balance) is
//     written the same way, and a holder whose renewal it beat reads the
//     lease again and renews over it, rather than lose the shard.
const leaseKey = markerPrefix + "lease"

// maxShards bounds Options.Shards: each process reads every shard's lease
// every third of a lease.
const maxShards = 256

// leaseKeyOf names the lease of shard i among n. Shard 0's is leaseKey
// whatever n: what a process with one shard has always used, and where
// processes that disagree on n meet (see the lease).
func leaseKeyOf(i, n int) string {
	if i == 0 {
		return leaseKey
	}
	return fmt.Sprintf("%s/%d-of-%d", leaseKey, i, n)
}

// isLeaseKey reports whether key is a compactor lease (which, kept in
// hot, lives among the markers).
func isLeaseKey(key string) bool { return key == leaseKey || strings.HasPrefix(key, leaseKey+"/") }

// HashShard is the shard of key among shards when Options.ShardOf is nil:
// the 32-bit FNV-1a hash of its bytes, modulo shards. It is part of what
// processes sharing the tiers must agree on, and does not change.
func HashShard(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(shards))
}

// shardOf returns the shard of key.
func (s *Store) shardOf(key string) int {
	n := s.opts.Shards
	if n <= 1 {
		return 0
	}
	if s.opts.ShardOf == nil {
		return HashShard(key, n)
	}
	return ((s.opts.ShardOf(key) % n) + n) % n
}

// inShard reports whether a pass of shard compacts key.
func (s *Store) inShard(key string, shard int) bool {
	return s.opts.Shards <= 1 || s.shardOf(key) == shard
}

// leaseMetaKey holds the lease in the object's metadata, so that one Stat
// reads the lease and its generation: "holder epoch since expires released"
// (times in Unix nanoseconds, released 0 or 1), followed, for a layout of
// more than one shard, by "shards from wanted" (see leaseRecord).
const leaseMetaKey = "zonalblob-tiered-lease"

// errNotHolder is the error of a pass that another process's lease keeps
// from running, and of a write of a pass whose lease ended.
var errNotHolder = errors.New("tiered: this process does not hold the compactor lease")

// errLayout is the error of a Store whose Options.Shards differs from the
// number of shards that the compactors of its tiers use.
var errLayout = errors.New("tiered: the processes sharing these tiers give different Shards")

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

// LeaseStats is what a Store knows of the compactor lease: of shard 0's
// (the only one unless Options.Shards is above one), with the counts
// summed over the shards, and of each shard's in Shards.
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
	// Shards is each shard's lease, by shard: one entry, shard 0's (the
	// fields above), unless Options.Shards is above one.
	Shards []ShardLease
}

// ShardLease is what a Store knows of one shard's compactor lease; the
// fields are as in LeaseStats, for that shard.
type ShardLease struct {
	Shard   int
	Holder  string
	Epoch   uint64
	Since   time.Time
	Expires time.Time
	Held    bool
	// Wanted names a process that asked the holder for the shard (see
	// Options.Shards), "" if none.
	Wanted                  string
	Acquired, Lost, Skipped int64
}

// leaseRecord is the lease as stored.
type leaseRecord struct {
	holder   string
	epoch    uint64
	since    time.Time
	expires  time.Time
	released bool
	// shards is the number of shards of the layout the lease belongs to (0
	// in a record of one shard, written as it always was). from, in shard
	// 0's lease only, is the layout being replaced, until a look after the
	// write that replaced it finds every other lease of it free (0: none).
	shards, from int
	// wanted names a process that asked the holder for the shard, or, in a
	// released lease, the process it was released to (see balance).
	wanted string
}

// layout returns the number of shards of the layout rec belongs to.
func (r leaseRecord) layout() int { return max(r.shards, 1) }

func (r leaseRecord) encode() string {
	rel := 0
	if r.released {
		rel = 1
	}
	base := fmt.Sprintf("%s %d %d %d %d", url.QueryEscape(r.holder), r.epoch, r.since.UnixNano(), r.expires.UnixNano(), rel)
	if r.shards <= 1 && r.from == 0 && r.wanted == "" {
		return base
	}
	// A process that knows no shards finds a record it does not parse,
	// and runs no pass rather than compact every shard.
	return fmt.Sprintf("%s %d %d w%s", base, r.layout(), r.from, url.QueryEscape(r.wanted))
}

// sameHold reports whether r and o name one holding: they differ at most
// in a request (wanted), which a contender writes over the holder's.
func (r leaseRecord) sameHold(o leaseRecord) bool {
	r.wanted, o.wanted = "", ""
	return r.encode() == o.encode()
}

func parseLease(s string) (leaseRecord, error) {
	f := strings.Fields(s)
	bad := fmt.Errorf("tiered: malformed compactor lease %q", s)
	if len(f) != 5 && len(f) != 8 {
		return leaseRecord{}, bad
	}
	var r leaseRecord
	var err error
	var since, expires int64
	if r.holder, err = url.QueryUnescape(f[0]); err != nil {
		return leaseRecord{}, bad
	}
	if r.epoch, err = strconv.ParseUint(f[1], 10, 64); err == nil {
		if since, err = strconv.ParseInt(f[2], 10, 64); err == nil {
			expires, err = strconv.ParseInt(f[3], 10, 64)
		}
	}
	if err != nil || (f[4] != "0" && f[4] != "1") {
		return leaseRecord{}, bad
	}
	r.since, r.expires, r.released = time.Unix(0, since), time.Unix(0, expires), f[4] == "1"
	if len(f) == 8 {
		if r.shards, err = strconv.Atoi(f[5]); err != nil || r.shards < 1 || r.shards > maxShards {
			return leaseRecord{}, bad
		}
		if r.from, err = strconv.Atoi(f[6]); err != nil || r.from < 0 || r.from > maxShards {
			return leaseRecord{}, bad
		}
		w, ok := strings.CutPrefix(f[7], "w")
		if r.wanted, err = url.QueryUnescape(w); !ok || err != nil {
			return leaseRecord{}, bad
		}
	}
	return r, nil
}

// lease is this Store's side of one shard's compactor lease.
type lease struct {
	s        *Store
	store    blob.Store // where the lease lives: Options.LeaseStore, or cold
	shard    int
	shards   int    // this Store's layout
	key      string // leaseKeyOf(shard, shards)
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
	// leaving is set while the keeper gives the shard up to leaveTo, once
	// no pass runs under it: no pass starts under it meanwhile.
	leaving bool
	leaveTo string
	// cancels ends the contexts of the passes running under the epoch
	// held, when it is lost.
	cancels map[*passHold]context.CancelCauseFunc

	acquired, lost, skipped atomic.Int64
}

func newLeases(s *Store) []*lease {
	store := s.opts.LeaseStore
	if store == nil {
		store = s.cold
	}
	n := max(s.opts.Shards, 1)
	out := make([]*lease, n)
	for i := range out {
		out[i] = &lease{s: s, store: store, shard: i, shards: n, key: leaseKeyOf(i, n), duration: s.opts.leaseDuration(), skew: s.opts.MaxClockSkew,
			cancels: map[*passHold]context.CancelCauseFunc{}}
	}
	return out
}

// stats reports the lease for Stats.
func (l *lease) stats() ShardLease {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ShardLease{
		Shard: l.shard, Holder: l.rec.holder, Epoch: l.rec.epoch, Since: l.rec.since, Expires: l.rec.expires, Wanted: l.rec.wanted,
		Held:     l.actingLocked(),
		Acquired: l.acquired.Load(), Lost: l.lost.Load(), Skipped: l.skipped.Load(),
	}
}

// leaseStats reports every shard's lease for Stats.
func (s *Store) leaseStats() LeaseStats {
	var st LeaseStats
	for _, l := range s.leases {
		sl := l.stats()
		st.Shards = append(st.Shards, sl)
		st.Acquired += sl.Acquired
		st.Lost += sl.Lost
		st.Skipped += sl.Skipped
	}
	z := st.Shards[0]
	st.Holder, st.Epoch, st.Since, st.Expires, st.Held = z.Holder, z.Epoch, z.Since, z.Expires, z.Held
	return st
}

// actingLocked reports whether this Store may act under the lease now:
// it holds it, before its deadline, and (shard 0's) not while the layout
// it replaced may still be in force.
func (l *lease) actingLocked() bool {
	return l.held && time.Now().Before(l.until) && l.rec.from == 0
}

// read reads the lease: ok is false if there is none.
func (l *lease) read(ctx context.Context) (rec leaseRecord, gen string, ok bool, err error) {
	return readLease(ctx, l.store, l.key)
}

// readLease reads the lease at key in store: ok is false if there is none.
func readLease(ctx context.Context, store blob.Store, key string) (rec leaseRecord, gen string, ok bool, err error) {
	a, err := store.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return leaseRecord{}, "", false, nil
	} else if err != nil {
		return leaseRecord{}, "", false, err
	}
	rec, err = parseLease(a.Metadata[leaseMetaKey])
	if err != nil {
		return leaseRecord{}, "", false, blob.Errorf("lease", key, blob.ErrCorrupt, "%v", err)
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
	err := blob.Put(ctx, l.store, l.key, body, &blob.WriterOptions{If: cond, ContentType: "text/plain", Metadata: map[string]string{leaseMetaKey: rec.encode()}})
	if err != nil {
		return "", err
	}
	got, g, ok, err := l.read(ctx)
	if err != nil {
		return "", err
	}
	if !ok || !got.sameHold(rec) {
		return "", fmt.Errorf("%w: the lease changed as it was written", errNotHolder)
	}
	return g, nil
}

// free reports whether a contender may take the lease rec over at now.
func (l *lease) free(rec leaseRecord, now time.Time) bool {
	// Released, ended by every clock, or left by an earlier process of
	// this Owner (never two live processes with one Owner).
	return rec.released || rec.holder == l.s.opts.Owner || now.After(rec.expires.Add(l.skew))
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
	return l.keepFrom(ctx, cur, gen, ok, true)
}

// keepFrom is keepLocked given the lease as just read: it renews the lease
// if this Store holds it, and takes it if it is free and take is set.
func (l *lease) keepFrom(ctx context.Context, cur leaseRecord, gen string, ok, take bool) (bool, error) {
	me := l.s.opts.Owner
	for attempt := 0; ; attempt++ {
		now := time.Now()
		l.mu.Lock()
		// With several shards the generation may have changed without
		// the holding: a contender's request (wanted).
		mine := l.held && ok && cur.holder == me && cur.epoch == l.rec.epoch && cur.since.Equal(l.rec.since) && (l.shards > 1 || gen == l.gen)
		l.mu.Unlock()
		var next leaseRecord
		switch {
		case mine:
			next = cur
			next.expires, next.wanted = now.Add(l.duration), ""
			if next.from != 0 {
				// Taken from another layout, by a write that came
				// before this look at its leases.
				free, err := l.layoutFree(ctx, next.from, now)
				if err != nil {
					l.noteLost(err)
					return false, err
				}
				if free {
					next.from = 0
				}
			}
		case ok && !l.free(cur, now), !take:
			l.observe(cur, gen)
			l.noteLost(nil)
			if ok && l.shard == 0 && cur.layout() != l.shards {
				return false, l.layoutErr(cur)
			}
			return false, nil
		case !ok:
			next = leaseRecord{holder: me, epoch: 1, since: now, expires: now.Add(l.duration), shards: l.shards}
		default:
			if l.shard == 0 && cur.from == 0 && cur.layout() != l.shards {
				// Another layout's, free: taken only once no lease of
				// that layout has been held for a lease's time, so that
				// a process that disagrees does not take over processes
				// at work, even ones that take the leases only for their
				// passes (manual). What makes the change safe is the
				// look after the write.
				idle, err := l.layoutIdle(ctx, cur, now)
				if err != nil || !idle {
					l.observe(cur, gen)
					l.noteLost(err)
					return false, cmp.Or(err, l.layoutErr(cur))
				}
			}
			// A new epoch begins.
			next = leaseRecord{holder: me, epoch: cur.epoch + 1, since: now, expires: now.Add(l.duration), shards: l.shards}
			if l.shard == 0 {
				next.from = cur.from
				if next.from == 0 && cur.layout() != l.shards {
					next.from = cur.layout()
				}
				if next.from == l.shards || next.from == 1 {
					// Back to a layout whose replacement never acted,
					// or from one whose only lease this write replaces.
					next.from = 0
				}
			}
		}
		g, err := l.write(ctx, next, gen)
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrExists) {
			err = nil // another process wrote it first
			if mine && l.shards > 1 && attempt < 3 {
				// Or a request landed first: look again.
				if cur, gen, ok, err = l.read(ctx); err == nil {
					continue
				}
			}
			l.noteLost(err)
			return false, err
		}
		if err != nil {
			l.noteLost(err)
			return false, err
		}
		if l.shard > 0 {
			// After the write, shard 0's lease says whether this
			// layout is in force (see the lease).
			inForce, err := l.layoutInForce(ctx)
			if err != nil && !errors.Is(err, errNotHolder) {
				l.noteLost(err)
				return false, err
			}
			if !inForce {
				l.giveBack(ctx, next, g)
				return false, err
			}
		}
		l.mu.Lock()
		if !mine {
			l.acquired.Add(1)
		}
		l.rec, l.gen, l.held = next, g, true
		// Acting ends MaxClockSkew before the expiry, counted from before the
		// write went out.
		l.until = now.Add(l.duration - l.skew)
		l.mu.Unlock()
		if next.from != 0 && !mine && attempt < 3 {
			// Taken from another layout: the look at its leases that
			// must follow this write, as a renewal.
			cur, gen, ok = next, g, true
			continue
		}
		return true, nil
	}
}

// observe records the lease as read, held by another process or free.
func (l *lease) observe(cur leaseRecord, gen string) {
	l.mu.Lock()
	l.rec, l.gen = cur, gen
	l.mu.Unlock()
}

// layoutErr is the error of a Store whose number of shards is not the one
// shard 0's lease rec names.
func (l *lease) layoutErr(rec leaseRecord) error {
	return fmt.Errorf("%w: %w: their compactors split the keys into %d shards (shard 0's lease: %s, epoch %d), this Store into %d; it runs no pass until none of theirs has been held for a lease's time",
		errNotHolder, errLayout, rec.layout(), rec.holder, rec.epoch, l.shards)
}

// layoutInForce reads shard 0's lease, for the lease of another shard just
// written: it reports whether it names this Store's layout in force, with
// the layout's error if it names another.
func (l *lease) layoutInForce(ctx context.Context) (bool, error) {
	rec, _, ok, err := readLease(ctx, l.store, leaseKey)
	if err != nil {
		return false, err
	}
	if ok && rec.layout() != l.shards {
		return false, l.layoutErr(rec)
	}
	// With no lease of shard 0 yet, no layout is in force: its first
	// holder's write makes one.
	return ok && rec.from == 0, nil
}

// layoutFree reports whether every lease of layout m but shard 0's is free
// at now.
func (l *lease) layoutFree(ctx context.Context, m int, now time.Time) (bool, error) {
	for j := 1; j < m; j++ {
		rec, _, ok, err := readLease(ctx, l.store, leaseKeyOf(j, m))
		if err != nil {
			return false, err
		}
		if ok && !l.free(rec, now) {
			return false, nil
		}
	}
	return true, nil
}

// layoutIdle reports whether no lease of the layout of shard 0's lease
// cur has been held for a lease's time at now.
func (l *lease) layoutIdle(ctx context.Context, cur leaseRecord, now time.Time) (bool, error) {
	idle := func(rec leaseRecord) bool { return now.After(rec.expires.Add(l.skew + l.duration)) }
	if !idle(cur) {
		return false, nil
	}
	m := cur.layout()
	for j := 1; j < m; j++ {
		rec, _, ok, err := readLease(ctx, l.store, leaseKeyOf(j, m))
		if err != nil {
			return false, err
		}
		if ok && !idle(rec) {
			return false, nil
		}
	}
	return true, nil
}

// giveBack ends this Store's hold of a lease it just wrote (rec, of
// generation gen) but may not act under: it is released at once.
func (l *lease) giveBack(ctx context.Context, rec leaseRecord, gen string) {
	l.mu.Lock()
	l.rec, l.gen = rec, gen
	l.mu.Unlock()
	l.noteLost(nil)
	rec.released, rec.expires = true, time.Now()
	if g, err := l.write(ctx, rec, gen); err == nil {
		l.observe(rec, g)
	}
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
	l.held, l.leaving = false, false
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

// releaseLocked is release, with keepMu held. A lease left to a process
// that asked for it (leaving) names that process, which takes it first.
func (l *lease) releaseLocked(ctx context.Context) {
	l.mu.Lock()
	held, rec, gen := l.held && time.Now().Before(l.until), l.rec, l.gen
	to := ""
	if l.leaving {
		to = l.leaveTo
	}
	l.held, l.leaving = false, false
	l.mu.Unlock()
	if !held {
		return
	}
	for range 3 {
		next := rec
		next.released, next.expires, next.wanted = true, time.Now(), to
		g, err := l.write(ctx, next, gen)
		if err == nil {
			l.observe(next, g)
			return
		}
		if !errors.Is(err, blob.ErrPrecondition) {
			return
		}
		// A request landed first: release over it, if still ours.
		cur, cgen, ok, err := l.read(ctx)
		if err != nil || !ok || cur.holder != rec.holder || cur.epoch != rec.epoch || !cur.since.Equal(rec.since) {
			return
		}
		rec, gen = cur, cgen
	}
}

// valid reports whether this Store holds the lease and may act under epoch.
func (l *lease) valid(epoch uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.actingLocked() && l.rec.epoch == epoch
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
	if !l.actingLocked() {
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

// passShard returns the shard of the pass ctx runs, and whether it runs one.
func passShard(ctx context.Context) (int, bool) {
	h, ok := ctx.Value(passKey{}).(*passHold)
	if !ok {
		return 0, false
	}
	return h.l.shard, true
}

// fence refuses a write of a pass whose lease is no longer held (see the
// lease). Writes outside a pass (the Store's own operations) pass.
func (s *Store) fence(ctx context.Context) error {
	h, ok := ctx.Value(passKey{}).(*passHold)
	if !ok || h.l.valid(h.epoch) {
		return nil
	}
	if len(s.leases) > 1 {
		return fmt.Errorf("%w (shard %d, epoch %d ended)", errNotHolder, h.l.shard, h.epoch)
	}
	return fmt.Errorf("%w (epoch %d ended)", errNotHolder, h.epoch)
}

// keepLease renews or acquires the leases every third of their duration
// until ctx ends (Close then releases them).
func (s *Store) keepLease(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	every := s.leases[0].duration / 3
	for {
		kctx, cancel := context.WithTimeout(ctx, every)
		if err := s.keepRound(kctx); err != nil && ctx.Err() == nil {
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

// keepRound is one round of the keeper: with one shard, the lease is
// renewed or taken; with more, see balance.
func (s *Store) keepRound(ctx context.Context) error {
	if len(s.leases) == 1 {
		_, err := s.leases[0].keep(ctx)
		return err
	}
	return s.balance(ctx)
}

// seenLease is a shard's lease as a keeper's round read it.
type seenLease struct {
	rec leaseRecord
	gen string
	ok  bool
	err error
}

// balance is a keeper's round over several shards: it reads every
// shard's lease, renews those this Store holds and takes free ones up to
// its fair share, so that the shards spread over the processes that
// compact: with h processes seen (the live holders, the processes that
// asked for a shard, and this one), a share is n/h shards, rounded up.
//
// A process holding nothing is seen by none until it asks: when no free
// shard is left to it and a holder has at least two shards more than it
// does, it writes its name in one of that holder's leases (wanted, on
// condition of the lease's generation). The holder, at its next round,
// gives up half the difference, the asked-for shard first, each once no
// pass runs under it, released to the process that asked (which takes it
// first; the others leave it a lease's time). A free shard that no process
// under its share takes for a lease's time is taken by any. So with p
// processes and n shards, each ends up with n/p or n/p+1, whatever the
// order they started in; and a process's shards pass to the others when
// it dies, or at once when it closes.
func (s *Store) balance(ctx context.Context) error {
	n := len(s.leases)
	seen := make([]seenLease, n)
	var wg sync.WaitGroup
	for i, l := range s.leases {
		wg.Go(func() {
			seen[i].rec, seen[i].gen, seen[i].ok, seen[i].err = l.read(ctx)
		})
	}
	wg.Wait()
	now := time.Now()
	me := s.opts.Owner
	l0 := s.leases[0]
	live := func(r leaseRecord) bool { return !r.released && !now.After(r.expires.Add(l0.skew)) }
	count := map[string]int{me: 0}
	for _, sl := range seen {
		if sl.err != nil || !sl.ok {
			continue
		}
		if r := sl.rec; live(r) {
			count[r.holder]++
		}
		if w := sl.rec.wanted; w != "" && now.Sub(sl.rec.expires) < l0.duration {
			// A process that asked for a shard, or was left one.
			if _, ok := count[w]; !ok {
				count[w] = 0
			}
		}
	}
	fair := (n + len(count) - 1) / len(count)
	// While shard 0's lease names another layout, or this one not yet in
	// force, no other shard is taken (its holder could not act).
	z := seen[0]
	blocked := z.err != nil || z.ok && (z.rec.layout() != n || z.rec.from != 0)

	// What each shard's keep does.
	const (
		look  = iota // read only: free, or another process's
		keep         // renew this Store's, or take a free one
		leave        // give this Store's up
	)
	do := make([]int, n)
	mine := count[me]
	for i, sl := range seen {
		l, r := s.leases[i], sl.rec
		switch {
		case sl.err != nil:
		case sl.ok && r.holder == me && live(r):
			do[i] = keep
			if l.isLeaving() {
				do[i] = leave
			}
		case i > 0 && blocked:
		case !sl.ok || l.free(r, now):
			switch {
			case r.wanted == me:
			case r.wanted != "" && now.Sub(r.expires) < l.duration:
				continue // left to the process that asked for it
			case mine < fair:
			case sl.ok && now.Sub(r.expires) > l.duration:
				// No process under its share took it.
			default:
				continue
			}
			do[i] = keep
			mine++
		}
	}

	// Requests of this Store's shards: each holder that asked for one and
	// has at least two fewer is given half the difference.
	for i, sl := range seen {
		w := sl.rec.wanted
		if do[i] != keep || !sl.ok || sl.rec.holder != me || w == "" || w == me || mine < count[w]+2 {
			continue
		}
		give := (mine - count[w]) / 2
		mine, count[w] = mine-give, count[w]+give
		s.leases[i].leaveFor(w)
		do[i] = leave
		for j := n - 1; j >= 0 && give > 1; j-- {
			if do[j] == keep && seen[j].rec.holder == me && seen[j].rec.wanted == "" {
				s.leases[j].leaveFor(w)
				do[j], give = leave, give-1
			}
		}
	}
	// This Store's request, if it is short: of the highest shard of the
	// process that holds the most, not asked for yet.
	ask := -1
	top, most := 0, ""
	for h, c := range count {
		if h != me && (c > top || c == top && h < most) {
			most, top = h, c
		}
	}
	if !blocked && mine+2 <= top {
		for i := n - 1; i >= 0; i-- {
			if r := seen[i].rec; seen[i].ok && seen[i].err == nil && r.holder == most && live(r) && r.wanted == "" {
				ask = i
				break
			}
		}
	}

	// Shard 0 first: a new layout's first lease, that the others check.
	var errs []error
	var mu sync.Mutex
	run := func(i int) {
		l, sl := s.leases[i], seen[i]
		var err error
		switch {
		case sl.err != nil:
			l.noteLost(sl.err)
			err = sl.err
		case do[i] == leave:
			err = l.leaveIfIdle(ctx, sl)
		default:
			l.keepMu.Lock()
			_, err = l.keepFrom(ctx, sl.rec, sl.gen, sl.ok, do[i] == keep)
			l.keepMu.Unlock()
		}
		if i == ask && err == nil {
			err = l.request(ctx, sl.rec, sl.gen)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
			mu.Unlock()
		}
	}
	run(0)
	for i := 1; i < n; i++ {
		wg.Go(func() { run(i) })
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// isLeaving reports whether the keeper gives the shard up.
func (l *lease) isLeaving() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaving
}

// leaveFor has the keeper give the shard up to the process to, once no
// pass runs under it; no pass starts under it meanwhile.
func (l *lease) leaveFor(to string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && !l.leaving {
		l.leaving, l.leaveTo = true, to
	}
}

// leaveIfIdle releases a shard the keeper gives up if no pass runs under
// it, and renews it otherwise (the pass ends, and the next round releases
// it).
func (l *lease) leaveIfIdle(ctx context.Context, sl seenLease) error {
	l.keepMu.Lock()
	defer l.keepMu.Unlock()
	l.mu.Lock()
	idle := len(l.cancels) == 0
	l.mu.Unlock()
	if idle {
		l.releaseLocked(ctx)
		return nil
	}
	_, err := l.keepFrom(ctx, sl.rec, sl.gen, sl.ok, true)
	return err
}

// request asks the holder of a lease (as read: rec, of generation gen) to
// give the shard up to this Store, on condition of the generation: a
// request that lands after a renewal is made again at a later round.
func (l *lease) request(ctx context.Context, rec leaseRecord, gen string) error {
	rec.wanted = l.s.opts.Owner
	_, err := l.write(ctx, rec, gen)
	if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, errNotHolder) {
		return nil
	}
	return err
}

// holdLease returns a context for a pass that CompactOnce runs under the
// lease l, and a func that ends it. The background compactor's keeper
// holds the lease already if this Store has it; a manual Store takes it for
// the pass, renews it while the pass runs, and gives it up after.
func (s *Store) holdLease(ctx context.Context, l *lease) (context.Context, func(), error) {
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
		// Held, but not to act under yet (see the lease): a manual
		// Store does not keep it between passes.
		err := l.notHolder(nil)
		if s.opts.Manual {
			l.releaseIfIdle(context.WithoutCancel(ctx))
		}
		return nil, nil, err
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
	if errors.Is(err, errNotHolder) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errNotHolder, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	shard := ""
	if l.shards > 1 {
		shard = fmt.Sprintf(" of shard %d", l.shard)
	}
	if l.held && l.rec.from != 0 {
		return fmt.Errorf("%w: the lease%s was taken from a layout of %d shards, whose other leases are not all free yet", errNotHolder, shard, l.rec.from)
	}
	return fmt.Errorf("%w: %s holds epoch %d%s until %v", errNotHolder, l.rec.holder, l.rec.epoch, shard, l.rec.expires.Format(time.RFC3339Nano))
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
