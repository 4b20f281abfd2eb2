package tiered

import (
	"context"
	"sync"
)

// keyLocks serializes, within one process, the operations on one key that
// must not interleave with a move of that key: conditional writes, deletes
// and the move itself. Unconditional writes and reads never take a lock, so
// the hot path stays as fast as the hot store.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // holds one token while the key is locked
	refs int
}

func (l *keyLocks) get(key string) *keyLock {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	return k
}

func (l *keyLocks) put(key string, k *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(l.m, key)
	}
}

// lock waits for key, or fails with ctx's error.
func (l *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k := l.get(key)
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; l.put(key, k) }, nil
	case <-ctx.Done():
		l.put(key, k)
		return nil, ctx.Err()
	}
}

// tryLock takes key only if no one holds it: the compactor skips a busy key
// and finds it again on its next pass.
func (l *keyLocks) tryLock(key string) (unlock func(), ok bool) {
	k := l.get(key)
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; l.put(key, k) }, true
	default:
		l.put(key, k)
		return nil, false
	}
}
