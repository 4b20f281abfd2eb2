package tiered

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// maxTombstoneKills bounds the kills one tombstone carries when several
// callers share it, so that a tombstone stays small (well under a MiB) and
// a listing's load of it is one quick read. A caller's own kills are never
// split: one with more goes in a tombstone of its own.
const maxTombstoneKills = 10_000

// writeTombstone commits kills to the log, and makes sure the tombstone is
// found by every refresh that starts after this returns: it must be
// committed within window/2 of its name's time, or it is written again
// under a newer name. It returns hotDeleteDelay after the commit, so that
// what the caller does next (a removal from hot, a Delete's return) is seen
// only by readers who will see the tombstone (see Store.settled).
//
// Concurrent calls share tombstones (see tombstoneBatcher): a lone call
// writes at once, and calls made while a tombstone is being written go
// together into the next one. A call returns the outcome of the write that
// carried its kills; its context ends its own wait, not the write.
func (s *Store) writeTombstone(ctx context.Context, ks []packlog.Version) error {
	if len(ks) == 0 {
		return nil
	}
	if err := s.fence(ctx); err != nil {
		return err
	}
	committed, err := s.tombs.add(ctx, ks)
	if err != nil {
		return err
	}
	return latency.Sleep(ctx, s.hotDeleteDelay()-time.Since(committed))
}

// commitTombstone writes one tombstone of ks, named just before the write,
// and adds it to the catalog; it returns when the tombstone was committed.
func (s *Store) commitTombstone(ctx context.Context, ks []packlog.Version) (time.Time, error) {
	b, md, err := packlog.EncodeTombstone(ks)
	if err != nil {
		return time.Time{}, err
	}
	for range 3 {
		chosen := s.logNow()
		name := packlog.NewName(packlog.KindTombstone, chosen)
		if err := blob.Put(ctx, s.cold, name, b, &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/json", Metadata: md}); err != nil {
			return time.Time{}, err
		}
		committed := time.Now()
		s.stats.tombstones.Add(1)
		if committed.Sub(chosen) < s.catalog.Window()/2 {
			s.catalog.AddTombstone(name, ks)
			return committed, nil
		}
	}
	return time.Time{}, errors.New("tiered: tombstone writes keep taking longer than the pack log allows")
}

// tombstoneBatcher is a group commit of tombstones. A call joins the batch
// being gathered; batches are written one at a time, in order, each as soon
// as the write before it returned. So the first call made while nothing is
// being written is written at once (as it would be alone), and the calls
// made while a write is in flight share the next: under a steady rate of
// deletes, one tombstone carries the deletes of one regional write's
// latency.
//
// A batch is written by a goroutine of the batcher (started by the call
// that finds none running, gone once nothing is left to write), under a
// context no caller's cancellation ends, bounded by timeout: a caller that
// gives up leaves the others' write alone.
type tombstoneBatcher struct {
	write   func(ctx context.Context, ks []packlog.Version) (committed time.Time, err error)
	timeout time.Duration
	max     int // kills a shared batch holds at most

	mu      sync.Mutex
	queue   []*tombstoneBatch // gathered, not yet being written, oldest first
	running bool              // the writing goroutine runs
}

// tombstoneBatch is the kills of the calls that share one tombstone, and
// the outcome of its write once done is closed.
type tombstoneBatch struct {
	ctx   context.Context // the first caller's, for its values
	kills []packlog.Version
	done  chan struct{}

	committed time.Time
	err       error
}

func newTombstoneBatcher(timeout time.Duration, max int, write func(context.Context, []packlog.Version) (time.Time, error)) *tombstoneBatcher {
	return &tombstoneBatcher{write: write, timeout: timeout, max: max}
}

// add has ks written in a tombstone and returns when it was committed, or
// the error of its write, or ctx's error if ctx ends first.
func (b *tombstoneBatcher) add(ctx context.Context, ks []packlog.Version) (time.Time, error) {
	b.mu.Lock()
	var t *tombstoneBatch
	if n := len(b.queue); n > 0 && len(b.queue[n-1].kills)+len(ks) <= b.max {
		t = b.queue[n-1]
	} else {
		t = &tombstoneBatch{ctx: ctx, done: make(chan struct{})}
		b.queue = append(b.queue, t)
	}
	t.kills = append(t.kills, ks...)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-t.done:
		return t.committed, t.err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// run writes the batches gathered, one after another, until none is left.
func (b *tombstoneBatcher) run() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		t := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), b.timeout)
		t.committed, t.err = b.write(ctx, t.kills)
		cancel()
		close(t.done)
	}
}
