package tiered_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/tiered"
)

// committedBy counts, per replica, the commits of keys under a prefix.
type committedBy struct {
	prefix string
	n      atomic.Int64
}

func (c *committedBy) at(step, key string) {
	if strings.HasSuffix(step, ":committed") && strings.HasPrefix(key, c.prefix) {
		c.n.Add(1)
	}
}

// TestPackMoveCounts moves 10,000 objects of 64 KiB from a 2-of-3 quorum of
// zonal replicas to a regional store at the default pack bounds, and counts
// what the compactor asked of each tier on the fault wrappers' and hooks'
// counters: at most one regional write per 100 objects, and at most one
// marker write per replica per pack (markers live in the regional store, so
// none at all).
func TestPackMoveCounts(t *testing.T) {
	// -short moves 2000 objects (2 packs), with the same bounds.
	n := int64(10000)
	if testing.Short() {
		n = 2000
	}
	const size = 64 << 10
	var replicas []blob.Store
	var faults []*fault.Store
	var markers []*committedBy
	for i := range 3 {
		m, _ := memPair(t)
		f := fault.Wrap(m, fault.Options{Seed: uint64(i + 1)})
		c := &committedBy{prefix: markerPrefix}
		faults, markers = append(faults, f), append(markers, c)
		replicas = append(replicas, &hooked{Store: f, name: fmt.Sprint("hot", i), at: c.at})
	}
	hot := newQuorum(t, replicas)
	_, coldMem := memPair(t)
	cold := fault.Wrap(coldMem, fault.Options{Seed: 9})
	// A generous MoveTimeout: it bounds a whole pack move, 1000 objects read
	// through the quorum, and the race detector slows them down.
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: tiered.DefaultPackMaxObjects, Concurrency: 16, MoveTimeout: 10 * time.Minute, MaxClockSkew: 10 * time.Millisecond})
	// The race detector slows this test down several times: its context is
	// longer than ctxT's minute.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	data := make([]byte, size)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range int(n) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := blob.Put(ctx, s, fmt.Sprintf("obj/%05d", i), data, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Older than the quorum's in-flight bound, as objects older than After
	// are in any deployment: the pass retires them.
	time.Sleep(quorumInFlight)
	coldBefore := cold.Stats()
	for _, m := range markers {
		m.n.Store(0)
	}
	res := s.CompactOnce(ctx)
	st := s.Stats()
	if int64(res.Moved) != n || res.Failed != 0 {
		t.Fatalf("pass %+v", res)
	}
	packs := st.Packs
	writes := cold.Stats()[fault.OpCommit].Calls - coldBefore[fault.OpCommit].Calls
	t.Logf("%d objects of %d KiB moved in %d packs: %d regional writes (%.4f per object), %d regional stats, %d reads, %d lists",
		n, size>>10, packs, writes, float64(writes)/float64(n),
		cold.Stats()[fault.OpStat].Calls-coldBefore[fault.OpStat].Calls,
		cold.Stats()[fault.OpRead].Calls-coldBefore[fault.OpRead].Calls,
		cold.Stats()[fault.OpList].Calls-coldBefore[fault.OpList].Calls)
	if writes*100 > n {
		t.Errorf("%d regional writes for %d objects: want at most one per 100", writes, n)
	}
	for i, m := range markers {
		if got := m.n.Load(); got > packs {
			t.Errorf("replica %d: %d marker writes for %d packs: want at most one per pack", i, got, packs)
		}
		t.Logf("replica %d: %d marker writes", i, m.n.Load())
	}
	if packs < n/int64(tiered.DefaultPackMaxObjects) {
		t.Errorf("%d packs for %d objects: bound %d per pack", packs, n, tiered.DefaultPackMaxObjects)
	}
	checkModel(t, s, map[string]string{"obj/00000": string(data), fmt.Sprintf("obj/%05d", n-1): string(data)}, nil)
}
