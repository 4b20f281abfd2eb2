package tiered_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/tiered"
)

// packed200 writes 200 objects k/000..k/199 through a compactor that packs
// them 50 a pack, deletes k/150 (a grave, retired by a pass with a
// tombstone over the last pack), and
// returns the stores, the model and the log objects' names in order: four
// packs and a tombstone.
func packed200(t *testing.T) (hot, cold blob.Store, model map[string]string, packs []string, tomb string) {
	t.Helper()
	hot, cold = memPair(t)
	// MoveTimeout bounds each pass (a busy machine must finish one within
	// it) and sets how long passes wait for other processes' catalogs.
	opts := tiered.Options{PackMaxObjects: 50, MoveTimeout: 2 * time.Second, MaxClockSkew: time.Millisecond}
	c := manualWith(t, hot, cold, opts)
	model = map[string]string{}
	for i := range 200 {
		k := fmt.Sprintf("k/%03d", i)
		model[k] = strings.Repeat(string(rune('a'+i%26)), 100+i)
		mustPut(t, c, k, model[k])
		if i%50 == 49 {
			if res := c.CompactOnce(ctxT(t)); res.Failed != 0 || res.Moved != 50 {
				t.Fatalf("pass: %+v", res)
			}
		}
	}
	if err := c.Delete(ctxT(t), "k/150", nil); err != nil {
		t.Fatal(err)
	}
	delete(model, "k/150")
	// A compactor whose clock is past the grave's hold retires it with a
	// tombstone.
	r := manualWith(t, testkit.AgedBy(hot, tiered.GraveHold(opts.MoveTimeout, opts.MaxClockSkew)), cold, opts)
	if res := r.CompactOnce(ctxT(t)); res.Failed != 0 || r.Stats().GravesRetired != 1 {
		t.Fatalf("the pass retiring k/150's grave: %+v, stats %+v", res, r.Stats())
	}
	for o, err := range blob.All(ctxT(t), cold, nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(o.Key, "-p-"):
			packs = append(packs, o.Key)
		case strings.Contains(o.Key, "-t-"):
			tomb = o.Key
		}
	}
	if len(packs) != 4 || tomb == "" {
		t.Fatalf("log holds packs %q, tombstone %q; want 4 and 1", packs, tomb)
	}
	return hot, cold, model, packs, tomb
}

