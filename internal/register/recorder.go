package register

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder records operations on one logical clock shared by every process
// of a test: an operation's interval is a tick taken before its call and
// one taken after it returned. It is safe for concurrent use.
type Recorder struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// Tick advances the clock and returns its new time.
func (r *Recorder) Tick() int64 { return r.clock.Add(1) }

// Now returns the clock's time without advancing it.
func (r *Recorder) Now() int64 { return r.clock.Load() }

// Add records one operation that ran from call to ret (Never if its outcome
// is unknown).
func (r *Recorder) Add(client int, in Input, call int64, out Output, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// Ops returns a copy of what was recorded.
func (r *Recorder) Ops() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Check checks what was recorded so far (see Check).
func (r *Recorder) Check(t testing.TB, timeout time.Duration) {
	t.Helper()
	Check(t, r.Ops(), timeout)
}
