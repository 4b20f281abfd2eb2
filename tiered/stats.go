package tiered

import (
	"sync"
	"sync/atomic"
	"time"
)

// Stats is the compactor's progress since the Store was made.
type Stats struct {
	Passes       int64 // compaction passes completed (one per shard)
	MovedObjects int64 // objects moved to cold and deleted from hot
	MovedBytes   int64
	// Conflicts counts moves abandoned because the user overwrote or deleted
	// the object meanwhile; the copy made for them was removed from cold.
	Conflicts int64
	// Busy counts objects skipped because a conditional write or delete held
	// them; the next pass moves them.
	Busy   int64
	Errors int64 // moves that failed; the object stays in hot for the next pass
	// Lag is how much older than After the oldest object that the last pass
	// failed to move (or found busy) was: how far compaction is behind.
	Lag time.Duration
	// Recovered counts move markers examined by recovery: moves that failed
	// or whose process crashed, finished by a later pass.
	Recovered int64
	// Packs counts packs written (by moves and rewrites), Rewrites packs
	// rewritten without their dead entries, and Tombstones the tombstones
	// written (by this Store's deletes, moves and maintenance; the calls in
	// flight at once share one).
	Packs, Rewrites, Tombstones int64
	// Retired counts hot replica copies a pack move deleted (hot is a
	// quorum); Unretired the retirements left for recovery to finish (a
	// replica did not answer); StaleHot the answers of hot that reads,
	// Stats and listings set aside as older than the pack log's (copies a
	// retirement had not removed yet).
	Retired, Unretired, StaleHot int64
	// Graves counts the graves this Store's Deletes wrote in hot over
	// versions a move may have been taking, GravesRetired those its
	// compactor removed with what they shadowed.
	Graves, GravesRetired int64
	// MissesChecked counts reads and Stats that missed in both tiers and
	// asked both again before reporting NotFound (see NewRangeReader).
	MissesChecked int64
	// DeletesOfWritten counts Deletes of a version this Store wrote that
	// took one write (a grave on condition of the generation written, with
	// no Stat first); WrittenChanged those that found the version changed
	// and looked at hot as any Delete does.
	DeletesOfWritten, WrittenChanged int64
	// IndexLoads counts pack indexes read from cold (each pack's once when
	// the catalog first lists it, and again when the index cache had let it
	// go); IndexCacheBytes and IndexesCached are what the cache holds now.
	IndexLoads      int64
	IndexCacheBytes int64
	IndexesCached   int
	// Damaged names the objects of the pack log that do not parse or
	// verify (packs, tombstones): skipped by the catalog, which serves every
	// other, while reads of the keys they may hold fail with ErrCorrupt
	// naming them. Foreign counts objects under the log's prefix whose
	// names are not the log's, skipped.
	Damaged []string
	Foreign int64
	// CorruptReads counts packed reads (and rewrites) that met bytes not
	// matching their entry's length or checksum, and failed with ErrCorrupt.
	CorruptReads int64
	LastPass     time.Time
	LastPassTook time.Duration
	LastError    string
	// Lease is what this Store knows of the compactor lease: who holds it,
	// since when, and whether this Store does.
	Lease LeaseStats
}

type statsCounters struct {
	passes, moved, bytes, conflicts, busy, errs, recovered atomic.Int64
	packs, rewrites, tombstones, indexLoads                atomic.Int64
	retired, unretired, staleHot, missesChecked            atomic.Int64
	graves, gravesRetired, corruptReads                    atomic.Int64
	writtenDeleted, writtenMissed                          atomic.Int64
	mu                                                     sync.Mutex
	lag                                                    map[int]time.Duration // by shard
	lastPass                                               time.Time
	lastTook                                               time.Duration
	lastErr                                                string
	lastLogged                                             time.Time
	errsLogged                                             int64
}

// Stats returns the compactor's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	st := Stats{
		Passes: c.passes.Load(), MovedObjects: c.moved.Load(), MovedBytes: c.bytes.Load(),
		Conflicts: c.conflicts.Load(), Busy: c.busy.Load(), Errors: c.errs.Load(),
		Recovered: c.recovered.Load(),
		Packs:     c.packs.Load(), Rewrites: c.rewrites.Load(), Tombstones: c.tombstones.Load(),
		Retired: c.retired.Load(), Unretired: c.unretired.Load(), StaleHot: c.staleHot.Load(),
		MissesChecked: c.missesChecked.Load(),
		IndexLoads:    c.indexLoads.Load(),
		Graves:        c.graves.Load(), GravesRetired: c.gravesRetired.Load(),
		DeletesOfWritten: c.writtenDeleted.Load(), WrittenChanged: c.writtenMissed.Load(),
	}
	st.IndexCacheBytes, st.IndexesCached = s.catalog.CacheSize()
	st.Lease = s.leaseStats()
	st.Damaged, st.Foreign, st.CorruptReads = s.catalog.DamagedNames(), s.catalog.Foreign(), c.corruptReads.Load()
	c.mu.Lock()
	for _, lag := range c.lag {
		st.Lag = max(st.Lag, lag)
	}
	st.LastPass, st.LastPassTook, st.LastError = c.lastPass, c.lastTook, c.lastErr
	c.mu.Unlock()
	return st
}

// failLogEvery spaces the warnings of a failing compactor.
const failLogEvery = time.Minute

func (s *Store) fail(err error) {
	n := s.stats.errs.Add(1)
	s.stats.mu.Lock()
	s.stats.lastErr = err.Error()
	now := time.Now()
	logNow := s.stats.lastLogged.IsZero() || now.Sub(s.stats.lastLogged) >= failLogEvery
	since := n - s.stats.errsLogged
	if logNow {
		s.stats.lastLogged, s.stats.errsLogged = now, n
	}
	s.stats.mu.Unlock()
	if logNow {
		// A compactor that cannot move leaves data in hot, where it costs
		// more, without any caller seeing an error: say so, rate-limited.
		s.opts.Logger.Warn("tiered: compaction failing; objects stay in hot", "failures", since, "total", n, "error", err)
	}
}
