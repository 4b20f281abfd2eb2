package quorum

import (
	"errors"
	"maps"

	"github.com/zonalblob/zonalblob/blob"
)

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
	// seq numbers starts and acknowledgements on this key; acks are the
	// recent acknowledgements, and concurrent the tokens a read may return
	// besides latest: writes in flight when latest was acknowledged or
	// acknowledged while it was in flight (the model of linearizability:
	// overlapping operations may take effect in either order).
	seq        int
	acks       []ackRec
	concurrent map[string]bool
	concDelete bool // a delete overlapped latest
	deleting   int  // deletes in flight
	// undo: failed writes whose undo has not reported yet, true once a
	// repair kept (promoted) the version, so that the write reports it may
	// have taken effect. refuse: failed versions whose writes reported a
	// refusal whatever became of their copies (IfNotExist losers): never
	// promoted.
	undo   map[string]bool
	refuse map[string]bool
}

type ackRec struct {
	tok     string
	seq     int
	deleted bool
}

// acceptFound reports whether a replica answer with version tok may be served.
func (st *keyState) acceptFound(tok string) bool {
	if st == nil {
		return true
	}
	if st.failed[tok] {
		return false
	}
	if st.latest == "" || st.writing[tok] || st.concurrent[tok] {
		// Overlapping writes may take effect in either order.
		return true
	}
	if st.deleted {
		return tok > st.latest
	}
	return tok >= st.latest
}

// acceptNotFound reports whether a replica's NotFound counts toward ErrNotFound.
func (st *keyState) acceptNotFound() bool {
	return st == nil || st.latest == "" || st.deleted || st.concDelete || st.deleting > 0
}

func (st *keyState) idle() bool {
	return st.flying == 0 && len(st.failed) == 0 && st.latest == "" && !st.contended && len(st.undo) == 0
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
	c.concurrent = maps.Clone(st.concurrent)
	c.undo = nil
	c.refuse = maps.Clone(st.refuse)
	c.acks = nil
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
		st.acks, st.concurrent, st.concDelete = nil, nil, false
	}
	if st.idle() {
		delete(s.keys, key)
	}
}

func (s *Store) all() uint64 { return 1<<len(s.reps) - 1 }

// acked records an acknowledged write or delete of version tok held by have;
// started is the key's seq when it started. The floor for reads becomes the
// version acknowledged last, not the highest token.
func (s *Store) acked(key, tok string, deleted bool, have uint64, started int) {
	s.update(key, func(st *keyState) {
		delete(st.writing, tok)
		st.seq++
		if tok != st.latest {
			st.latest, st.deleted, st.have = tok, deleted, 0
			st.concurrent, st.concDelete = maps.Clone(st.writing), st.deleting > 0
			kept := st.acks[:0]
			for _, a := range st.acks {
				if a.seq > started {
					kept = append(kept, a)
					if st.concurrent == nil {
						st.concurrent = map[string]bool{}
					}
					st.concurrent[a.tok] = true
					st.concDelete = st.concDelete || a.deleted
				}
			}
			st.acks = kept
		}
		st.acks = append(st.acks, ackRec{tok, st.seq, deleted})
		st.have |= have
	})
}

// landed records that replica i now holds version tok (a straggler or repair).
func (s *Store) landed(key, tok string, i int) { s.changed(key, tok, false, i, true) }

// changed records a call that changed replica i, or may have (sure false: it
// reported an error after possibly taking effect), to hold version tok of a
// write, or no copy (deleted). have counts only replicas known to hold
// latest: a replica that received anything else since, be it a failed write,
// a straggler or an undo's copy of an older version, drops out of it, so that
// the entry is not dropped (and reads stop rejecting stale copies) while that
// replica disagrees. The caller's operation sees to the repair that brings it
// back: a write's stragglers or failure, a delete short of every replica, or
// the repair itself.
func (s *Store) changed(key, tok string, deleted bool, i int, sure bool) {
	s.update(key, func(st *keyState) {
		if st.latest == "" {
			return
		}
		same := deleted && st.deleted || !deleted && !st.deleted && tok == st.latest
		switch {
		case same && sure:
			st.have |= 1 << i
		case !same:
			st.have &^= 1 << i
		}
	})
}

// refusal reports whether a replica call's error proves it changed nothing.
func refusal(err error) bool {
	return errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrExists)
}

func (st *keyState) failedTok(tok string) bool { return st != nil && st.failed[tok] }

// starting records a write or delete in flight.
func (st *keyState) starting() {
	if st.flying > 0 {
		st.contended = true
	}
	st.flying++
	st.starts++
	st.seq++
}