// rewrite replaces the object name in cold with f of its bytes, keeping its
// metadata (damage to the bytes alone).
func rewrite(t *testing.T, cold blob.Store, name string, f func([]byte) []byte) {
	t.Helper()
	a, err := cold.Stat(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blob.ReadAll(ctxT(t), cold, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := blob.Put(ctxT(t), cold, name, f(b), &blob.WriterOptions{Metadata: a.Metadata}); err != nil {
		t.Fatal(err)
	}
}

// reindex rewrites a pack's index with f and gives it a valid checksum: an
// index that verifies and still lies.
func reindex(f func(idx map[string]any)) func([]byte) []byte {
	return func(b []byte) []byte {
		n, _ := strconv.Atoi(string(b[8:19]))
		var idx map[string]any
		if err := json.Unmarshal(b[29:29+n], &idx); err != nil {
			panic(err)
		}
		f(idx)
		js, _ := json.Marshal(idx)
		hdr := fmt.Sprintf("zbpack2 %011d %08x\n", len(js), crc32.Checksum(js, crc32.MakeTable(crc32.Castagnoli)))
		return append(append([]byte(hdr), js...), b[29+n:]...)
	}
}

// dataAt returns where the bytes of the index's first entry start in the
// pack b.
func dataAt(b []byte) int {
	n, _ := strconv.Atoi(string(b[8:19]))
	return 29 + n
}

// TestDamagedLog damages one object of the pack log at a time behind the
// stores' backs, and has a new Store (another process) read every key, Stat
// them and list them: no panic, no wrong byte, every object of an intact pack
// served, and each one the damage may have touched an ErrCorrupt naming the
// damaged object.
func TestDamagedLog(t *testing.T) {
	flipAt := func(off func([]byte) int) func([]byte) []byte {
		return func(b []byte) []byte {
			b = bytes.Clone(b)
			b[off(b)] ^= 0x10
			return b
		}
	}
	// damaged: which keys may no longer be served (by index into the keys
	// of the damaged pack: all of them, or only its first entry).
	const all, first, tombRange = 0, 1, 2
	cases := []struct {
		name    string
		tomb    bool
		damage  func([]byte) []byte
		remove  bool
		touched int
	}{
		{"data bit flipped", false, flipAt(dataAt), false, first},
		{"index offset digit", false, func(b []byte) []byte { return bytes.Replace(b, []byte(`"o":0,`), []byte(`"o":1,`), 1) }, false, all},
		{"index length digit", false, func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"n":1`))
			b = bytes.Clone(b)
			b[i+5]++
			return b
		}, false, all},
		{"header garbage", false, func(b []byte) []byte { return append([]byte("zbpack2 zzzzzzzzzzz"), b[19:]...) }, false, all},
		{"index truncated", false, func(b []byte) []byte { return b[:40] }, false, all},
		{"data truncated", false, func(b []byte) []byte { return b[:dataAt(b)+50] }, false, all},
		{"random bytes", false, func(b []byte) []byte {
			r := rand.New(rand.NewPCG(1, 2))
			out := make([]byte, len(b))
			for i := range out {
				out[i] = byte(r.Uint32())
			}
			return out
		}, false, all},
		{"empty", false, func([]byte) []byte { return nil }, false, all},
		{"null attributes, index checksummed", false, reindex(func(idx map[string]any) {
			idx["entries"].([]any)[0].(map[string]any)["a"] = nil
		}), false, all},
		{"negative offset, index checksummed", false, reindex(func(idx map[string]any) {
			idx["entries"].([]any)[3].(map[string]any)["o"] = -5
		}), false, all},
		{"offset past the data, index checksummed", false, reindex(func(idx map[string]any) {
			idx["entries"].([]any)[3].(map[string]any)["o"] = 1 << 40
		}), false, all},
		{"tombstone garbage", true, func([]byte) []byte { return []byte("{not json") }, false, tombRange},
		{"tombstone key changed", true, func(b []byte) []byte { return bytes.Replace(b, []byte("k/150"), []byte("k/151"), 1) }, false, tombRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hot, cold, model, packs, tomb := packed200(t)
			target := packs[1] // k/050..k/099
			if c.tomb {
				target = tomb
			}
			rewrite(t, cold, target, c.damage)
			// A foreign object under the log's prefix is skipped too.
			if err := blob.Put(ctxT(t), cold, markerPrefix+"log/not-a-log-name", []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: 50, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			touched := func(k string) bool {
				n, _ := strconv.Atoi(k[2:])
				switch c.touched {
				case all:
					return n >= 50 && n < 100
				case first:
					return n == 50
				default:
					return n == 150
				}
			}
			for k, v := range model {
				got, err := blob.ReadAll(ctxT(t), s, k)
				switch {
				case touched(k) && !c.tomb && c.touched == first || touched(k) && c.touched == all:
					if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), target) {
						t.Errorf("read %s in the damaged pack: %d bytes, %v; want ErrCorrupt naming %s", k, len(got), err, target)
					}
				case touched(k):
					if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), target) {
						t.Errorf("read %s in the damaged tombstone's range: %d bytes, %v; want ErrCorrupt naming %s", k, len(got), err, target)
					}
				case err != nil || string(got) != v:
					t.Errorf("read %s, untouched by the damage: %d bytes, %v", k, len(got), err)
				}
			}
			// A damaged tombstone's kill is unknown: its key is an error,
			// never the deleted version read back.
			if _, err := blob.ReadAll(ctxT(t), s, "k/150"); !c.tomb && !errors.Is(err, blob.ErrNotFound) || c.tomb && !errors.Is(err, blob.ErrCorrupt) {
				t.Errorf("read of the deleted k/150: %v", err)
			}
			if _, err := s.Stat(ctxT(t), "k/010"); err != nil {
				t.Errorf("Stat of an intact object: %v", err)
			}
			if _, err := s.List(ctxT(t), &blob.ListOptions{Prefix: "k/"}); err != nil {
				t.Errorf("List: %v", err)
			}
			st := s.Stats()
			if c.name == "data bit flipped" || c.name == "data truncated" {
				// The index verifies: the entries that do not are counted
				// as they are read.
				if len(st.Damaged) != 0 || st.CorruptReads == 0 {
					t.Errorf("Stats.Damaged = %q, CorruptReads = %d; want none, some", st.Damaged, st.CorruptReads)
				}
			} else if !strings.Contains(strings.Join(st.Damaged, " "), target) {
				t.Errorf("Stats.Damaged = %q, want %s", st.Damaged, target)
			} else if out := logs.String(); strings.Count(out, "is damaged") != 1 || !strings.Contains(out, strconv.Quote(target)[1:20]) {
				t.Errorf("want one warning naming the damaged object; logged:\n%s", out)
			}
			if st.Foreign != 1 {
				t.Errorf("Stats.Foreign = %d, want 1", st.Foreign)
			}
			// The compactor goes on: a new object moves.
			mustPut(t, s, "z/new", "fresh")
			if res := s.CompactOnce(ctxT(t)); res.Moved != 1 {
				t.Errorf("pass after the damage: %+v", res)
			}
		})
	}
}

// A pack whose bytes are replaced after a Store cached its index: reads
// through the cached index verify what they serve.
func TestPackDamagedUnderACachedIndex(t *testing.T) {
	hot, cold, model, packs, _ := packed200(t)
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: 50})
	checkModel(t, s, model, []string{"k/150"})
	rewrite(t, cold, packs[2], func(b []byte) []byte {
		b = bytes.Clone(b)
		for i := dataAt(b); i < len(b); i++ {
			b[i] = 'X'
		}
		return b
	})
	for i := 100; i < 150; i++ {
		k := fmt.Sprintf("k/%03d", i)
		got, err := blob.ReadAll(ctxT(t), s, k)
		if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), packs[2]) {
			t.Fatalf("read %s from a pack overwritten under a cached index: %q, %v", k, got, err)
		}
		r, err := s.NewRangeReader(ctxT(t), k, 1, 5)
		if err == nil {
			got, err = readAllClose(r)
		}
		if !errors.Is(err, blob.ErrCorrupt) {
			t.Fatalf("range read %s: %q, %v", k, got, err)
		}
	}
	checkModel(t, s, map[string]string{"k/000": model["k/000"], "k/199": model["k/199"]}, nil)
}

// syncBuffer is a bytes.Buffer for a logger shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func readAllClose(r blob.Reader) ([]byte, error) {
	defer r.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// A negative offset is refused before any read, the read ahead of a packed
// key's cached entry included.
func TestNegativeOffsetOfAPackedKey(t *testing.T) {
	hot, cold, _, _, _ := packed200(t)
	s := manualWith(t, hot, cold, tiered.Options{PackMaxObjects: 50})
	if _, err := blob.ReadAll(ctxT(t), s, "k/010"); err != nil { // caches its pack's index
		t.Fatal(err)
	}
	for _, length := range []int64{-1, 5} {
		if _, err := s.NewRangeReader(ctxT(t), "k/010", -1, length); !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("NewRangeReader(-1, %d) of a packed key: %v, want ErrInvalidArgument", length, err)
		}
	}
}

// TestLostLogObject deletes a pack, or a tombstone, behind the compactor's
// back. The log's inventory names it: a new Store (another process) and one
// that had it loaded fail the reads of the keys it may hold with ErrCorrupt
// naming it, rather than serving them as absent or a deleted version as
// current; the others are served. Put back, it is read again; forgotten, its
// keys read as absent in every process.
func TestLostLogObject(t *testing.T) {
	for _, c := range []struct {
		name string
		tomb bool
	}{{"pack", false}, {"tombstone", true}} {
		t.Run(c.name, func(t *testing.T) {
			hot, cold, model, packs, tomb := packed200(t)
			// A log window (two MoveTimeouts and the skew) short enough for
			// the log objects to be judged by the inventory within the test:
			// younger ones may still be landing, and are not.
			opts := tiered.Options{PackMaxObjects: 50, MoveTimeout: 100 * time.Millisecond, MaxClockSkew: time.Millisecond}
			time.Sleep(2*opts.MoveTimeout + opts.MaxClockSkew)
			target, lo, hi := packs[1], 50, 99
			if c.tomb {
				target, lo, hi = tomb, 150, 150
			}
			touched := func(k string) bool {
				n, _ := strconv.Atoi(k[2:])
				return n >= lo && n <= hi
			}
			before := manualWith(t, hot, cold, opts)
			checkModel(t, before, model, []string{"k/150"}) // loads every index
			saved, err := blob.ReadAll(ctxT(t), cold, target)
			if err != nil {
				t.Fatal(err)
			}
			if err := cold.Delete(ctxT(t), target, nil); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			lopts := opts
			lopts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			after := manualWith(t, hot, cold, lopts)
			// The Store from before learns of it at its next full refresh:
			// a pass, or a read that finds the pack gone.
			if !c.tomb {
				if _, err := blob.ReadAll(ctxT(t), before, "k/060"); !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), target) {
					t.Errorf("the earlier Store's read of k/060 from the lost pack: %v; want ErrCorrupt naming %s", err, target)
				}
			}
			if res := before.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Fatalf("pass after the loss: %+v", res)
			}
			for _, s := range []*tiered.Store{after, before} {
				for i := range 200 {
					k := fmt.Sprintf("k/%03d", i)
					got, err := blob.ReadAll(ctxT(t), s, k)
					_, serr := s.Stat(ctxT(t), k)
					switch {
					case touched(k):
						if !errors.Is(err, blob.ErrCorrupt) || !strings.Contains(err.Error(), target) || !errors.Is(serr, blob.ErrCorrupt) {
							t.Errorf("read %s of the lost object: %d bytes, %v (Stat: %v); want ErrCorrupt naming %s", k, len(got), err, serr, target)
						}
					case k == "k/150":
						if !errors.Is(err, blob.ErrNotFound) {
							t.Errorf("read of the deleted %s: %v", k, err)
						}
					case err != nil || string(got) != model[k] || serr != nil:
						t.Errorf("read %s, untouched by the loss: %d bytes, %v (Stat: %v)", k, len(got), err, serr)
					}
				}
				if st := s.Stats(); !slices.Equal(st.Damaged, []string{target}) {
					t.Errorf("Stats.Damaged = %q, want %s", st.Damaged, target)
				}
			}
			if out := logs.String(); !strings.Contains(out, "is missing") {
				t.Errorf("want an error logged naming the lost object; logged:\n%s", out)
			}
			// Maintenance keeps it named: a third process sees it too.
			if res := after.CompactOnce(ctxT(t)); res.Failed != 0 {
				t.Fatalf("pass: %+v", res)
			}
			if st := manualWith(t, hot, cold, opts).Stats(); len(st.Damaged) != 0 {
				t.Errorf("a Store that has not refreshed yet names %q", st.Damaged)
			}
			third := manualWith(t, hot, cold, opts)
			if _, err := blob.ReadAll(ctxT(t), third, fmt.Sprintf("k/%03d", lo)); !errors.Is(err, blob.ErrCorrupt) {
				t.Errorf("a third process's read after maintenance: %v", err)
			}

			// Put back, it is served again.
			if err := blob.Put(ctxT(t), cold, target, saved, nil); err != nil {
				t.Fatal(err)
			}
			restored := manualWith(t, hot, cold, opts)
			checkModel(t, restored, model, []string{"k/150"})
			if st := restored.Stats(); len(st.Damaged) != 0 {
				t.Errorf("after the object was put back, Stats.Damaged = %q", st.Damaged)
			}

			// Lost again and forgotten: its keys are gone everywhere, the
			// rest served.
			if err := cold.Delete(ctxT(t), target, nil); err != nil {
				t.Fatal(err)
			}
			if err := after.Forget(ctxT(t), "not-a-log-name"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Forget of a name that is not lost: %v", err)
			}
			if err := after.Forget(ctxT(t), target); err != nil {
				t.Fatal(err)
			}
			fresh := manualWith(t, hot, cold, opts)
			for k, v := range model {
				got, err := blob.ReadAll(ctxT(t), fresh, k)
				switch {
				case touched(k) && c.tomb:
					// The tombstone's kill is forgotten with it: the
					// deleted version may read again. (k/150 is not in the
					// model; nothing else is touched.)
				case touched(k):
					if !errors.Is(err, blob.ErrNotFound) {
						t.Errorf("read %s of the forgotten pack: %v", k, err)
					}
				case err != nil || string(got) != v:
					t.Errorf("read %s after Forget: %d bytes, %v", k, len(got), err)
				}
			}
			for _, s := range []*tiered.Store{fresh, after} {
				if st := s.Stats(); len(st.Damaged) != 0 {
					t.Errorf("after Forget, Stats.Damaged = %q", st.Damaged)
				}
			}
		})
	}
}

// A pack another process commits, and records in the inventory, between a
// full refresh's listing of the log and its read of the inventory is not
// taken for lost, not even for a moment: the inventory names it, the
// listing could not.
func TestPackCommittedBetweenListingAndInventory(t *testing.T) {
	hot, cold := memPair(t)
	opts := tiered.Options{PackMaxObjects: 50}
	other := manualWith(t, hot, cold, opts)
	mustPut(t, other, "a/1", "one")
	if res := other.CompactOnce(ctxT(t)); res.Moved != 1 {
		t.Fatalf("pass: %+v", res)
	}
	armed := true
	h := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if step == "cold:stat" && key == markerPrefix+"inventory" && armed {
			// This Store has listed the log; before it reads the
			// inventory, the other commits a pack and records it.
			armed = false
			mustPut(t, other, "b/1", "two")
			if res := other.CompactOnce(ctxT(t)); res.Moved != 1 {
				t.Errorf("the other process's pass: %+v", res)
			}
		}
	}}
	var logs syncBuffer
	sopts := opts
	sopts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := manualWith(t, hot, h, sopts)
	checkModel(t, s, map[string]string{"a/1": "one", "b/1": "two"}, nil)
	if armed {
		t.Fatal("the interleaving was not forced")
	}
	if out := logs.String(); strings.Contains(out, "missing") {
		t.Errorf("a pack committed meanwhile was taken for lost:\n%s", out)
	}
	if st := s.Stats(); len(st.Damaged) != 0 {
		t.Errorf("Stats.Damaged = %q: a pack committed meanwhile taken for lost", st.Damaged)
	}
}
