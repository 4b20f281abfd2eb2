package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// countedQuorum is a quorum hot tier (still a retirer) that counts the
// calls a tiered store makes of it.
type countedQuorum struct {
	quorumHot
	stats, reads, writes, deletes atomic.Int64
}

func (c *countedQuorum) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	c.stats.Add(1)
	return c.quorumHot.Stat(ctx, key)
}

func (c *countedQuorum) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	c.reads.Add(1)
	return c.quorumHot.NewRangeReader(ctx, key, off, n)
}

func (c *countedQuorum) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	c.writes.Add(1)
	return c.quorumHot.NewWriter(ctx, key, opts)
}

func (c *countedQuorum) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	c.deletes.Add(1)
	return c.quorumHot.Delete(ctx, key, opts)
}

func (c *countedQuorum) counts() [4]int64 {
	return [4]int64{c.stats.Load(), c.reads.Load(), c.writes.Load(), c.deletes.Load()}
}

// writtenHot is a hot tier for the tests of Deletes of own writes: a mem
// store behind the fault wrapper, or a 2-of-3 quorum of them; counts
// returns the Stats, reads, writes and deletes tiered asked of it.
type writtenHot struct {
	name string
	open func(t *testing.T) (hot blob.Store, counts func() [4]int64)
}

var writtenHots = []writtenHot{
	{"mem", func(t *testing.T) (blob.Store, func() [4]int64) {
		f := testkit.Faulted(t, fault.Options{Seed: 1})
		return f, func() [4]int64 {
			st := f.Stats()
			return [4]int64{st[fault.OpStat].Calls, st[fault.OpRead].Calls, st[fault.OpWrite].Calls, st[fault.OpDelete].Calls}
		}
	}},
	{"quorum", func(t *testing.T) (blob.Store, func() [4]int64) {
		reps := testkit.Mems(t, 3)
		// Short, so that a pass may move what a test wrote a moment ago
		// (a move over a retirer waits InFlightBound; see moverOver).
		q := newQuorum(t, reps, func(o *quorum.Options) { o.StragglerTimeout = 100 * time.Millisecond })
		c := &countedQuorum{quorumHot: q.(quorumHot)}
		return c, c.counts
	}},
}

// moverOver returns a compactor over hot and cold that packs every object
// written a moment before, once waitInFlight(hot) has returned.
func moverOver(t *testing.T, hot, cold blob.Store) *tiered.Store {
	t.Helper()
	o := writtenOptions
	o.After, o.MaxClockSkew = time.Nanosecond, time.Millisecond
	return manualWith(t, hot, cold, o)
}

// waitInFlight waits until what was written to hot until now may be moved:
// over a retirer, a move leaves versions younger than its InFlightBound.
func waitInFlight(hot blob.Store) {
	if r, ok := hot.(blob.Retirer); ok {
		time.Sleep(r.InFlightBound() + 10*time.Millisecond)
	}
}

// writtenOptions are those of an LSM engine's store: packs, and objects
// young enough that a move may be taking any of them (After one minute, less
// twice the skew and a move's duration, is below zero), so that every Delete
// of a version in hot writes a grave. MoveTimeout is short, so that a
// pass retiring graves waits little (BuryWindow).
var writtenOptions = tiered.Options{PackMaxObjects: 100, After: time.Minute, MoveTimeout: 2 * time.Second, MaxClockSkew: time.Minute}

