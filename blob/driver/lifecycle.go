package driver

import (
	"sync"
	"sync/atomic"

	"github.com/zonalblob/zonalblob/blob"
)

// Lifecycle is a Store's open/closed state, safe for concurrent use. The zero
// value is open. Drivers hold one and call Check first in every method.
type Lifecycle struct {
	closed atomic.Bool
}

// Check fails with ErrClosed after Close, then with ErrInvalidKey for a key
// that blob.ValidateKey refuses: the checks every Store method makes before
// any I/O.
func (l *Lifecycle) Check(op, key string) error {
	if l.closed.Load() {
		return ClosedError(op, key)
	}
	return blob.ValidateKey(op, key)
}

// CheckOpen fails with ErrClosed after Close; it does not look at key (List's
// prefix may be empty, for one).
func (l *Lifecycle) CheckOpen(op, key string) error {
	if l.closed.Load() {
		return ClosedError(op, key)
	}
	return nil
}

// Closed reports whether Close was called.
func (l *Lifecycle) Closed() bool { return l.closed.Load() }

// Close marks the Store closed and reports whether this call closed it (false
// when it was closed already), so that a driver releases its resources once.
func (l *Lifecycle) Close() bool { return l.closed.CompareAndSwap(false, true) }

// CheckList is the preamble of every List: ErrClosed after Close, then
// CheckListOptions. It returns the options to use (the zero value for nil).
func (l *Lifecycle) CheckList(opts *blob.ListOptions) (blob.ListOptions, error) {
	prefix := ""
	if opts != nil {
		prefix = opts.Prefix
	}
	if err := l.CheckOpen(OpList, prefix); err != nil {
		return blob.ListOptions{}, err
	}
	return CheckListOptions(opts)
}

// Tasks is the work a Store goes on with after its caller has the answer
// (an abandoned upload's abort, an asynchronous close or delete, a write's
// stragglers), which Close waits for. Once Close has begun, Go takes no more:
// it returns false and the caller decides, on its own time, whether to do
// the work inline or drop it. The zero value takes tasks.
type Tasks struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	running atomic.Int64
}

// Go runs f in a goroutine that Wait waits for, and reports true; after
// Stop it runs nothing and reports false.
func (t *Tasks) Go(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.running.Add(1)
	t.wg.Go(func() {
		defer t.running.Add(-1)
		f()
	})
	return true
}

// Running counts the tasks Go took that have not returned.
func (t *Tasks) Running() int { return int(t.running.Load()) }

// Stop makes Go refuse new tasks; Wait then waits for the ones it took.
func (t *Tasks) Stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// Wait stops taking tasks and waits for every task Go took.
func (t *Tasks) Wait() {
	t.Stop()
	t.wg.Wait()
}
