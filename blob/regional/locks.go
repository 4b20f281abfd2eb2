package regional

import "sync"

// keyLocks serializes commits of one key, so that a precondition check and the
// write it guards are atomic within the process.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

var domains struct {
	sync.Mutex
	m map[string]*keyLocks
}

func locksFor(domain string) *keyLocks {
	if domain == "" {
		return &keyLocks{m: map[string]*keyLock{}}
	}
	domains.Lock()
	defer domains.Unlock()
	if domains.m == nil {
		domains.m = map[string]*keyLocks{}
	}
	l := domains.m[domain]
	if l == nil {
		l = &keyLocks{m: map[string]*keyLock{}}
		domains.m[domain] = l
	}
	return l
}

func (l *keyLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}
