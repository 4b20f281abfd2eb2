package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/tiered"
)

// leaseKey is where tiered keeps its compactor lease in cold.
const leaseKey = markerPrefix + "lease"

// effects records, in the order they landed, the writes that only a
// compaction pass makes, with the process that made them.
type effects struct {
	mu   sync.Mutex
	proc []int
}

func (e *effects) add(p int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.proc = append(e.proc, p)
	e.mu.Unlock()
}

// switches counts how often the process making the effects changes.
func (e *effects) switches() (n int, total int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 1; i < len(e.proc); i++ {
		if e.proc[i] != e.proc[i-1] {
			n++
		}
	}
	return n, len(e.proc)
}

// paused stands for one process's view of a shared tier: while paused, its
// calls stop where they are (as a stopped process's do, whatever their
// contexts), and once resumed a call whose context ended meanwhile fails
// before it is sent, as a client's transport refuses one. Below the gate,
// the writes only a pass makes are recorded as they land: every write to
// cold but the lease, and every delete in hot and write of a marker there
// (the test's users only write objects).
type paused struct {
	blob.Store
	proc, cold bool
	id         int
	eff        *effects
	mu         sync.Mutex
	gate       chan struct{} // closed while running
	// killed: the process is gone; every call it has not yet made fails
	// (those under way go on and may land). onEffect, if set, is called
	// after each pass effect.
	killed   atomic.Bool
	onEffect func()
}

// errKilled is the failure of a call of a killed process.
var errKilled = errors.New("the process was killed")

func newPaused(s blob.Store, id int, cold bool, eff *effects) *paused {
	g := make(chan struct{})
	close(g)
	return &paused{Store: s, id: id, cold: cold, eff: eff, gate: g}
}

func (p *paused) pause() {
	p.mu.Lock()
	p.gate = make(chan struct{})
	p.mu.Unlock()
}

func (p *paused) resume() {
	p.mu.Lock()
	close(p.gate)
	p.mu.Unlock()
}

func (p *paused) enter(ctx context.Context) error {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
	if p.killed.Load() {
		return errKilled
	}
	return ctx.Err()
}

// effect counts a pass effect of this process.
func (p *paused) effect() {
	p.eff.add(p.id)
	if p.onEffect != nil {
		p.onEffect()
	}
}

func (p *paused) passEffect(key string, del bool) bool {
	if p.cold {
		return key != leaseKey
	}
	return del || strings.HasPrefix(key, markerPrefix)
}

func (p *paused) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return p.Store.Stat(ctx, key)
}

func (p *paused) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return p.Store.NewRangeReader(ctx, key, off, n)
}

func (p *paused) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	return p.Store.List(ctx, opts)
}

func (p *paused) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := p.enter(ctx); err != nil {
		return err
	}
	err := p.Store.Delete(ctx, key, opts)
	if err == nil && p.passEffect(key, true) {
		p.effect()
	}
	return err
}

func (p *paused) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	if err := p.enter(ctx); err != nil {
		return nil, err
	}
	w, err := p.Store.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &pausedWriter{Writer: w, p: p, ctx: ctx, key: key}, nil
}

func (p *paused) Close() error { return nil }

type pausedWriter struct {
	blob.Writer
	p   *paused
	ctx context.Context
	key string
}

// Close is where a write is sent: it waits at the gate too.
func (w *pausedWriter) Close() error {
	if err := w.p.enter(w.ctx); err != nil {
		w.Writer.Close()
		return err
	}
	err := w.Writer.Close()
	if err == nil && w.p.passEffect(w.key, false) {
		w.p.effect()
	}
	return err
}

