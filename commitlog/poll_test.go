package commitlog

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleReaderBacksOff: a reader idle at the tail reads the tip at
// MaxPollInterval, not at PollInterval, so that a consumer waiting on a
// quiet log does not pay for hundreds of reads a second; with the backoff
// turned off the same wait costs over ten times the reads. The first record
// after the pause is still returned. Counted on synctest's clock.
func TestIdleReaderBacksOff(t *testing.T) {
	const idle = 4 * time.Second
	reads := func(t *testing.T, opts *Options) int64 {
		var n int64
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			l := mustOpen(t, memZones(t, 3), "idle", opts)
			if _, err := l.Append(ctx, []byte("first")); err != nil {
				t.Fatal(err)
			}
			r, err := l.NewReader(0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			readN(t, ctx, r, 1)
			before := r.Stats().Reads
			wait, cancel := context.WithTimeout(ctx, idle)
			_, err = r.Next(wait)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next on a quiet log: %v, want a deadline", err)
			}
			n = r.Stats().Reads - before
			if _, err := l.Append(ctx, []byte("second")); err != nil {
				t.Fatal(err)
			}
			if rec := readN(t, ctx, r, 1)[0]; rec.Offset != 1 || string(rec.Data) != "second" {
				t.Errorf("after the pause: %d %q, want 1 %q", rec.Offset, rec.Data, "second")
			}
			l.Close()
		})
		return n
	}
	base := Options{WriteQuorum: 2, PollInterval: 2 * time.Millisecond, MaxPollInterval: 50 * time.Millisecond}
	backoff := reads(t, &base)
	flat := base
	flat.MaxPollInterval = flat.PollInterval
	steady := reads(t, &flat)
	// Two zones a look, a third every eighth look: at most 2.125 reads per
	// MaxPollInterval once backed off, plus quietGrace looks at
	// PollInterval and the ramp from there.
	if limit := int64(3 * idle / base.MaxPollInterval * 2); backoff > limit {
		t.Errorf("idle reader with backoff made %d reads in %v, want at most %d", backoff, idle, limit)
	}
	if backoff*10 > steady {
		t.Errorf("backoff made %d reads, without it %d: want at least 10x fewer", backoff, steady)
	}
	t.Logf("reads in %v idle at the tail: %d with backoff to %v, %d at a flat %v", idle, backoff, base.MaxPollInterval, steady, flat.PollInterval)
}
