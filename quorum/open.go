package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// openReplicas opens the replica URLs in parallel and returns as soon as w
// of them are open (and the others have had a moment more): a zone that is
// down must not hold up the quorum that exists to survive it. A replica
// still opening, or whose open failed other than by its configuration, is a
// lateReplica: its calls fail as a down zone's would, and it keeps opening
// in the background until it opens, when the prober brings it back, or the
// quorum closes. An open refused for the configuration (a bad URL, a
// missing bucket, denied credentials) fails the quorum's, naming the
// replica.
func openReplicas(ctx context.Context, urls []string, w int) ([]blob.Store, error) {
	type opened struct {
		i   int
		s   blob.Store
		err error
	}
	ch := make(chan opened, len(urls))
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	for i, u := range urls {
		go func() {
			s, err := blob.Open(octx, u)
			ch <- opened{i, s, err}
		}()
	}
	reps := make([]blob.Store, len(urls))
	errs := make([]error, len(urls))
	got, ok := 0, 0
	start := time.Now()
	var grace <-chan time.Time
	closeAll := func() {
		cancel()
		go func() {
			for ; got < len(urls); got++ {
				if o := <-ch; o.err == nil {
					o.s.Close()
				}
			}
		}()
		for _, r := range reps {
			if r != nil {
				r.Close()
			}
		}
	}
wait:
	for got < len(urls) {
		select {
		case o := <-ch:
			got++
			if o.err != nil {
				errs[o.i] = o.err
				if fatalOpen(o.err) {
					closeAll()
					return nil, fmt.Errorf("quorum replica %d: %w", o.i, o.err)
				}
				continue
			}
			reps[o.i] = o.s
			ok++
			if ok == w && got < len(urls) {
				grace = time.After(max(2*time.Since(start), 50*time.Millisecond))
			}
		case <-grace:
			break wait
		case <-ctx.Done():
			closeAll()
			return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("quorum: %d of %d replicas opened, %d needed: %w", ok, len(urls), w, ctx.Err())}
		}
	}
	if ok < w {
		closeAll()
		return nil, &blob.Error{Op: driver.OpOpen, Err: fmt.Errorf("%w: %d of %d replicas opened, %d needed: %w", ErrNoQuorum, ok, len(urls), w, errors.Join(errs...))}
	}
	// The replicas that did not open: those still opening hand their
	// result to the late replica; the failed ones start again.
	late := map[int]*lateReplica{}
	for i, r := range reps {
		if r == nil {
			l := newLateReplica(urls[i], i, errs[i])
			l.opts = blob.OpenOptionsFrom(ctx)
			late[i] = l
			reps[i] = l
		}
	}
	go func() {
		defer cancel()
		for ; got < len(urls); got++ {
			o := <-ch
			late[o.i].settle(o.s, o.err)
		}
	}()
	for _, l := range late {
		if l.err != nil {
			l.retry()
		}
	}
	return reps, nil
}

// fatalOpen reports an open that no retry can fix.
func fatalOpen(err error) bool {
	for _, k := range []error{blob.ErrInvalidArgument, blob.ErrInvalidKey, blob.ErrBucketNotFound, blob.ErrPermission} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// lateReplica is a replica that had not opened when the quorum did.
type lateReplica struct {
	url  string
	opts blob.OpenOptions // the quorum's, for the opens that retry
	idx  int
	mu   sync.Mutex
	s    blob.Store // nil until opened
	err  error      // why it is not open yet
	done bool       // closed
	stop context.CancelFunc
	wg   sync.WaitGroup
}

var (
	_ blob.Store              = (*lateReplica)(nil)
	_ blob.Prewarmer          = (*lateReplica)(nil)
	_ blob.Finalizer          = (*lateReplica)(nil)
	_ blob.CapabilityReporter = (*lateReplica)(nil)
)

func newLateReplica(url string, idx int, err error) *lateReplica {
	if err == nil {
		err = errors.New("still opening")
	}
	return &lateReplica{url: url, idx: idx, err: err}
}

// take records the result of an open and reports whether the replica is
// settled: opened, or closed (a store opened after Close is closed at once).
func (l *lateReplica) take(s blob.Store, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.done:
		if err == nil {
			s.Close()
		}
		return true
	case err == nil:
		l.s, l.err = s, nil
		return true
	}
	l.err = err
	return false
}

// settle takes the result of the open that was running when the quorum
// opened, and starts again if it failed.
func (l *lateReplica) settle(s blob.Store, err error) {
	if !l.take(s, err) {
		l.retry()
	}
}

// retry opens the replica again in the background, backing off from 100ms
// to 5s, until it opens or the replica is closed.
func (l *lateReplica) retry() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || l.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	l.wg.Go(func() {
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			if l.take(blob.Open(ctx, l.url, l.opts)) {
				return
			}
		}
	})
}

func (l *lateReplica) get(op, key string) (blob.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.done:
		return nil, driver.ClosedError(op, key)
	case l.s == nil:
		return nil, blob.Errorf(op, key, nil, "replica %d has not opened: %v", l.idx, l.err)
	}
	return l.s, nil
}

func (l *lateReplica) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	s, err := l.get(driver.OpRead, key)
	if err != nil {
		return nil, err
	}
	return s.NewRangeReader(ctx, key, offset, length)
}

func (l *lateReplica) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	s, err := l.get(driver.OpWrite, key)
	if err != nil {
		return nil, err
	}
	return s.NewWriter(ctx, key, opts)
}

func (l *lateReplica) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	s, err := l.get(driver.OpStat, key)
	if err != nil {
		return nil, err
	}
	return s.Stat(ctx, key)
}

func (l *lateReplica) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	s, err := l.get(driver.OpList, "")
	if err != nil {
		return nil, err
	}
	return s.List(ctx, opts)
}

func (l *lateReplica) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	s, err := l.get(driver.OpDelete, key)
	if err != nil {
		return err
	}
	return s.Delete(ctx, key, opts)
}

// Prewarm implements blob.Prewarmer as the opened store does (natively or
// by blob.Prewarm's fallback).
func (l *lateReplica) Prewarm(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	s, err := l.get(driver.OpPrewarm, key)
	if err != nil {
		return nil, err
	}
	return blob.Prewarm(ctx, s, key, opts)
}

// Finalize implements blob.Finalizer as the opened store does.
func (l *lateReplica) Finalize(ctx context.Context, key string) error {
	s, err := l.get(driver.OpFinalize, key)
	if err != nil {
		return err
	}
	return blob.Finalize(ctx, s, key)
}

// Capabilities are the opened store's; before it opens, those the quorum
// asks of a replica are assumed, and its calls fail anyway.
func (l *lateReplica) Capabilities() blob.Capabilities {
	if s, err := l.get("capabilities", ""); err == nil {
		return blob.CapabilitiesOf(s)
	}
	return blob.Capabilities{Prewarm: true, Finalize: true}
}

// Close stops the background open and closes the store if it opened.
func (l *lateReplica) Close() error {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return driver.ClosedError(driver.OpClose, "")
	}
	l.done = true
	stop, s := l.stop, l.s
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
	l.wg.Wait()
	if s != nil {
		return s.Close()
	}
	return nil
}
