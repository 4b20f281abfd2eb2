package gcsrapid

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob/pool"
)

type statsRecorder struct {
	writes latencies
	probes atomic.Int64 // reads made to tell an unwritten prewarmed object from a written one
	// recoveries counts the takeovers that finished a write whose stream failed
	recoveries atomic.Int64
	// readReopens counts the read streams reads opened again
	readReopens atomic.Int64
	// leftovers counts the leftovers conditional creates removed
	leftovers atomic.Int64
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
	// VisibilityProbes counts the reads that told a prewarmed object whose
	// size read zero (perhaps out of date) from a written one.
	VisibilityProbes int64
	// WriteRecoveries counts the writes whose stream failed after their
	// object existed, taken over to finish them (attempts, not successes).
	WriteRecoveries int64
	// ReadReopens counts the read streams that range readers and ReaderAts
	// opened again after the service ended one under them.
	ReadReopens int64
	// LeftoversRemoved counts the objects of writes that never committed,
	// older than LeftoverAge, that conditional creates of their keys
	// removed.
	LeftoversRemoved int64
	// SweepPasses counts the sweeper's passes over the pooled prefixes;
	// Swept the unwritten prewarmed objects it deleted, and SweepErrors the
	// passes that ended early on an error.
	SweepPasses, Swept, SweepErrors int64
	// Connectivity says whether the client reaches the service with direct
	// connectivity (DirectPath): ConnectivityDirect, ConnectivityIndirect,
	// or ConnectivityUnknown for a Store made with New over a caller's client.
	Connectivity string
}

// Stats returns a snapshot of the Store's counters.
func (s *Store) Stats() Stats {
	st := Stats{Pools: map[string]pool.Stats{}, Writes: s.stats.writes.snapshot(), VisibilityProbes: s.stats.probes.Load(), WriteRecoveries: s.stats.recoveries.Load(), ReadReopens: s.stats.readReopens.Load(), LeftoversRemoved: s.stats.leftovers.Load(), Connectivity: s.connectivity}
	if s.creator != nil {
		st.Pools = s.creator.Stats()
	}
	if sw := s.sweeper; sw != nil {
		st.SweepPasses, st.Swept, st.SweepErrors = sw.passes.Load(), sw.swept.Load(), sw.errors.Load()
	}
	return st
}
