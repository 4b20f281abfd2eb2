package tiered_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/register"
	"github.com/zonalblob/zonalblob/tiered"
)

// TestMissInBothTiersWhileAKeyIsReplaced forces the interleaving a read
// that misses in both tiers must survive: the key lives in cold (moved, or
// packed) when the read misses in hot; before the read asks cold, another
// process puts a new version in hot and a Delete of that version is held
// just before its grave's write.
// The key existed throughout, so the read must not report it missing: a
// read made after it, while the Delete is still held, finds the new
// version. (A read that trusted its two misses reported NotFound, and the
// history was not linearizable.) The reads and Stats are recorded with the
// Put and the Delete and checked against a register.
func TestMissInBothTiersWhileAKeyIsReplaced(t *testing.T) {
	for _, packs := range []int{alone, 10} {
		for _, stat := range []bool{false, true} {
			name := map[bool]string{false: "read", true: "stat"}[stat]
			name = map[bool]string{false: "alone/", true: "packs/"}[packs > 0] + name
			t.Run(name, func(t *testing.T) { missInBothTiers(t, packs, stat) })
		}
	}
}

func missInBothTiers(t *testing.T, packs int, stat bool) {
	hot, cold := memPair(t)
	opts := tiered.Options{PackMaxObjects: packs, MoveTimeout: time.Second, MaxClockSkew: time.Millisecond}
	const key, v0, v1 = "k", "old", "newer"
	h := &history{}
	ctx := ctxT(t)
	user := manualWith(t, hot, cold, opts)
	held, release := make(chan struct{}), make(chan struct{})
	hold := false
	// Every Delete writes a grave over the version and deletes nothing: it
	// is held before the grave's write.
	const holdAt = "hot:write"
	deleterHot := &hooked{Store: hot, name: "hot", at: func(step, k string) {
		if step == holdAt && k == key && hold {
			hold = false
			close(held)
			<-release
		}
	}}
	// The deleter counts v1 too young for any move to be taking it (its
	// After is an hour): it writes a grave over v1 all the same.
	dopts := opts
	dopts.After, dopts.Manual, dopts.Owner = time.Hour, true, "test-deleter"
	deleter, err := tiered.New(keepOpen(deleterHot), nopClose{cold}, bound(dopts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleter.Close() })
	deleted := make(chan error, 1)
	readerHot := &afterMiss{Store: hot, fn: func(k string) {
		if k == key && hold {
			// The reader missed in hot; before it asks cold, v1 replaces
			// the key and a Delete of v1 removes the copy it shadows.
			h.write(1, register.Input{Kind: register.Put, Key: key, Value: v1}, func() error {
				return blob.Put(ctx, user, key, []byte(v1), nil)
			})
			call := h.Tick()
			go func() {
				err := deleter.Delete(ctx, key, nil)
				ret := h.Tick()
				res := register.OK
				if err != nil {
					res, ret = register.Unknown, register.Never
				}
				h.add(2, register.Input{Kind: register.Delete, Key: key}, call, register.Output{Res: res}, ret)
				deleted <- err
			}()
			select {
			case <-held:
			case err := <-deleted:
				t.Errorf("the delete returned (%v) before its delete from hot", err)
			}
		}
	}}
	reader := manualWith(t, readerHot, cold, opts)
	h.write(1, register.Input{Kind: register.Put, Key: key, Value: v0}, func() error {
		return blob.Put(ctx, user, key, []byte(v0), nil)
	})
	if res := user.CompactOnce(ctx); res.Moved != 1 {
		t.Fatalf("pass %+v: the key did not move", res)
	}
	hold = true
	if stat {
		h.stat(ctx, 0, reader, key, map[int64]string{int64(len(v0)): v0, int64(len(v1)): v1})
	} else {
		h.read(ctx, 0, reader, key)
	}
	if hold {
		t.Fatal("the reader did not miss in hot: the interleaving was not forced")
	}
	// The Delete is held before its delete from hot: v1 is still the key's.
	if v, _, ok := h.read(ctx, 3, reader, key); !ok || v != v1 {
		t.Errorf("read while the delete is held: %q, %v; want %q", v, ok, v1)
	}
	// Nothing left cold: the reader found the packed version.
	if st := reader.Stats(); st.MissesChecked != 0 {
		t.Errorf("%d misses checked again, want none", st.MissesChecked)
	}
	close(release)
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	h.read(ctx, 3, reader, key)
	h.Check(t, time.Minute)
}

// stat records a Stat as a read whose value is known by its size.
func (h *history) stat(ctx context.Context, client int, s blob.Store, key string, bySize map[int64]string) {
	call := h.Tick()
	a, err := s.Stat(ctx, key)
	ret := h.Tick()
	switch {
	case err == nil:
		h.add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Value: bySize[a.Size]}, ret)
	case errors.Is(err, blob.ErrNotFound):
		h.add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Res: register.NotFound}, ret)
	default:
		panic(fmt.Sprintf("stat: %v", err))
	}
}

// afterMiss calls fn(key) when a read or Stat of hot has missed, before the
// miss is returned: what happens in fn happens after the reader's look at
// hot and before its look at cold.
type afterMiss struct {
	blob.Store
	fn func(key string)
}

func (a *afterMiss) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	r, err := a.Store.NewRangeReader(ctx, key, off, n)
	if errors.Is(err, blob.ErrNotFound) {
		a.fn(key)
	}
	return r, err
}

func (a *afterMiss) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	attrs, err := a.Store.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		a.fn(key)
	}
	return attrs, err
}

func (a *afterMiss) Close() error { return nil }
