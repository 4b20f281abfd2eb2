package gcsrapid

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob/pool"
)

type statsRecorder struct {
	writes         latencies
	discardDeletes atomic.Int64
}

type latencies struct {
	mu sync.Mutex
	h  pool.Histogram
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.h.Add(d)
	l.mu.Unlock()
}

func (l *latencies) snapshot() pool.Histogram {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h
}

// Stats is a snapshot of a Store's counters.
type Stats struct {
	// Pools are the Create pools by prefix: hits, misses, loads, discards
	// by reason, hand-out ages.
	Pools map[string]pool.Stats
	// Writes is the latency of committed writes, from NewWriter (or hand-out)
	// to the end of Close.
	Writes pool.Histogram
	// DiscardedDeleted counts pooled objects deleted after discard.
	DiscardedDeleted int64
}

// Stats returns a snapshot of the Store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Pools: map[string]pool.Stats{}, Writes: s.stats.writes.snapshot(), DiscardedDeleted: s.stats.discardDeletes.Load()}
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	for prefix, p := range s.pools {
		st.Pools[prefix] = p.Stats()
	}
	return st
}
