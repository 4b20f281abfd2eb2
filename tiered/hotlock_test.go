package tiered_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/tiered"
)

// A conditional write over a version in cold only works under the key's
// lock in hot, which others may take over once it is older than its lease:
// the work under it is bounded by MoveTimeout. When a tier is slower than
// that, the write fails with an error that names the bound, not a bare
// deadline error while the caller's context is live, and the version is
// still served; with cold fast again, the write works.
func TestWorkUnderTheLockOutlastsMoveTimeout(t *testing.T) {
	hotMem, cold := memPair(t)
	hot := fault.Wrap(hotMem, fault.Options{Seed: 1})
	const moveTimeout = 50 * time.Millisecond
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: alone, MoveTimeout: moveTimeout, MaxClockSkew: time.Millisecond})
	mustPut(t, s, "k", "value")
	time.Sleep(time.Millisecond)
	if res := s.CompactOnce(ctxT(t)); res.Moved != 1 {
		t.Fatalf("pass %+v", res)
	}
	ctx := context.Background()
	a, err := s.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// The write's look at hot before the lock is quick; its look again
	// under the lock is slow.
	hot.Add(fault.Rule{Op: fault.OpStat, KeyPrefix: "k", Skip: 1, Count: 1, Effect: fault.Delay, Latency: latency.Fixed(4 * moveTimeout)})
	cas := &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)}
	err = blob.Put(ctx, s, "k", []byte("value 2"), cas)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "outlasted MoveTimeout") {
		t.Fatalf("write with hot slower than MoveTimeout under the lock: %v; want an error naming the lock's bound", err)
	}
	if b, err := blob.ReadAll(ctx, s, "k"); err != nil || string(b) != "value" {
		t.Fatalf("read after the failed write: %q, %v", b, err)
	}
	if err := blob.Put(ctx, s, "k", []byte("value 2"), cas); err != nil {
		t.Fatal(err)
	}
	checkModel(t, s, map[string]string{"k": "value 2"}, nil)
}

// A compactor whose moves fail warns through its Logger, at most once a
// minute however many passes fail, naming the failures and the last error;
// the failures stay in Stats.
func TestFailingCompactionIsLogged(t *testing.T) {
	hot, coldMem := memPair(t)
	cold := fault.Wrap(coldMem, fault.Options{Seed: 1})
	cold.Add(fault.Rule{Op: fault.OpCommit, Err: errors.New("regional bucket refuses writes")})
	var logs strings.Builder
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: alone, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mustPut(t, s, "k", "v")
	time.Sleep(time.Millisecond)
	for range 5 {
		if res := s.CompactOnce(ctxT(t)); res.Failed == 0 {
			t.Fatalf("pass %+v: want the move to fail", res)
		}
	}
	if st := s.Stats(); st.Errors != 5 || !strings.Contains(st.LastError, "refuses writes") {
		t.Errorf("stats %+v", st)
	}
	out := logs.String()
	if strings.Count(out, "compaction failing") != 1 || !strings.Contains(out, "refuses writes") || !strings.Contains(out, "level=WARN") {
		t.Errorf("logged %q: want one warning naming the error", out)
	}
}
