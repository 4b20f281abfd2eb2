package tiered

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// TestTombstoneBatcher runs the group commit over a write held at will, on
// synctest's clock so that each call is known to be waiting before the
// next is made: the first call is written at once and alone; the calls made
// while it is in flight gather into batches of at most max kills (a call
// with more gets one of its own), written one after another in the order
// they were begun; every caller of a batch gets that batch's outcome; a
// caller whose context ends leaves without cancelling the write its kills
// are in.
func TestTombstoneBatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 3
		boom := errors.New("boom")
		var mu sync.Mutex
		var written [][]packlog.Version
		var writeCtxErr []error
		var bounded []bool
		release := make(chan struct{})
		b := newTombstoneBatcher(time.Minute, max, func(ctx context.Context, ks []packlog.Version) (time.Time, error) {
			<-release // every write waits until the test lets them all through
			mu.Lock()
			defer mu.Unlock()
			written = append(written, slices.Clone(ks))
			writeCtxErr = append(writeCtxErr, ctx.Err())
			_, ok := ctx.Deadline()
			bounded = append(bounded, ok)
			if slices.ContainsFunc(ks, func(k packlog.Version) bool { return k.Key == "fail" }) {
				return time.Time{}, boom
			}
			return time.Now(), nil
		})
		kills := func(key string, n int) []packlog.Version {
			var ks []packlog.Version
			for i := range n {
				ks = append(ks, packlog.Version{Key: key, Gen: fmt.Sprint(i)})
			}
			return ks
		}
		type call struct {
			key    string
			n      int
			cancel bool // the caller gives up while waiting
		}
		calls := []call{
			{"first", 1, false}, // written at once, alone
			{"b1", 2, true},     // gathered while "first" is in flight, gives up
			{"b2", 1, false},    // joins b1's batch (3 kills)
			{"c1", 2, false},    // would make 5: a new batch
			{"fail", 1, false},  // joins c1's: its write fails
			{"big", 5, false},   // more than max: a batch of its own
			{"d1", 1, false},    // after a batch over max: a new one
		}
		errs := make([]error, len(calls))
		cancels := make([]context.CancelFunc, len(calls))
		var wg sync.WaitGroup
		for i, c := range calls {
			ctx, cancel := context.WithCancel(t.Context())
			cancels[i] = cancel
			wg.Go(func() {
				_, errs[i] = b.add(ctx, kills(c.key, c.n))
			})
			synctest.Wait() // the call is waiting: the next one joins after it
		}
		for i, c := range calls {
			if c.cancel {
				cancels[i]()
			}
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		for _, cancel := range cancels {
			cancel()
		}

		var sizes []string
		for _, ks := range written {
			var keys []string
			for _, k := range ks {
				if !slices.Contains(keys, k.Key) {
					keys = append(keys, k.Key)
				}
			}
			sizes = append(sizes, fmt.Sprintf("%v:%d", keys, len(ks)))
		}
		want := []string{"[first]:1", "[b1 b2]:3", "[c1 fail]:3", "[big]:5", "[d1]:1"}
		if !slices.Equal(sizes, want) {
			t.Errorf("batches written %v, want %v", sizes, want)
		}
		for i, err := range writeCtxErr {
			if err != nil {
				t.Errorf("batch %d was written under an ended context (%v): a caller's leaving ended it", i, err)
			}
			if !bounded[i] {
				t.Errorf("batch %d was written under a context without a deadline", i)
			}
		}
		for i, c := range calls {
			switch {
			case c.cancel:
				if !errors.Is(errs[i], context.Canceled) {
					t.Errorf("%s gave up: got %v, want its context's error", c.key, errs[i])
				}
			case c.key == "c1" || c.key == "fail":
				if !errors.Is(errs[i], boom) {
					t.Errorf("%s shares the failed batch: got %v, want its error", c.key, errs[i])
				}
			default:
				if errs[i] != nil {
					t.Errorf("%s: %v", c.key, errs[i])
				}
			}
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.running || len(b.queue) != 0 {
			t.Errorf("after every batch was written: running %v, %d batches queued", b.running, len(b.queue))
		}
	})
}
