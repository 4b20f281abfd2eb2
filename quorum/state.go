package quorum

import "maps"

// keyState is what this process knows about a key beyond what any one replica
// says: the newest version it acknowledged (or deleted) while some replica may
// still lack it, versions whose writes failed and must never be served, and
// writes in flight. Reads use it to reject stale and failed copies, so that in
// one process a read sees every write acknowledged before it started. An entry
// lives only while replicas disagree; the repairer removes it once they agree.
type keyState struct {
	latest  string // token of the newest acknowledged write or delete
	deleted bool   // latest is a delete
	have    uint64 // replicas known to hold latest (bit i: replica i)
	failed  map[string]bool
	flying  int             // writes and deletes in flight
	writing map[string]bool // tokens of writes not yet acknowledged or failed
	// contended: writes overlapped since latest was acknowledged, so a
	// straggler of an older one may have landed over it; only a repair that
	// reads every replica may then say they agree.
	contended bool
	starts    int // writes, deletes and repairs ever started
}

// acceptFound reports whether a replica answer with version tok may be served.
func (st *keyState) acceptFound(tok string) bool {
	if st == nil {
		return true
	}
	if st.failed[tok] {
		return false
	}
	if st.latest == "" || st.writing[tok] {
		// A write in flight is concurrent with this read: either answer is right.
		return true
	}
	if st.deleted {
		return tok > st.latest
	}
	return tok >= st.latest
}

// acceptNotFound reports whether a replica's NotFound counts toward ErrNotFound.
func (st *keyState) acceptNotFound() bool {
	return st == nil || st.latest == "" || st.deleted
}

func (st *keyState) idle() bool {
	return st.flying == 0 && len(st.failed) == 0 && st.latest == "" && !st.contended
}

// snapshot returns a copy of key's state, or nil.
func (s *Store) snapshot(key string) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.keys[key]
	if st == nil {
		return nil
	}
	c := *st
	c.failed = maps.Clone(st.failed)
	c.writing = maps.Clone(st.writing)
	return &c
}

// update runs fn on key's state (created if needed) and drops it when idle.
func (s *Store) update(key string, fn func(st *keyState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.keys[key]
	if st == nil {
		st = &keyState{}
		s.keys[key] = st
	}
	fn(st)
	if st.latest != "" && st.have == s.all() && st.flying == 0 && !st.contended {
		st.latest, st.deleted, st.have = "", false, 0
	}
	if st.idle() {
		delete(s.keys, key)
	}
}

func (s *Store) all() uint64 { return 1<<len(s.reps) - 1 }

// acked records an acknowledged write or delete of version tok held by have.
// The floor for reads becomes the version acknowledged last, not the highest
// token: a concurrent write with a lower token may have landed over a higher
// one, and both are correct answers once both were acknowledged.
func (s *Store) acked(key, tok string, deleted bool, have uint64) {
	s.update(key, func(st *keyState) {
		delete(st.writing, tok)
		if tok != st.latest {
			st.latest, st.deleted, st.have = tok, deleted, 0
		}
		st.have |= have
	})
}

// landed records that replica i now holds version tok (a straggler or repair).
func (s *Store) landed(key, tok string, i int) {
	s.update(key, func(st *keyState) {
		if st.latest == tok {
			st.have |= 1 << i
		}
	})
}

func (st *keyState) failedTok(tok string) bool { return st != nil && st.failed[tok] }

// starting records a write or delete in flight.
func (st *keyState) starting() {
	if st.flying > 0 {
		st.contended = true
	}
	st.flying++
	st.starts++
}
