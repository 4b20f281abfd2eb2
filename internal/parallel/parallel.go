// Package parallel runs calls concurrently with a bound on how many run at
// once: the shape of every fan-out in this module (a pack's reads, a
// listing's checks, a pass's moves, a reconciler's examinations), written
// once so that each gets the same waiting and cancellation.
package parallel

import (
	"context"
	"iter"
	"sync"
)

// Do calls f(i) for every i in [0, n), at most limit at a time (limit < 1
// means one), and returns once every call has returned.
func Do(n, limit int, f func(i int)) {
	Range(context.Background(), func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}, limit, f)
}

// Range calls f on each value seq yields, at most limit at a time (limit < 1
// means one). Once ctx is done it takes no more values from seq, and calls
// already started run to their end: it returns once every call it started
// has returned, reporting whether it took every value.
func Range[T any](ctx context.Context, seq iter.Seq[T], limit int, f func(T)) bool {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	for v := range seq {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			return false
		}
		wg.Go(func() {
			defer func() { <-sem }()
			f(v)
		})
	}
	return ctx.Err() == nil
}
