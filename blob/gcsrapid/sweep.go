package gcsrapid

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"

	"github.com/zonalblob/zonalblob/blob"
)

// The sweeper removes what crashed processes left: prewarmed objects never
// written. Every pooling Store runs one over the prefixes it pools, in the
// background: each pass lists a prefix (hidden objects included), and deletes
// a marked object that holds no committed write once it is older than
// MaxItemAge + WriteTimeout + ClockSkew, by the service's creation time and by
// its name. No writer can commit to it then: a pooled writer is handed out
// only before MaxItemAge and its commit ends within WriteTimeout of that. The
// delete is conditional on the generation the pass saw. Passes run every
// SweepInterval and delete at most SweepRate objects per second, so a large
// backlog costs a steady trickle of requests, not a burst.

// sweepPageLimit bounds the objects one scan of a pass examines.
const sweepPageLimit = 10_000

// nameTimeLayout is the time layout of blob.NewName's names, which sort by
// time: a scan from a time's name finds the names made since.
const nameTimeLayout = "20060102T150405.000000000Z"

type sweeper struct {
	s      *Store
	stop   context.CancelFunc
	done   chan struct{}
	cursor map[string]string // per prefix: where the next backlog scan starts
	passes atomic.Int64
	swept  atomic.Int64
	errors atomic.Int64
}

func (s *Store) startSweeper() {
	ctx, stop := context.WithCancel(context.Background())
	sw := &sweeper{s: s, stop: stop, done: make(chan struct{}), cursor: map[string]string{}}
	s.sweeper = sw
	go sw.run(ctx)
}

func (sw *sweeper) close() {
	sw.stop()
	<-sw.done
}

func (sw *sweeper) run(ctx context.Context) {
	defer close(sw.done)
	t := time.NewTicker(sw.s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, prefix := range sw.s.creator.Prefixes() {
			if err := sw.pass(ctx, prefix); err != nil && ctx.Err() == nil {
				sw.errors.Add(1)
			}
		}
		sw.passes.Add(1)
	}
}

// window is the age past which an unwritten prewarmed object is abandoned.
func (sw *sweeper) window() time.Duration {
	return sw.s.opts.InFlightAge()
}

// pass sweeps prefix: first the names made since the window plus a few
// intervals began, where a recent crash left its objects, however many older
// objects the prefix holds (Create names sort by time); then the next
// sweepPageLimit objects of the whole prefix from where the last pass
// stopped, for older residue and for keys that are not Create names.
func (sw *sweeper) pass(ctx context.Context, prefix string) error {
	since := time.Now().Add(-sw.window() - 10*sw.s.opts.SweepInterval)
	if _, err := sw.scan(ctx, prefix, prefix+since.UTC().Format(nameTimeLayout)); err != nil {
		return err
	}
	next, err := sw.scan(ctx, prefix, sw.cursor[prefix])
	if err != nil {
		return err
	}
	sw.cursor[prefix] = next
	return nil
}

// scan examines up to sweepPageLimit objects under prefix from start on and
// returns where a next scan should continue ("" once it reached the end).
func (sw *sweeper) scan(ctx context.Context, prefix, start string) (string, error) {
	it := sw.s.bucket.Objects(ctx, &storage.Query{Prefix: prefix, StartOffset: start})
	gap := time.Second / time.Duration(sw.s.opts.SweepRate)
	for range sweepPageLimit {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return "", nil
		}
		if err != nil {
			return start, err
		}
		start = a.Name
		if !a.Finalized.IsZero() || !marked(a.Metadata) || !sw.old(a) {
			continue
		}
		if hidden, err := sw.s.unwritten(ctx, a); err != nil || !hidden {
			continue
		}
		err = sw.s.bucket.Object(a.Name).If(storage.Conditions{GenerationMatch: a.Generation}).Delete(ctx)
		if err == nil {
			sw.swept.Add(1)
		}
		select {
		case <-ctx.Done():
			return start, ctx.Err()
		case <-time.After(gap):
		}
	}
	return start, nil
}

// old reports whether a is past the window by both the service's creation
// time and the time in its name, whichever is later.
func (sw *sweeper) old(a *storage.ObjectAttrs) bool {
	born := a.Created
	if t, ok := blob.NameTime(a.Name); ok && t.After(born) {
		born = t
	}
	return !born.IsZero() && time.Since(born) > sw.window()
}