// Three processes open the same tiers, each with its background compactor
// on and nothing set to keep them apart: one holds the lease and compacts,
// the others run no pass. The holder is paused past its lease (its calls
// stopped where they were) and another takes over; resumed, its pass's
// writes are refused, and the effects of passes never interleave between
// processes (each change of the process making them is a handover of the
// lease). A holder that closes hands over at once. Every object written
// reads back.
func TestCompactorLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	hot, cold := memPair(t)
	eff := &effects{}
	var hots, colds []*paused
	var stores []*tiered.Store
	for i := range 3 {
		h, c := newPaused(hot, i, false, eff), newPaused(cold, i, true, eff)
		s, err := tiered.New(h, c, tiered.Options{
			After: time.Nanosecond, Interval: 5 * time.Millisecond, MaxClockSkew: 20 * time.Millisecond,
			LeaseDuration: lease, PackMaxObjects: 8, Owner: fmt.Sprint("process-", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		hots, colds, stores = append(hots, h), append(colds, c), append(stores, s)
	}
	closed := make([]atomic.Bool, 3)
	defer func() {
		for i, s := range stores {
			if !closed[i].Load() {
				s.Close()
			}
		}
	}()

	// Users write through every process but a paused one.
	ctx := ctxT(t)
	var model sync.Map
	var stop atomic.Bool
	var users sync.WaitGroup
	var pausedProc atomic.Int32
	pausedProc.Store(-1)
	for u := range 3 {
		users.Go(func() {
			r := rand.New(rand.NewPCG(uint64(u), 1))
			for n := 0; !stop.Load(); n++ {
				i := r.IntN(3)
				if int(pausedProc.Load()) == i || closed[i].Load() {
					continue
				}
				k, v := fmt.Sprintf("u%d/k%03d", u, n%50), fmt.Sprint(n)
				if err := blob.Put(ctx, stores[i], k, []byte(v), nil); err != nil {
					if closed[i].Load() {
						continue // closed as the write began
					}
					t.Errorf("put %s: %v", k, err)
					return
				}
				model.Store(k, v)
				time.Sleep(time.Millisecond)
			}
		})
	}
	defer func() { stop.Store(true); users.Wait() }()

	holders := func() []int {
		var out []int
		for i, s := range stores {
			if !closed[i].Load() && s.Stats().Lease.Held {
				out = append(out, i)
			}
		}
		return out
	}
	// waitHolder waits for one holder other than not, checking meanwhile
	// that no two processes hold the lease at once.
	waitHolder := func(not int) (int, time.Duration) {
		start := time.Now()
		// Polls, counted: 20 leases' worth at 2 ms each on an idle clock.
		for range 20 * int(lease/(2*time.Millisecond)) {
			hs := holders()
			if len(hs) > 1 {
				t.Fatalf("processes %v hold the lease at once", hs)
			}
			if len(hs) == 1 && hs[0] != not {
				return hs[0], time.Since(start)
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("no process other than %d took the lease within %v", not, 20*lease)
		return 0, 0
	}
	first, _ := waitHolder(-1)
	time.Sleep(2 * lease)
	// A busy machine may not have finished the holder's first pass yet.
	for i := 0; i < 5000 && stores[first].Stats().Passes == 0; i++ {
		time.Sleep(2 * time.Millisecond)
	}
	if st := stores[first].Stats(); st.Passes == 0 || st.Lease.Holder != fmt.Sprint("process-", first) {
		t.Fatalf("the holder ran %d passes; lease %+v", st.Passes, st.Lease)
	}
	for i, s := range stores {
		if st := s.Stats(); i != first && (st.Passes != 0 || st.Lease.Skipped == 0 || st.Lease.Holder != fmt.Sprint("process-", first)) {
			t.Fatalf("process %d (not the holder): %d passes, lease %+v", i, st.Passes, st.Lease)
		}
	}

	// Pause the holder past its lease: another takes over.
	pausedProc.Store(int32(first))
	hots[first].pause()
	colds[first].pause()
	second, took := waitHolder(first)
	t.Logf("process %d took over from paused process %d after %v (lease %v)", second, first, took, lease)
	time.Sleep(2 * lease)
	hots[first].resume()
	colds[first].resume()
	pausedProc.Store(-1)
	time.Sleep(2 * lease)
	if st := stores[first].Stats(); st.Lease.Held || st.Lease.Lost == 0 || st.Lease.Epoch <= 1 {
		t.Errorf("the resumed ex-holder: lease %+v", st.Lease)
	}

	// A holder that closes releases the lease: the next takes it at once
	// (well within the lease, which a crashed holder's successor waits).
	holder, _ := waitHolder(-1)
	before := stores[holder].Stats().Lease
	closed[holder].Store(true)
	if err := stores[holder].Close(); err != nil {
		t.Fatal(err)
	}
	successor, took := waitHolder(holder)
	if after := stores[successor].Stats().Lease; !after.Since.Before(before.Expires) {
		t.Errorf("after a holder closed, the next took the lease at %v, once it had expired (%v): it was not released", after.Since, before.Expires)
	}
	t.Logf("after a holder closed, process %d took the lease after %v", successor, took)
	time.Sleep(2 * lease)
	stop.Store(true)
	users.Wait()

	acquired := int64(0)
	for _, s := range stores {
		acquired += s.Stats().Lease.Acquired
	}
	sw, n := eff.switches()
	t.Logf("%d pass effects, %d changes of process, %d epochs", n, sw, acquired)
	if n == 0 {
		t.Fatal("no pass made any effect")
	}
	if int64(sw) > acquired-1 {
		t.Errorf("pass effects changed process %d times over %d epochs: passes of two processes interleaved", sw, acquired)
	}
	var reader *tiered.Store
	for i, s := range stores {
		if !closed[i].Load() {
			reader = s
		}
	}
	model.Range(func(k, v any) bool {
		got, err := blob.ReadAll(ctx, reader, k.(string))
		if err != nil || string(got) != v.(string) {
			t.Errorf("%s: read %q, %v; want %q", k, got, err, v)
		}
		return true
	})
	var packs int64
	for _, s := range stores {
		packs += s.Stats().Packs
	}
	if packs == 0 {
		t.Error("no pack was written")
	}
}

// A Store whose lease is held by another process runs no pass when asked:
// CompactOnce says who holds it. Once the holder closes, it runs.
func TestCompactOnceUnderAnotherLease(t *testing.T) {
	hot, cold := memPair(t)
	o := tiered.Options{After: time.Nanosecond, Interval: time.Hour, MaxClockSkew: 10 * time.Millisecond, LeaseDuration: time.Minute, Owner: "pod a"}
	bg, err := tiered.New(nopClose{hot}, nopClose{cold}, o)
	if err != nil {
		t.Fatal(err)
	}
	m := manualWith(t, hot, cold, tiered.Options{Owner: "manual", MaxClockSkew: 10 * time.Millisecond, LeaseStore: cold})
	ctx := ctxT(t)
	for bg.Stats().Lease.Held == false {
		time.Sleep(time.Millisecond)
	}
	mustPut(t, m, "k", "v")
	res := m.CompactOnce(ctx)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "pod a holds epoch 1") || res.Moved != 0 {
		t.Fatalf("CompactOnce beside a holder: %+v", res)
	}
	if st := m.Stats(); st.Passes != 0 || st.Lease.Skipped != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	if res := m.CompactOnce(ctx); res.Err != nil || res.Moved != 1 {
		t.Fatalf("CompactOnce after the holder closed: %+v", res)
	}
	// A manual pass gives the lease up after it: the next process's pass
	// need not wait for it to end.
	m2 := manualWith(t, hot, cold, tiered.Options{Owner: "manual-2", MaxClockSkew: 10 * time.Millisecond, LeaseStore: cold})
	mustPut(t, m2, "k2", "v")
	if res := m2.CompactOnce(ctx); res.Err != nil || res.Moved != 1 {
		t.Fatalf("CompactOnce after another's manual pass: %+v", res)
	}
	if st := m2.Stats().Lease; st.Held || st.Epoch != 3 || st.Acquired != 1 {
		t.Fatalf("lease after a manual pass: %+v", st)
	}
}

// A lease too short for the clock skew is refused before any I/O.
func TestLeaseTooShort(t *testing.T) {
	hot, cold := memPair(t)
	_, err := tiered.New(nopClose{hot}, nopClose{cold}, tiered.Options{MaxClockSkew: time.Second, LeaseDuration: 2 * time.Second})
	if !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("a lease of twice the skew: %v", err)
	}
	if _, err := blob.Open(context.Background(), "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&max_clock_skew=1s&lease=1s"); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("lease=1s with max_clock_skew=1s: %v", err)
	}
}

// A lease object that does not parse (written by something else) stops
// every pass with an error that names it, rather than being overwritten as
// if no process held it.
func TestDamagedLease(t *testing.T) {
	hot, cold := memPair(t)
	s := manualWith(t, hot, cold, tiered.Options{LeaseStore: cold, MaxClockSkew: 10 * time.Millisecond})
	ctx := ctxT(t)
	if err := blob.Put(ctx, cold, leaseKey, []byte("?"), &blob.WriterOptions{Metadata: map[string]string{"zonalblob-tiered-lease": "garbage"}}); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "k", "v")
	res := s.CompactOnce(ctx)
	if !errors.Is(res.Err, blob.ErrCorrupt) || res.Moved != 0 {
		t.Fatalf("a pass over a damaged lease: %+v", res)
	}
}

