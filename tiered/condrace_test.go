package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// barrier holds the first write or delete each of two processes makes (to
// either tier) until the other has reached its own: two conditional
// operations that both passed their checks before either committed
// anything.
type barrier struct {
	arrived [2]chan struct{}
}

func newBarrier() *barrier {
	return &barrier{arrived: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
}

// gate is one process's side of a barrier, as a Store wrapper; it holds
// nothing until armed.
type gate struct {
	b     *barrier
	i     int
	armed bool
	done  bool
}

func (g *gate) wait(ctx context.Context) error {
	if g == nil || !g.armed || g.done {
		return nil
	}
	g.done = true
	close(g.b.arrived[g.i])
	select {
	case <-g.b.arrived[1-g.i]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedStore passes writes and deletes through its gate.
type gatedStore struct {
	blob.Store
	g *gate
}

func (s gatedStore) NewWriter(ctx context.Context, key string, o *blob.WriterOptions) (blob.Writer, error) {
	if err := s.g.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.NewWriter(ctx, key, o)
}

func (s gatedStore) Delete(ctx context.Context, key string, o *blob.DeleteOptions) error {
	if err := s.g.wait(ctx); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key, o)
}

func (gatedStore) Close() error { return nil }

// gatedQuorum is gatedStore over a quorum, which stays one (a tiered store
// retires from it).
type gatedQuorum struct {
	quorumHot
	g *gate
}

func (s gatedQuorum) NewWriter(ctx context.Context, key string, o *blob.WriterOptions) (blob.Writer, error) {
	if err := s.g.wait(ctx); err != nil {
		return nil, err
	}
	return s.quorumHot.NewWriter(ctx, key, o)
}

func (s gatedQuorum) Delete(ctx context.Context, key string, o *blob.DeleteOptions) error {
	if err := s.g.wait(ctx); err != nil {
		return err
	}
	return s.quorumHot.Delete(ctx, key, o)
}

// condRaceStraggler is the StragglerTimeout (and so about the in-flight
// bound) of the quorums of condRace.
const condRaceStraggler = 100 * time.Millisecond

// condRace is two processes (tiered stores) over one hot tier (a mem store
// or a 2-of-3 quorum of them) and one cold, each with its gate, and a third
// that moves and reads.
type condRace struct {
	gates [2]*gate
	procs [2]*tiered.Store
	mover *tiered.Store
}

func newCondRace(t *testing.T, hotKind string, packs int) *condRace {
	t.Helper()
	_, cold := memPair(t)
	var hot blob.Store
	var q *quorum.Store
	if hotKind == "mem" {
		hot, _ = memPair(t)
	} else {
		var rs []blob.Store
		for range 3 {
			m, _ := memPair(t)
			rs = append(rs, nopClose{m})
		}
		q = newQuorum(t, rs, func(o *quorum.Options) { o.StragglerTimeout = condRaceStraggler }).(quorumHot).Store
	}
	o := tiered.Options{After: time.Nanosecond, Manual: true, Concurrency: 1, PackMaxObjects: packs, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond}
	open := func(h, c blob.Store) *tiered.Store {
		s, err := tiered.New(h, c, bound(o))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	r := &condRace{}
	b := newBarrier()
	for i := range 2 {
		g := &gate{b: b, i: i}
		r.gates[i] = g
		h := blob.Store(gatedStore{hot, g})
		if q != nil {
			h = gatedQuorum{quorumHot{q}, g}
		}
		r.procs[i] = open(h, gatedStore{cold, g})
	}
	if q != nil {
		r.mover = open(quorumHot{q}, nopClose{cold})
	} else {
		r.mover = open(nopClose{hot}, nopClose{cold})
	}
	return r
}

// moved writes key and moves it to cold, and returns its generation.
func (r *condRace) moved(t *testing.T, key, val string) string {
	t.Helper()
	ctx := ctxT(t)
	mustPut(t, r.mover, key, val)
	a, err := r.mover.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Older than a quorum's in-flight bound, as objects older than After
	// are in any deployment: the move retires it from hot at once.
	time.Sleep(condRaceStraggler + 50*time.Millisecond)
	if res := r.mover.CompactOnce(ctx); res.Moved != 1 || res.Failed != 0 {
		t.Fatalf("move of %s: %+v", key, res)
	}
	if b, err := r.mover.Stat(ctx, key); err != nil || b.Generation != a.Generation {
		t.Fatalf("Stat after the move: %+v, %v; want generation %s", b, err, a.Generation)
	}
	return a.Generation
}

// race runs a and b, each in its process, held at their first write or
// delete until both are there.
func (r *condRace) race(a, b func(s *tiered.Store) error) (errA, errB error) {
	r.gates[0].armed, r.gates[1].armed = true, true
	ea, eb := make(chan error, 1), make(chan error, 1)
	go func() { ea <- a(r.procs[0]) }()
	go func() { eb <- b(r.procs[1]) }()
	return <-ea, <-eb
}

// TestConditionalsAcrossProcesses races two processes' conditional
// operations on one version that was moved to cold (into a pack, or to a
// cold object of its own), on a mem hot tier and on a quorum, forcing the
// interleaving in which both checked the tiers before either committed:
// exactly one may win. (Ordered by a per-process lock only, both won.)
func TestConditionalsAcrossProcesses(t *testing.T) {
	for _, hotKind := range []string{"mem", "quorum"} {
		for _, packs := range []int{alone, 3} {
			t.Run(fmt.Sprintf("%s/packs=%d", hotKind, packs), func(t *testing.T) {
				runCondRaces(t, hotKind, packs)
			})
		}
	}
}

func runCondRaces(t *testing.T, hotKind string, packs int) {
	// Each race has its own time bound (set at its start), so that one
	// that fails does not take the others with it.
	var ctx context.Context
	put := func(key, val string, c blob.Condition) func(s *tiered.Store) error {
		return func(s *tiered.Store) error {
			return blob.Put(ctx, s, key, []byte(val), &blob.WriterOptions{If: c})
		}
	}
	del := func(key string, c blob.Condition) func(s *tiered.Store) error {
		return func(s *tiered.Store) error {
			return s.Delete(ctx, key, &blob.DeleteOptions{If: c})
		}
	}
	read := func(r *condRace, key string) (string, bool) {
		t.Helper()
		b, err := blob.ReadAll(ctx, r.mover, key)
		if errors.Is(err, blob.ErrNotFound) {
			return "", false
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b), true
	}

	t.Run("conditional delete vs conditional write", func(t *testing.T) {
		ctx = ctxT(t)
		r := newCondRace(t, hotKind, packs)
		g := r.moved(t, "k", "v1")
		errDel, errPut := r.race(del("k", blob.IfGenerationMatch(g)), put("k", "v2", blob.IfGenerationMatch(g)))
		v, ok := read(r, "k")
		switch {
		case errDel == nil && errors.Is(errPut, blob.ErrPrecondition) && !ok:
		case errPut == nil && errors.Is(errDel, blob.ErrPrecondition) && ok && v == "v2":
		default:
			t.Errorf("Delete(IfGenerationMatch): %v; Put(IfGenerationMatch): %v; then read %q (found %v): want exactly one to succeed", errDel, errPut, v, ok)
		}
	})
	t.Run("conditional write vs conditional delete", func(t *testing.T) {
		ctx = ctxT(t)
		r := newCondRace(t, hotKind, packs)
		g := r.moved(t, "k", "v1")
		errPut, errDel := r.race(put("k", "v2", blob.IfGenerationMatch(g)), del("k", blob.IfGenerationMatch(g)))
		v, ok := read(r, "k")
		switch {
		case errDel == nil && errors.Is(errPut, blob.ErrPrecondition) && !ok:
		case errPut == nil && errors.Is(errDel, blob.ErrPrecondition) && ok && v == "v2":
		default:
			t.Errorf("Put(IfGenerationMatch): %v; Delete(IfGenerationMatch): %v; then read %q (found %v): want exactly one to succeed", errPut, errDel, v, ok)
		}
	})
	t.Run("delete vs conditional write", func(t *testing.T) {
		ctx = ctxT(t)
		r := newCondRace(t, hotKind, packs)
		g := r.moved(t, "k", "v1")
		errDel, errPut := r.race(del("k", blob.Condition{}), put("k", "v2", blob.IfGenerationMatch(g)))
		v, ok := read(r, "k")
		switch {
		case errDel == nil && errors.Is(errPut, blob.ErrPrecondition) && !ok: // the Delete first
		case errDel == nil && errPut == nil && !ok: // the write first, then the Delete removed it
		default:
			t.Errorf("Delete: %v; Put(IfGenerationMatch): %v; then read %q (found %v): not linearizable", errDel, errPut, v, ok)
		}
	})
	t.Run("conditional write vs conditional write", func(t *testing.T) {
		ctx = ctxT(t)
		r := newCondRace(t, hotKind, packs)
		g := r.moved(t, "k", "v1")
		errA, errB := r.race(put("k", "a", blob.IfGenerationMatch(g)), put("k", "b", blob.IfGenerationMatch(g)))
		v, _ := read(r, "k")
		switch {
		case errA == nil && errors.Is(errB, blob.ErrPrecondition) && v == "a":
		case errB == nil && errors.Is(errA, blob.ErrPrecondition) && v == "b":
		default:
			t.Errorf("Put(IfGenerationMatch) twice: %v, %v; then read %q: want exactly one to succeed", errA, errB, v)
		}
	})
	t.Run("create vs create after a delete", func(t *testing.T) {
		ctx = ctxT(t)
		r := newCondRace(t, hotKind, packs)
		r.moved(t, "k", "v1")
		if err := r.mover.Delete(ctx, "k", nil); err != nil {
			t.Fatal(err)
		}
		errA, errB := r.race(put("k", "a", blob.IfNotExist()), put("k", "b", blob.IfNotExist()))
		v, _ := read(r, "k")
		switch {
		case errA == nil && errors.Is(errB, blob.ErrExists) && v == "a":
		case errB == nil && errors.Is(errA, blob.ErrExists) && v == "b":
		default:
			t.Errorf("Put(IfNotExist) twice: %v, %v; then read %q: want exactly one to succeed", errA, errB, v)
		}
	})
}
