package quorum

import (
	"context"
	"errors"
	"fmt"

	"github.com/zonalblob/zonalblob/blob/driver"
)

// fan is one write's replica calls, made in parallel under a context
// detached from the caller's once the write is acknowledged, so that the
// stragglers finish in the background (within the allowance for their size).
type fan struct {
	s       *Store
	key     string
	n       int
	results chan fanResult
	cancel  context.CancelFunc
	stopCtx func() bool // stops cancelling on the caller's context
	ok      int
	errs    []error
	got     int
}

type fanResult struct {
	i   int
	err error
}

// notAsked is the error of a call that made no request (an accept whose
// replica did not promise): it proves the call changed nothing.
type notAsked struct{ err error }

// notAsked does not unwrap: its cause (a cancelled context, a failed
// promise) says nothing of the operation, and an operation failing without
// a quorum must not read as the caller's cancellation.
func (e *notAsked) Error() string { return fmt.Sprintf("not asked: %v", e.err) }

// fanOut runs fn for i in [0, n) in parallel; each call moves size bytes,
// and the calls are bounded by the allowance for that size (or for what the
// operation's bound allows, if more).
func (s *Store) fanOut(ctx context.Context, key string, n int, size int64, fn func(ctx context.Context, i int) error) *fan {
	wctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), s.allowance(max(size, boundSize(ctx))), errBound)
	stopBG := context.AfterFunc(s.bg, cancel)
	stopCaller := context.AfterFunc(ctx, cancel)
	f := &fan{s: s, key: key, n: n, results: make(chan fanResult, n), cancel: func() { stopBG(); cancel() }, stopCtx: stopCaller}
	for i := range n {
		if !s.goTask(func() { f.results <- fanResult{i, fn(wctx, i)} }) {
			f.results <- fanResult{i, driver.ClosedError(driver.OpWrite, key)}
		}
	}
	return f
}

func (f *fan) record(r fanResult) {
	f.got++
	if r.err == nil {
		f.ok++
	} else {
		f.errs = append(f.errs, fmt.Errorf("call %d: %w", r.i, r.err))
	}
}

// wait returns once need calls succeeded, or as soon as that is impossible.
// On success the others finish in the background, and the key is queued
// for repair unless all succeeded; acc, when not empty, is recorded as the
// key's floor for fastest reads in this process until then. On failure the
// calls still running are cancelled and awaited, and landed reports whether
// any call may have taken effect (succeeded, or failed other than by a
// refusal).
func (f *fan) wait(need int, acc string) (landed bool, err error) {
	for f.ok < need && f.n-len(f.errs) >= need && f.got < f.n {
		f.record(<-f.results)
	}
	if f.ok >= need {
		f.stopCtx()
		if acc != "" {
			f.s.setFloor(f.key, acc)
		}
		bg := func() {
			for f.got < f.n {
				f.record(<-f.results)
			}
			f.cancel()
			if f.ok == len(f.s.reps) {
				f.s.clearFloor(f.key, acc)
			} else {
				f.s.rq.add(f.key)
			}
		}
		if !f.s.goTask(bg) {
			go bg()
		}
		return false, nil
	}
	f.cancel()
	for f.got < f.n {
		f.record(<-f.results)
	}
	f.stopCtx()
	landed = f.ok > 0
	for _, e := range f.errs {
		var na *notAsked
		if !refusal(e) && !errors.As(e, &na) {
			landed = true
		}
	}
	f.s.stats.failedWrites.Add(1)
	if landed {
		f.s.rq.add(f.key)
	}
	return landed, fmt.Errorf("%d of %d needed replicas committed: %w", f.ok, need, errors.Join(f.errs...))
}

// count returns how many calls failed with kind.
func (f *fan) count(kind error) int {
	n := 0
	for _, e := range f.errs {
		if errors.Is(e, kind) {
			n++
		}
	}
	return n
}
