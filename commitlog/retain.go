package commitlog

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// retain truncates the log at the offset Options.RetainFor and
// Options.RetainBytes allow, if any: walking the sealed segments of the
// chain from the newest, the first that is older than RetainFor, or that
// brings the bytes kept over RetainBytes, goes with every older one.
func (l *Log) retain(ctx context.Context) error {
	if l.opts.RetainFor <= 0 && l.opts.RetainBytes <= 0 {
		return nil
	}
	l.mu.Lock()
	cur, lac, err := l.seg.key, l.lac, l.err
	l.mu.Unlock()
	if err != nil {
		return err
	}
	before, err := l.retainBefore(ctx, cur, lac)
	if err != nil || before < 0 {
		return err
	}
	_, err = l.TruncateBefore(ctx, before)
	return err
}

// retainBefore returns the offset retention truncates before, -1 if none.
// The chain's headers are the mover's and the repairer's too: tierMu.
func (l *Log) retainBefore(ctx context.Context, cur segKey, lac int64) (int64, error) {
	l.tierMu.Lock()
	defer l.tierMu.Unlock()
	chain, err := l.chainTo(ctx, cur)
	if err != nil {
		return -1, err
	}
	now := time.Now()
	var kept int64
	for i := len(chain) - 2; i >= 0; i-- {
		if chain[i+1].first-1 > lac {
			continue // not all committed yet: not a candidate
		}
		size, last, err := l.segmentInfo(ctx, chain[i])
		if err != nil {
			return -1, err
		}
		kept += size
		if l.opts.RetainFor > 0 && now.Sub(last) > l.opts.RetainFor ||
			l.opts.RetainBytes > 0 && kept > l.opts.RetainBytes {
			return chain[i+1].first, nil
		}
	}
	return -1, nil
}

// segmentInfo returns the bytes segment k holds and the time of its last
// write: from its regional copy once moved, otherwise from the first zone
// that answers (in the slot layout, the sum of its slots and the latest).
func (l *Log) segmentInfo(ctx context.Context, k segKey) (int64, time.Time, error) {
	if l.regional != nil {
		if a, err := l.regional.s.Stat(ctx, l.regional.segKey(k)); err == nil {
			return a.Size, a.ModTime, nil
		} else if !errors.Is(err, blob.ErrNotFound) {
			return 0, time.Time{}, err
		}
	}
	var errs []error
	for _, z := range l.zones {
		c, cancel := context.WithTimeout(ctx, l.opts.OpTimeout)
		size, last, err := z.segmentInfo(c, k)
		cancel()
		if err == nil {
			return size, last, nil
		}
		errs = append(errs, err)
	}
	return 0, time.Time{}, errors.Join(errs...)
}

func (z *zone) segmentInfo(ctx context.Context, k segKey) (int64, time.Time, error) {
	if z.mode != modeSlots {
		a, err := z.s.Stat(ctx, z.segKey(k))
		if err != nil {
			return 0, time.Time{}, err
		}
		return a.Size, a.ModTime, nil
	}
	var size int64
	var last time.Time
	found := false
	for o, err := range blob.All(ctx, z.s, &blob.ListOptions{Prefix: z.segKey(k)}) {
		if err != nil {
			return 0, time.Time{}, err
		}
		found = true
		size += o.Size
		if o.ModTime.After(last) {
			last = o.ModTime
		}
	}
	if !found {
		return 0, time.Time{}, blob.Errorf("stat", z.segKey(k), blob.ErrNotFound, "commitlog: no slots")
	}
	return size, last, nil
}
