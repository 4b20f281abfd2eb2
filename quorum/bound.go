package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// MinRate is the slowest a replica is expected to move bytes. An operation
// ends when it has made no progress (no replica call of it succeeded) for
// StragglerTimeout plus the time to move the largest object it handles (the
// one it writes, or the current one a promise rewrites) at this rate, and
// the background completion of its writes is allowed as long: a 10 B write
// waits StragglerTimeout for its replicas to answer, a 1 GiB one 17 minutes
// more. A busy machine slows every call but stops none of them, so
// operations that progress are not cut short.
const MinRate = 1 << 20 // bytes per second

// errBound is the cause of an operation that its bound ended, while its
// caller's context was still live. It is reported under ErrNoQuorum, never
// as a context error: the caller set no deadline.
var errBound = errors.New("the operation's time bound passed")

// allowance is how long an operation handling size bytes may run.
func (s *Store) allowance(size int64) time.Duration {
	return s.opts.StragglerTimeout + transferTime(size)
}

// transferTime is the time to move size bytes at MinRate.
func transferTime(size int64) time.Duration {
	return time.Duration(size/MinRate)*time.Second + time.Duration(size%MinRate)*time.Second/MinRate
}

type boundKey struct{}

// opBound is one operation's bound, carried in its context so that the
// calls below it (promises that meet a large current object) can extend it.
type opBound struct {
	s     *Store
	base  time.Duration
	mu    sync.Mutex
	last  time.Time // the operation's start, or its last progress
	size  int64
	timer *time.Timer
}

// bounded returns ctx bounded by the allowance for size bytes, and a func
// that releases it. Inside an operation already bounded it extends that
// bound instead, so that one operation has one bound.
func (s *Store) bounded(ctx context.Context, size int64) (context.Context, func()) {
	return s.boundedFrom(ctx, s.opts.StragglerTimeout, size)
}

// boundedFrom is bounded with base in place of StragglerTimeout.
func (s *Store) boundedFrom(ctx context.Context, base time.Duration, size int64) (context.Context, func()) {
	if b, ok := ctx.Value(boundKey{}).(*opBound); ok && b.s == s && ctx.Err() == nil {
		b.grow(size, false)
		return ctx, func() {}
	}
	bctx, cancel := context.WithCancelCause(ctx)
	b := &opBound{s: s, base: base, last: time.Now(), size: size}
	b.timer = time.AfterFunc(base+transferTime(size), func() {
		b.mu.Lock()
		d := b.base + transferTime(b.size)
		b.mu.Unlock()
		cancel(fmt.Errorf("%w (%v)", errBound, d))
	})
	return context.WithValue(bctx, boundKey{}, b), func() {
		b.timer.Stop()
		cancel(nil)
	}
}

// grow extends the bound to the allowance for size bytes, if larger, and,
// on progress (a replica call of the operation succeeded), restarts it.
func (b *opBound) grow(size int64, progress bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if size <= b.size && !progress {
		return
	}
	b.size = max(b.size, size)
	if progress {
		b.last = time.Now()
	}
	if b.timer.Stop() {
		b.timer.Reset(max(b.base+transferTime(b.size)-time.Since(b.last), 0))
	}
}

// progressed notes that a replica call of ctx's operation, if any,
// succeeded, having met an object of size bytes (0 if none), which what the
// operation does next may move: one lookup and one timer reset a call.
func progressed(ctx context.Context, size int64) {
	if b, ok := ctx.Value(boundKey{}).(*opBound); ok {
		b.grow(size, true)
	}
}

// roundsOver reports that an operation moving size bytes whose earlier
// accepts may have landed (mine) issued the first of them more than its
// retry window ago, after which it begins no new round: a round learns from
// the current version's chain whether those accepts took effect
// (tookEffect), and the rules that delete versions and chains a while after
// they were issued (TombstoneGrace, InFlightBound) hold only for rounds begun
// within the window. An operation none of whose accepts landed may decide
// afresh at any time.
func (s *Store) roundsOver(mine []string, size int64) bool {
	if len(mine) == 0 {
		return false
	}
	return time.Since(time.Unix(0, tokenTime(slices.Min(mine)))) > s.retryWindow(size)
}

// retryWindow is how long after the first of its accepts went out an
// operation moving size bytes may begin another round: its allowance, as
// long as its accepts may take to go out on a slow machine, and never more
// than maxRetryWindow.
func (s *Store) retryWindow(size int64) time.Duration {
	return min(s.allowance(size), s.maxRetryWindow())
}

// maxRetryWindow bounds every operation's retry window: four
// StragglerTimeouts (two minutes by default, a 90 MiB object's allowance),
// and half of TombstoneGrace, so that a retry meets the tombstone of any
// Delete that followed its accepts (and so learns that they took effect).
func (s *Store) maxRetryWindow() time.Duration {
	return min(4*s.opts.StragglerTimeout, s.opts.TombstoneGrace/2)
}

// boundSize is the size the bound of ctx's operation allows for (0 if none).
func boundSize(ctx context.Context) int64 {
	if b, ok := ctx.Value(boundKey{}).(*opBound); ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.size
	}
	return 0
}

// doneError is the error of an operation whose context is done: the
// caller's own context error, or, when the operation's bound ended it,
// ErrNoQuorum (with ErrUncertain when its writes may have landed) naming
// the bound and the last failure, wrapping no context error.
func doneError(ctx context.Context, op, key string, uncertain bool, last error) error {
	cause := context.Cause(ctx)
	if !errors.Is(cause, errBound) {
		return driver.WrapError(op, key, ctx.Err(), nil)
	}
	if last == nil {
		last = cause
	}
	if uncertain {
		return blob.Errorf(op, key, nil, "%w (%w): %v; last: %v", ErrNoQuorum, ErrUncertain, cause, last)
	}
	return blob.Errorf(op, key, nil, "%w: %v; last: %v", ErrNoQuorum, cause, last)
}
