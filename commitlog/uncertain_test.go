package commitlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// An Append that fails says whether its records may be in the log: with
// ErrUncertain when they had been handed to a zone (here they reach one of
// three, W=2, and the writer is closed) or the caller gave up waiting; then
// the next Open keeps them, and a reader finds each once. Without it when
// the writer was closed before they were queued: they are not in the log.
func TestAppendOutcome(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stores, faults := wrapAll(testkit.Mems(t, 3), 7)
	w := mustOpen(t, stores, "L", nil)
	if _, err := w.Append(ctx, []byte("r0")); err != nil {
		t.Fatal(err)
	}
	// Zones 1 and 2 take nothing more: records reach zone 0 only.
	var rules []fault.RuleID
	for _, f := range faults[1:] {
		rules = append(rules, f.Add(fault.Rule{Op: fault.OpWrite}))
	}

	// The caller gives up: its records are still the writer's to write.
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := w.Append(short, []byte("r1"))
	stop()
	if !errors.Is(err, ErrUncertain) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append whose context ended: %v, want ErrUncertain and the context's error", err)
	}

	// Closed while its records are on one zone.
	done := make(chan error, 1)
	go func() {
		_, err := w.Append(ctx, []byte("r2"))
		done <- err
	}()
	// Until zone 0 holds r2: the record cut into a frame (cutTo) may not
	// have reached it yet, and under -race with other tests running it
	// had not when Close came.
	for zonesHolding(ctx, stores[:1], "L", Record{Offset: 2, Data: []byte("r2")}) == 0 {
		if ctx.Err() != nil {
			t.Fatal("r2 never reached zone 0")
		}
		time.Sleep(time.Millisecond)
	}
	w.Close()
	if err := <-done; !errors.Is(err, ErrUncertain) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Append cut off by Close: %v, want ErrClosed and ErrUncertain", err)
	}
	// Closed before it was queued: certainly not in the log.
	if _, err := w.Append(ctx, []byte("never")); !errors.Is(err, ErrClosed) || errors.Is(err, ErrUncertain) {
		t.Fatalf("Append after Close: %v, want ErrClosed alone", err)
	}

	for i, f := range faults[1:] {
		f.Remove(rules[i])
	}
	w2 := mustOpen(t, stores, "L", nil)
	if got := w2.Stats().RecoveredTo; got != 2 {
		t.Fatalf("recovered to %d, want 2: the uncertain records were on a zone recovery fences", got)
	}
	if off, err := w2.Append(ctx, []byte("r3")); err != nil || off != 3 {
		t.Fatalf("append after recovery: %d, %v", off, err)
	}
	r, err := NewReader(stores, "L", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, rec := range readN(t, ctx, r, 4) {
		if want := []string{"r0", "r1", "r2", "r3"}[i]; string(rec.Data) != want || rec.Offset != int64(i) {
			t.Errorf("record %d: %q at %d, want %q", i, rec.Data, rec.Offset, want)
		}
	}
}