// The lease may live in hot (lease_in=hot): passes list hot's markers, and
// pass over it rather than take it for a move's marker; a bad lease_in is
// refused before any I/O.
func TestLeaseInHot(t *testing.T) {
	ctx := ctxT(t)
	s, err := blob.Open(ctx, "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&manual=true&after=0&lease_in=hot&max_clock_skew=10ms")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := s.(*tiered.Store)
	for i := range 3 {
		mustPut(t, ts, fmt.Sprint("k", i), "v")
		if res := ts.CompactOnce(ctx); res.Err != nil || res.Moved != 1 {
			t.Fatalf("pass %d: %+v", i, res)
		}
	}
	if st := ts.Stats(); st.Errors != 0 || st.Lease.Acquired != 3 || st.Lease.Epoch != 3 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := blob.Open(ctx, "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&lease_in=elsewhere"); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("lease_in=elsewhere: %v", err)
	}
}

// Passes of one manual Store at once share its lease: their renewals do
// not undo each other, and the lease is given up once the last has ended.
func TestConcurrentManualPasses(t *testing.T) {
	hotMem, cold := memPair(t)
	// Slow reads of hot and a short lease, so that the passes renew it
	// while they run.
	hot := fault.Wrap(hotMem, fault.Options{})
	hot.AddLatency(fault.OpRead, latency.Fixed(20*time.Millisecond))
	s := manualWith(t, hot, cold, tiered.Options{MaxClockSkew: 10 * time.Millisecond, LeaseDuration: 300 * time.Millisecond, PackMaxObjects: 4})
	ctx := ctxT(t)
	for i := range 64 {
		mustPut(t, s, fmt.Sprint("k", i), "v")
	}
	var wg sync.WaitGroup
	var moved atomic.Int64
	for range 4 {
		wg.Go(func() {
			for range 10 {
				res := s.CompactOnce(ctx)
				if res.Err != nil {
					t.Errorf("pass: %+v", res)
					return
				}
				moved.Add(int64(res.Moved))
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	st := s.Stats().Lease
	if moved.Load() != 64 || st.Held || st.Lost != 0 {
		t.Fatalf("%d moved; lease %+v", moved.Load(), st)
	}
	t.Logf("lease after 40 passes, 4 at a time: %+v", st)
}
