package bench

import (
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
)

func rapidFloor(appenders, size, stripes, inFlight int) floorModel {
	p := gcsrapidtest.Rapid()
	return floorModel{flush: p.Flush, perMiB: p.WritePerMiB, appenders: appenders, size: size,
		zones: 3, quorum: 2, inFlight: inFlight, stripes: stripes, appends: 20000, seed: 1}
}

// The floor model against what it must show: one appender on one zone is
// the raw round trip; a 2-of-3 quorum's second fastest zone is faster than
// one zone's p99; in-order replies on a busy stream cost at p50; a
// stream's bandwidth bounds large records, and stripes lift it; a slowed
// zone leaves the other two to acknowledge; a seed replays.
func TestFloorModel(t *testing.T) {
	p := gcsrapidtest.Rapid()
	within := func(what string, got, want time.Duration, tol float64) {
		t.Helper()
		if r := float64(got) / float64(want); r < 1-tol || r > 1+tol {
			t.Errorf("%s: %v, want %v within %.0f%%", what, got, want, tol*100)
		}
	}

	one := floorModel{flush: p.Flush, perMiB: p.WritePerMiB, appenders: 1, size: 100, zones: 1, quorum: 1, inFlight: 8, appends: 4000, seed: 1,
		overhead: 500 * time.Microsecond}
	p50, p99 := one.floor()
	within("one appender, one zone: p50", p50, rawModel(p.Flush, p.WritePerMiB, 100, 1)+one.overhead, 0.05)
	within("one appender, one zone: p99", p99, p.Flush.Quantile(0.99)+one.overhead, 0.08)

	q1 := rapidFloor(1, 100, 1, 8)
	q50, q99 := q1.floor()
	if q50 > p.Flush.P50*11/10 || q99 >= p.Flush.P99 {
		t.Errorf("one appender on 2 of 3 zones: p50 %v p99 %v, want about the flush's p50 %v and below its p99 %v", q50, q99, p.Flush.P50, p.Flush.P99)
	}

	busy := rapidFloor(64, 100, 1, 8)
	b50, _ := busy.floor()
	if b50 <= q50*115/100 {
		t.Errorf("64 appenders: p50 %v, want above 1.15x one appender's %v (replies in order)", b50, q50)
	}

	// 64 appenders of 64 KiB keep 4 MiB in flight on each zone's stream:
	// at 19 ms a MiB that is about 76 ms.
	big := rapidFloor(64, 64<<10, 1, 8)
	g50, _ := big.floor()
	if g50 < 60*time.Millisecond {
		t.Errorf("64 KiB on one stream: p50 %v, want the stream's queue (about 76 ms)", g50)
	}
	striped := rapidFloor(64, 64<<10, 4, 8)
	if s50, _ := striped.floor(); s50 > g50/3 {
		t.Errorf("64 KiB on four stripes: p50 %v, want under a third of one stream's %v", s50, g50)
	}

	slowed := rapidFloor(64, 100, 1, 8)
	slowed.slow = latency.Fixed(150 * time.Millisecond)
	if s50, s99 := slowed.floor(); s50 < b50 || s99 > 100*time.Millisecond {
		t.Errorf("one zone +150 ms: p50 %v p99 %v, want at least the healthy p50 %v and well under the slow zone's 150 ms", s50, s99, b50)
	}

	a50, a99 := busy.floor()
	if a50 != b50 {
		t.Errorf("the same seed gave p50 %v, then %v", b50, a50)
	}
	t.Logf("floors on the rapid profile, 64 appenders: 100 B p50 %v p99 %v; 64 KiB %v, four stripes see above", a50, a99, g50)
}