func writtenStore(t *testing.T, hot, cold blob.Store) *tiered.Store {
	t.Helper()
	o := writtenOptions
	o.Manual, o.LeaseStore = true, leaseStoreFor(t, cold)
	s, err := tiered.New(keepOpen(hot), nopClose{cold}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A Delete of a version the Store wrote itself (Put, Create, a conditional
// write) is one write to hot, its grave on condition of the generation the
// write reported: no Stat, read or delete of hot, and nothing of cold. What
// another process sees after it is the key gone, from Stat, reads and
// listings.
func TestDeleteOfOwnWriteAsksHotNothing(t *testing.T) {
	for _, h := range writtenHots {
		t.Run(h.name, func(t *testing.T) {
			ctx := ctxT(t)
			hot, counts := h.open(t)
			cold := testkit.Mem(t)
			user := writtenStore(t, hot, cold)
			other := writtenStore(t, hot, cold)
			mustPut(t, user, "t/put", "v")
			created, err := blob.CreateBytes(ctx, user, "t/created-", []byte("v"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := blob.Put(ctx, user, "t/cond", []byte("v"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
				t.Fatal(err)
			}
			a, err := other.Stat(ctx, "t/cond")
			if err != nil {
				t.Fatal(err)
			}
			if err := blob.Put(ctx, user, "t/cond", []byte("w"), &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)}); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"t/put", created, "t/cond"} {
				before := counts()
				if err := user.Delete(ctx, key, nil); err != nil {
					t.Fatalf("delete %s: %v", key, err)
				}
				after := counts()
				if d := [4]int64{after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3]}; d != [4]int64{0, 0, 1, 0} {
					t.Errorf("delete %s asked hot for %d Stats, %d reads, %d writes, %d deletes; want the grave's write only", key, d[0], d[1], d[2], d[3])
				}
			}
			if st := user.Stats(); st.DeletesOfWritten != 3 || st.WrittenChanged != 0 {
				t.Errorf("stats %+v: want 3 deletes of written versions", st)
			}
			checkModel(t, other, nil, []string{"t/put", created, "t/cond"})
			if got := listKeys(t, other); len(got) != 0 {
				t.Errorf("another process lists %q", got)
			}
			// Deleted once: the second Delete finds nothing, as any does.
			if err := user.Delete(ctx, "t/put", nil); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("second delete: %v", err)
			}
			// The graves retire with what they shadow, and the keys stay gone.
			retireGraves(t, hot, cold, writtenOptions)
			checkModel(t, other, nil, []string{"t/put", created, "t/cond"})
		})
	}
}

// The generation a Store remembers is a guess that another process's work
// can make wrong: an overwrite, a Delete, a move into a pack. Each Delete of
// the key then finds the grave's condition unmet and does what any Delete
// does, with the answer it would give: the newer version deleted, or
// ErrPrecondition for a Delete on condition of the old one, or NotFound.
func TestDeleteOfOwnWriteChangedByAnother(t *testing.T) {
	for _, h := range writtenHots {
		t.Run(h.name, func(t *testing.T) {
			ctx := ctxT(t)
			hot, _ := h.open(t)
			cold := testkit.Mem(t)
			user := writtenStore(t, hot, cold)
			other := writtenStore(t, hot, cold)
			gen := func(key string) string {
				a, err := other.Stat(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return a.Generation
			}

			// Overwritten by another process.
			mustPut(t, user, "k/over", "mine")
			mine := gen("k/over")
			mustPut(t, other, "k/over", "theirs")
			err := user.Delete(ctx, "k/over", &blob.DeleteOptions{If: blob.IfGenerationMatch(mine)})
			if !errors.Is(err, blob.ErrPrecondition) {
				t.Errorf("delete on condition of the overwritten version: %v", err)
			}
			checkModel(t, other, map[string]string{"k/over": "theirs"}, nil)
			mustPut(t, user, "k/over2", "mine")
			mustPut(t, other, "k/over2", "theirs")
			if err := user.Delete(ctx, "k/over2", nil); err != nil {
				t.Errorf("delete of the overwritten key: %v", err)
			}
			checkModel(t, other, nil, []string{"k/over2"})

			// Deleted by another process.
			mustPut(t, user, "k/gone", "mine")
			if err := other.Delete(ctx, "k/gone", nil); err != nil {
				t.Fatal(err)
			}
			if err := user.Delete(ctx, "k/gone", nil); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("delete of a key another process deleted: %v", err)
			}
			// ... and written again by it.
			mustPut(t, user, "k/again", "mine")
			if err := other.Delete(ctx, "k/again", nil); err != nil {
				t.Fatal(err)
			}
			mustPut(t, other, "k/again", "theirs")
			if err := user.Delete(ctx, "k/again", nil); err != nil {
				t.Errorf("delete of a key another process wrote again: %v", err)
			}
			checkModel(t, other, nil, []string{"k/gone", "k/again"})

			// Moved into a pack by a compactor (hot's copy retired, or
			// deleted).
			mustPut(t, user, "k/packed", "mine")
			mustPut(t, user, "k/packed-cond", "mine")
			packedGen := gen("k/packed-cond")
			mover := moverOver(t, hot, cold)
			waitInFlight(hot)
			if res := mover.CompactOnce(ctx); res.Moved < 2 || res.Failed != 0 {
				t.Fatalf("pass %+v (%s)", res, mover.Stats().LastError)
			}
			if err := user.Delete(ctx, "k/packed", nil); err != nil {
				t.Errorf("delete of a packed version this store wrote: %v", err)
			}
			if err := user.Delete(ctx, "k/packed-cond", &blob.DeleteOptions{If: blob.IfGenerationMatch(packedGen)}); err != nil {
				t.Errorf("delete on condition of a packed version this store wrote: %v", err)
			}
			checkModel(t, other, nil, []string{"k/packed", "k/packed-cond"})
			st := user.Stats()
			t.Logf("deletes of written versions %d, changed %d", st.DeletesOfWritten, st.WrittenChanged)
			if st.WrittenChanged < 4 {
				t.Errorf("stats %+v: want at least 4 guesses found changed", st)
			}
			retireGraves(t, hot, cold, writtenOptions)
			checkModel(t, other, map[string]string{"k/over": "theirs"}, []string{"k/over2", "k/gone", "k/again", "k/packed", "k/packed-cond"})
			if got := listKeys(t, other); len(got) != 1 {
				t.Errorf("listing after the graves retired: %q", got)
			}
		})
	}
}

// Many Stores' writes and Deletes of the same keys, interleaved at random
// while a compactor packs: the guesses of each are often wrong, and every
// Delete still answers as the model says.
func TestDeleteOfOwnWriteInterleaved(t *testing.T) {
	for _, h := range writtenHots {
		t.Run(h.name, func(t *testing.T) {
			ctx := ctxT(t)
			hot, _ := h.open(t)
			cold := testkit.Mem(t)
			procs := []*tiered.Store{writtenStore(t, hot, cold), writtenStore(t, hot, cold), writtenStore(t, hot, cold)}
			mover := moverOver(t, hot, cold)
			model := map[string]string{}
			rng := uint64(7)
			next := func(n int) int {
				rng = rng*6364136223846793005 + 1442695040888963407
				return int(rng>>33) % n
			}
			outcomes := func() (fast, changed int64) {
				for _, p := range procs {
					fast += p.Stats().DeletesOfWritten
					changed += p.Stats().WrittenChanged
				}
				return fast, changed
			}
			// 300 steps at least, and more until both outcomes occurred:
			// how many versions the compactor packs (keys it holds take the
			// old path) depends on how long the steps take (over a quorum,
			// a move leaves the versions younger than its in-flight bound).
			// Each 100 steps use 6 keys of their own, so that keys the
			// packs hold do not end the fast path for the rest of the run.
			const steps, most, keys = 300, 3000, 6
			for i := 0; i < most; i++ {
				if fast, changed := outcomes(); i >= steps && fast > 0 && changed > 0 {
					break
				}
				p := procs[next(len(procs))]
				key := fmt.Sprintf("i/%d", i/100*keys+next(keys))
				switch next(4) {
				case 0, 1:
					v := fmt.Sprintf("v%d", i)
					if _, err := settle(func() error { return blob.Put(ctx, p, key, []byte(v), nil) }); err != nil {
						t.Fatalf("step %d: put %s: %v", i, key, err)
					}
					model[key] = v
				case 2:
					retried, err := settle(func() error { return p.Delete(ctx, key, nil) })
					_, had := model[key]
					if had && retried && errors.Is(err, blob.ErrNotFound) {
						err = nil // the uncertain attempt deleted it
					}
					if had && err != nil || !had && !errors.Is(err, blob.ErrNotFound) {
						t.Fatalf("step %d: delete %s (present %v): %v", i, key, had, err)
					}
					delete(model, key)
				case 3:
					if i%20 == 0 {
						if res := mover.CompactOnce(ctx); res.Failed != 0 {
							t.Fatalf("pass %+v (%s)", res, mover.Stats().LastError)
						}
					}
				}
			}
			var gone []string
			for k := range most / 100 * keys {
				if _, ok := model[fmt.Sprintf("i/%d", k)]; !ok {
					gone = append(gone, fmt.Sprintf("i/%d", k))
				}
			}
			for _, p := range procs {
				checkModel(t, p, model, gone)
			}
			fast, changed := outcomes()
			t.Logf("deletes of written versions %d, guesses found changed %d", fast, changed)
			if fast == 0 || changed == 0 {
				t.Errorf("%d steps took %d fast deletes and found %d guesses changed: want both", most, fast, changed)
			}
		})
	}
}

// settle runs op again while its outcome is uncertain, as a client would:
// the quorums here bound each operation by a StragglerTimeout of 100 ms,
// which a loaded machine may pass. It returns whether an attempt before the
// last was uncertain, and the last one's error.
func settle(op func() error) (retried bool, err error) {
	for attempt := 0; ; attempt++ {
		err = op()
		if !errors.Is(err, quorum.ErrUncertain) || attempt == 20 {
			return attempt > 0, err
		}
	}
}
