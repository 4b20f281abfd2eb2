package commitlog

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
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
			l := mustOpen(t, testkit.Mems(t, 3), "idle", opts)
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

// TestSlowTailReadsOfLargeRecords: reads of the tip that take longer than a
// poll interval overlap, and each reads again what those in flight before
// it are reading. With 64 KiB records and reads that take 16 poll
// intervals, the reader reads each appended byte from about the W zones it
// tails (the others it probes with Stats: TestTailProbe), and again in the
// reads that overlapped before the first returned: at most 3W bytes read
// per byte appended, where maxTailReads overlapping reads read each up to 8
// times from each zone (about 13 here). Small records keep their reads
// overlapping, so that one that lands during a read is found a poll
// interval later, not after that read: they read each byte more than 3W
// times (about 25 here). Counted with the reader's byte count.
func TestSlowTailReadsOfLargeRecords(t *testing.T) {
	const n, w = 200, 2
	run := func(t *testing.T, size int) float64 {
		ctx := context.Background()
		zones, faults := wrapAll(s3Zones("zero")(t, 3), 1)
		for _, f := range faults {
			f.AddLatency(fault.OpRead, latency.Fixed(32*time.Millisecond))
		}
		opts := Options{WriteQuorum: w, PollInterval: 2 * time.Millisecond, MaxPollInterval: 2 * time.Millisecond}
		l := mustOpen(t, zones, "large", &opts)
		if m := l.zones[0].mode; m != modeAppend {
			t.Fatalf("zone mode %v, want %v: slots are read one object each", m, modeAppend)
		}
		r, err := l.NewReader(0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		done := appendPaced(t, l, n, size)
		readN(t, ctx, r, n)
		<-done
		return float64(r.Stats().BytesRead) / float64(n*size)
	}
	large := run(t, 64<<10)
	if large > 3*w {
		t.Errorf("64 KiB records: read %.2f bytes per byte appended, want at most %d (3W)", large, 3*w)
	}
	small := run(t, 100)
	if small <= 3*w {
		t.Errorf("100 B records: read %.2f bytes per byte appended, want over %d: reads of the tip no longer overlap", small, 3*w)
	}
	t.Logf("bytes read per byte appended: %.2f at 64 KiB, %.2f at 100 B", large, small)
}

// TestTailProbe: a reader reads the tip from the W zones it tails and looks
// at the others with Stats, not reads, so that each byte appended is read
// about W times, not once from every zone; and when a zone it tails stops
// answering, a probe finds another that holds more, which it then reads.
// Counted with the reader's byte count and the fault wrappers' counters.
func TestTailProbe(t *testing.T) {
	const n, w, size = 150, 2, 64 << 10
	ctx := context.Background()
	inner := rapidZones(gcsrapidtest.Zero())(t, 3)
	l := mustOpen(t, inner, "probe", &Options{WriteQuorum: w})
	zones, faults := wrapAll(inner, 1)
	r, err := NewReader(zones, "probe", 0, &Options{WriteQuorum: w, PollInterval: time.Millisecond, MaxPollInterval: time.Millisecond, OpTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if m := r.zones[0].mode; m == modeSlots {
		t.Fatalf("zone mode %v: slot copies are read, not probed", m)
	}
	done := appendPaced(t, l, n, size)
	readN(t, ctx, r, n)
	<-done
	st := r.Stats()
	if perByte := float64(st.BytesRead) / float64(n*size); perByte > w+0.75 {
		// Reading the zones not tailed reads every byte once more (W+1).
		t.Errorf("read %.2f bytes per byte appended, want at most %.2f: the tip is read from more than the W zones tailed", perByte, w+0.75)
	}
	if st.Probes == 0 {
		t.Errorf("no probe in %d reads of the tip", st.Reads)
	}
	t.Logf("healthy: %.2f bytes read per byte appended, %d reads, %d probes", float64(st.BytesRead)/float64(n*size), st.Reads, st.Probes)

	tailed, order := r.rankedZones()
	stuck, other := tailed[0], order[w]
	faults[stuck].Hang(fault.OpRead)
	faults[stuck].Hang(fault.OpStat)
	// Append, a record at a time, until the reader has read the zone it
	// did not tail up to past what the stuck one holds.
	rec := make([]byte, size)
	for i := range 5000 {
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
		readN(t, ctx, r, 1)
		if h := r.cur.zoneHigh; h[other] > h[stuck] {
			t.Logf("zone %d stopped answering; zone %d read up to %d after %d more records, %d probes", stuck, other, h[other], i+1, r.Stats().Probes)
			return
		}
	}
	t.Errorf("zone %d stopped answering and zone %d, not tailed, is known to hold up to %d, not past %d: it was not read up to the tip", stuck, other, r.cur.zoneHigh[other], r.cur.zoneHigh[stuck])
}

// appendPaced appends n records of size bytes, one at a time with a
// millisecond between them, in the background; the channel closes at the end.
func appendPaced(t *testing.T, l *Log, n, size int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec := make([]byte, size)
		for range n {
			if _, err := l.Append(context.Background(), rec); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return done
}
