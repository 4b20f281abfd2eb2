package tiered

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// batchPrefix starts the names of a pack move's marker in cold.
const batchPrefix = markerPrefix + "batch/"

// batchMarker is a pack move's durable intent, written to cold before the
// move looks at its objects and deleted when it ends. It lives in cold, not
// in hot: one regional write (deletes are free) instead of a write on every
// hot replica and, over a quorum, a tombstone written to remove it. A user's
// Delete never removes a version from hot in a Store that packs: it writes a
// grave over it, on condition of its generation, which the move's own
// conditional removal from hot then meets.
type batchMarker struct {
	Pack string `json:"pack"`
	// Items are the keys and the generations they had before the marker was
	// written: the move packs a key only if it still has that generation
	// after (its Stat, step 3).
	Items []kill    `json:"items"`
	Owner string    `json:"owner"`
	Time  time.Time `json:"time"`
	// Packed is set, over a hot store that retires (see retirer), once the
	// pack was committed in time and before any of its objects is retired:
	// recovery then retires them again, and the marker stays until every
	// replica answered.
	Packed bool `json:"packed,omitempty"`
}

func batchMarkerKey(pack string) string {
	return batchPrefix + strings.TrimPrefix(pack, logPrefix)
}

// packing reports whether moves go into packs.
func (s *Store) packing() bool { return s.opts.PackMaxObjects > 0 }

type packItem struct {
	obj   blob.ListObject
	attrs *blob.Attributes
	data  []byte
	hold  blob.Holding // over a retirer: the survey that read it
	stale bool         // over a retirer: a version the pack log knows already
}

// movePack moves objs (hot objects older than After, each at most
// PackMaxBytes, together at most PackMaxObjects and about PackMaxBytes) into
// one pack. The steps, and what a crash or a user does between them:
//
//  1. Take each key's lock (busy keys are left for the next pass) and
//     finalize where hot needs it.
//  2. Write one marker (cold, IfNotExist) naming the pack and each key with
//     the generation the listing gave (or a Stat, where it gave none).
//  3. Stat and read each object: it is packed only if its generation g is
//     still the marker's; its attributes and bytes (which must match the
//     Stat's size and MD5).
//  4. Bring the catalog up to date: older versions of the keys that packs
//     still serve are recorded in the new pack as killed.
//  5. Write the pack (cold, IfNotExist) and Stat it; it must have been
//     committed within half the log window of its name's time, so every
//     reader's refresh finds it.
//  6. Wait until hotDeleteDelay has passed since the pack was committed,
//     then delete each key from hot if it is still generation g.
//  7. Delete the marker.
//
// A crash before 6 leaves the objects in hot, where they shadow the pack's
// copies (the same versions); a crash after some of 6 leaves those moved.
// An overwrite in hot makes 6 fail for that key: the newer version shadows
// the pack's, and whatever later removes it from hot kills the pack's first
// (a move of it supersedes older versions; a Delete kills the versions
// packs serve, and, while the move is in flight, finds g in its marker
// before it deletes the newer version). A Delete of g itself makes 6 fail
// too, and the user, who deleted g after the marker was written (3 comes
// after 2), finds g in the marker. No step removes anything a reader could
// need.
func (s *Store) movePack(ctx context.Context, objs []blob.ListObject) (moved int, size int64, err error) {
	mv := &packMove{s: s}
	defer mv.release()
	if !mv.lock(objs) {
		return 0, 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()
	if err := mv.finalize(ctx); err != nil {
		return 0, 0, err
	}
	if err := mv.mark(ctx); err != nil {
		return 0, 0, err
	}
	if err := mv.read(ctx); err != nil || len(mv.keep) == 0 {
		return mv.end(ctx, err)
	}
	if err := mv.index(ctx); err != nil {
		return mv.end(ctx, err)
	}
	if err := mv.write(ctx); err != nil {
		return mv.end(ctx, err)
	}
	if err := mv.markPacked(ctx); err != nil {
		return mv.end(ctx, err)
	}
	err = mv.removeFromHot(ctx)
	if s.ret != nil {
		// The marker stays, and with it what the log knows of these
		// versions, until a later retirement confirms every copy is gone
		// (recoverBatch).
		return mv.moved, mv.size, err
	}
	return mv.end(ctx, err)
}

// packMove is one pack move: movePack's steps, one method each, in order.
type packMove struct {
	s       *Store
	unlocks []func()
	held    []blob.ListObject // the objects whose keys it locked
	chosen  time.Time         // when the pack's name was chosen
	name    string            // the pack's name in the log
	marker  batchMarker
	mk      string // the marker's key in cold; "" until it is written
	keep    []*packItem
	idx     *packIndex
	data    bytes.Buffer
	moved   int
	size    int64
}

// lock takes each key's lock; busy keys are left for the next pass. It
// reports whether any key is held.
func (mv *packMove) lock(objs []blob.ListObject) bool {
	for _, o := range objs {
		unlock, ok := mv.s.locks.tryLock(o.Key)
		if !ok {
			mv.s.stats.busy.Add(1)
			continue
		}
		mv.unlocks = append(mv.unlocks, unlock)
		mv.held = append(mv.held, o)
	}
	return len(mv.held) > 0
}

// release undoes what the move holds in this process: the keys' locks and
// the batch it announced as active.
func (mv *packMove) release() {
	if mv.mk != "" {
		mv.s.batchMu.Lock()
		delete(mv.s.batches, mv.mk)
		mv.s.batchMu.Unlock()
	}
	for i := len(mv.unlocks) - 1; i >= 0; i-- {
		mv.unlocks[i]()
	}
}

// finalize seals each object where hot needs it (1); an object gone
// meanwhile is left out.
func (mv *packMove) finalize(ctx context.Context) error {
	s := mv.s
	if !blob.CapabilitiesOf(s.hot).Finalize {
		return nil
	}
	kept := mv.held[:0]
	for _, o := range mv.held {
		if err := blob.Finalize(ctx, s.hot, o.Key); errors.Is(err, blob.ErrNotFound) {
			continue
		} else if err != nil {
			return fmt.Errorf("tiered: finalize %q: %w", o.Key, err)
		}
		kept = append(kept, o)
	}
	mv.held = kept
	return nil
}

// mark writes the move's marker (2), naming the pack and each key with the
// generation the listing gave (or a Stat, where it gave none).
func (mv *packMove) mark(ctx context.Context) error {
	s := mv.s
	mv.chosen = s.logNow()
	mv.name = logName(kindPack, mv.chosen)
	mv.marker = batchMarker{Pack: mv.name, Owner: s.opts.Owner, Time: time.Now()}
	if err := s.fillGenerations(ctx, mv.held); err != nil {
		return err
	}
	for _, o := range mv.held {
		if o.Generation != "" {
			mv.marker.Items = append(mv.marker.Items, kill{Key: o.Key, Gen: o.Generation})
		}
	}
	mb, _ := json.Marshal(mv.marker)
	mv.mk = batchMarkerKey(mv.name)
	s.batchMu.Lock()
	s.batches[mv.mk] = true
	s.batchMu.Unlock()
	if err := s.fence(ctx); err != nil {
		return err
	}
	if err := blob.Put(ctx, s.cold, mv.mk, mb, &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/json"}); err != nil {
		return err
	}
	return nil
}

// end drops the marker (7) and returns what the move did, with err.
func (mv *packMove) end(ctx context.Context, err error) (int, int64, error) {
	if rerr := mv.s.dropBatchMarker(ctx, mv.mk); rerr != nil && err == nil {
		err = rerr
	}
	return mv.moved, mv.size, err
}

// read Stats and reads each object (3), Concurrency at a time: it is
// packed only if its generation is still the marker's.
func (mv *packMove) read(ctx context.Context) error {
	s := mv.s
	items := make([]*packItem, len(mv.held))
	var mu sync.Mutex
	var firstErr error
	parallel.Do(len(mv.held), s.opts.Concurrency, func(i int) {
		it, err := s.readForPack(ctx, mv.held[i])
		if err != nil {
			mu.Lock()
			firstErr = cmpErr(firstErr, err)
			mu.Unlock()
			return
		}
		items[i] = it
	})
	if firstErr != nil {
		return firstErr
	}
	for _, it := range items {
		if it != nil {
			mv.keep = append(mv.keep, it)
		}
	}
	return nil
}

// index builds the pack's index and data (4) from a catalog brought up to
// date after the Stats: a version of one of these keys that a pack serves
// was moved before the one read here was written, so its pack is committed
// and listed by now, and the new pack records it as killed.
func (mv *packMove) index(ctx context.Context) error {
	s := mv.s
	if err := s.cat.sync(ctx, time.Now()); err != nil {
		return err
	}
	mv.idx = &packIndex{}
	for _, it := range mv.keep {
		if s.ret != nil {
			// Over a retirer, a version packed and killed since, or one
			// older than a version a pack holds, is only retired (a copy a
			// retirement left). One a pack serves already is packed again:
			// that pack may be one committed too late for every reader to
			// find.
			p, err := s.cat.packedAs(ctx, it.obj.Key, it.attrs.Generation)
			if err != nil {
				return err
			}
			it.stale = p.dead()
			if it.stale {
				continue
			}
		}
		a := *it.attrs
		mv.idx.Entries = append(mv.idx.Entries, packEntry{Key: a.Key, Off: int64(mv.data.Len()), Len: int64(len(it.data)), Attrs: &a})
		mv.data.Write(it.data)
		live, err := s.cat.live(ctx, a.Key)
		if err != nil {
			return err
		}
		for _, k := range live {
			if k.Gen != a.Generation {
				mv.idx.Kills = append(mv.idx.Kills, k)
			}
		}
	}
	return nil
}

// write writes the pack (5, writePack), if it holds anything, and waits
// until hotDeleteDelay has passed since it was committed: a reader whose hot
// lookup takes less than that lists the log alongside the removals from hot
// that follow.
func (mv *packMove) write(ctx context.Context) error {
	s := mv.s
	if len(mv.idx.Entries) == 0 {
		return nil
	}
	committed, err := s.writePack(ctx, mv.chosen, mv.name, mv.idx, mv.data.Bytes())
	if err != nil {
		return err
	}
	return latency.Sleep(ctx, s.hotDeleteDelay()-time.Since(committed))
}

// markPacked, over a retirer, rewrites the marker as packed, naming what
// was packed or stale: recovery retires those from now on.
func (mv *packMove) markPacked(ctx context.Context) error {
	s := mv.s
	if s.ret == nil {
		return nil
	}
	mv.marker.Packed, mv.marker.Items = true, nil
	for _, it := range mv.keep {
		mv.marker.Items = append(mv.marker.Items, kill{Key: it.obj.Key, Gen: it.attrs.Generation})
	}
	mb, _ := json.Marshal(mv.marker)
	if err := s.fence(ctx); err != nil {
		return err
	}
	return blob.Put(ctx, s.cold, mv.mk, mb, &blob.WriterOptions{ContentType: "application/json"})
}

// removeFromHot removes each object from hot (6) if it is still the
// generation packed (removeMoved), Concurrency at a time, and counts what
// moved.
func (mv *packMove) removeFromHot(ctx context.Context) error {
	s := mv.s
	var mu sync.Mutex
	var firstErr error
	parallel.Do(len(mv.keep), s.opts.Concurrency, func(i int) {
		it := mv.keep[i]
		gone, err := s.removeMoved(ctx, it)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil && gone:
			mv.moved++
			mv.size += it.attrs.Size
		case err == nil:
			// Overwritten (hot shadows the copy) or deleted by a user
			// (who kills the copy through the marker).
			s.stats.conflicts.Add(1)
		case s.ret != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			// A replica did not answer: recovery retires it again.
			s.stats.unretired.Add(1)
		default:
			firstErr = cmpErr(firstErr, err)
		}
	})
	s.stats.moved.Add(int64(mv.moved))
	s.stats.bytes.Add(mv.size)
	return firstErr
}

// writePack writes a pack, verifies it, checks it was committed in time for
// every reader's refresh to find it, and adds it to the catalog. It returns
// when it was committed.
func (s *Store) writePack(ctx context.Context, chosen time.Time, name string, idx *packIndex, data []byte) (time.Time, error) {
	body, err := encodePack(idx, data)
	if err != nil {
		return time.Time{}, err
	}

	// 5. The pack, verified, in time.
	if err := s.fence(ctx); err != nil {
		return time.Time{}, err
	}
	if err := blob.Put(ctx, s.cold, name, body, &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/octet-stream", Metadata: logMetadata(indexKeys(idx))}); err != nil {
		return time.Time{}, err
	}
	committed := time.Now()
	pa, err := s.cold.Stat(ctx, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("tiered: verify pack: %w", err)
	}
	if pa.Size != int64(len(body)) {
		return time.Time{}, fmt.Errorf("tiered: verify pack: size %d, wrote %d", pa.Size, len(body))
	}
	if time.Since(chosen) >= s.cat.window()/2 {
		// Readers might not find it: the objects stay in hot, whose versions
		// the pack's copies duplicate (a later rewrite drops the copies).
		return time.Time{}, fmt.Errorf("tiered: pack %s took %v, more than half the log window", name, time.Since(chosen))
	}
	lp, err := readPackIndex(ctx, s.cold, name)
	if err != nil {
		return time.Time{}, err
	}
	s.cat.addPack(lp)
	s.stats.packs.Add(1)
	return committed, nil
}

// removeMoved removes a packed object's version from hot: a conditional
// delete, or over a retirer a retirement of it and every older copy. It
// reports whether the version left hot (false: a newer one, or none, was
// there).
func (s *Store) removeMoved(ctx context.Context, it *packItem) (bool, error) {
	if s.ret == nil {
		if err := s.fence(ctx); err != nil {
			return false, err
		}
		err := s.hot.Delete(ctx, it.obj.Key, &blob.DeleteOptions{If: blob.IfGenerationMatch(it.attrs.Generation)})
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if t, ok := s.ret.GenerationTime(it.attrs.Generation); ok && time.Since(t) < s.ret.InFlightBound()+s.opts.MaxClockSkew {
		// An operation that wrote this version, or an older one, may still
		// be retrying: it learns whether it took effect from the chain of
		// versions the replicas keep, which a retirement deletes, and would
		// take effect again. Recovery retires it once that cannot be (After
		// is that much longer in any deployment; tests move at once).
		return false, errTooYoung
	}
	if err := s.fence(ctx); err != nil {
		return false, err
	}
	res, err := s.ret.Retire(ctx, it.hold, it.attrs.Generation)
	s.stats.retired.Add(int64(res.Deleted))
	return !res.Newer, err
}

// errTooYoung: a version is too young to retire yet (see removeMoved).
var errTooYoung = errors.New("tiered: version too young to retire")

// fillGenerations Stats, Concurrency at a time, the objects whose listing
// gave no generation (mem and quorum listings do not); one gone since it was
// listed keeps none, and is not moved.
func (s *Store) fillGenerations(ctx context.Context, objs []blob.ListObject) error {
	var missing []int
	for i := range objs {
		if objs[i].Generation == "" {
			missing = append(missing, i)
		}
	}
	var mu sync.Mutex
	var first error
	parallel.Do(len(missing), s.opts.Concurrency, func(j int) {
		i := missing[j]
		sctx := ctx
		if s.ret != nil {
			// The survey after the marker checks it against a majority.
			sctx = blob.WithFastestRead(ctx)
		}
		a, err := s.hot.Stat(sctx, objs[i].Key)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			objs[i].Generation = a.Generation
		case !errors.Is(err, blob.ErrNotFound):
			first = cmpErr(first, err)
		}
	})
	return first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// readForPack Stats and reads one object for a pack; nil if it changed or
// went since it was listed.
func (s *Store) readForPack(ctx context.Context, o blob.ListObject) (*packItem, error) {
	if s.ret != nil {
		return s.readHeld(ctx, o)
	}
	a, err := s.hot.Stat(ctx, o.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if a.Generation != o.Generation || time.Now().Sub(a.ModTime) < s.opts.After || a.Size > s.opts.PackMaxBytes || isGrave(a) {
		return nil, nil // changed since the marker named it
	}
	if a.Generation == "" {
		return nil, fmt.Errorf("tiered: hot store gives no generation for %q: cannot move it safely", o.Key)
	}
	r, err := s.hot.NewRangeReader(ctx, o.Key, 0, -1)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer r.Close()
	if g := r.Attributes().Generation; g != "" && g != a.Generation {
		return nil, nil
	}
	b, err := io.ReadAll(r)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if !readAsStated(b, a) {
		return nil, nil // a newer version was read
	}
	return &packItem{obj: o, attrs: a, data: b}, nil
}

// readAsStated reports whether bytes read are those of the version a Stat
// described: its size, and its MD5 where it has one.
func readAsStated(b []byte, a *blob.Attributes) bool {
	if int64(len(b)) != a.Size {
		return false
	}
	if len(a.MD5) > 0 {
		if sum := md5.Sum(b); !bytes.Equal(sum[:], a.MD5) {
			return false
		}
	}
	return true
}

// readHeld is readForPack over a retirer: a survey of every replica (what
// the retirement needs) in place of the Stat, and the value read from one
// replica that holds the version surveyed.
func (s *Store) readHeld(ctx context.Context, o blob.ListObject) (*packItem, error) {
	h, err := s.ret.Survey(ctx, o.Key)
	if err != nil {
		return nil, err
	}
	a := h.Attributes()
	if a == nil || a.Generation != o.Generation || time.Now().Sub(a.ModTime) < s.opts.After || a.Size > s.opts.PackMaxBytes || isGrave(a) {
		return nil, nil // changed since the marker named it
	}
	b, err := s.ret.ReadHeld(ctx, h)
	if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if !readAsStated(b, a) {
		return nil, nil
	}
	return &packItem{obj: o, attrs: a, data: b, hold: h}, nil
}

// killPacked kills every version of key that packs serve, after bringing
// the catalog up to date; it reports whether there was one.
func (s *Store) killPacked(ctx context.Context, key string) (bool, error) {
	live, err := s.livePacked(ctx, key)
	if err != nil {
		return false, err
	}
	return len(live) > 0, s.writeTombstone(ctx, live)
}

// livePacked returns the versions of key that packs serve, with the catalog
// brought up to date first (none when not packing).
func (s *Store) livePacked(ctx context.Context, key string) ([]kill, error) {
	if !s.packing() {
		return nil, nil
	}
	if err := s.cat.sync(ctx, time.Now()); err != nil {
		return nil, err
	}
	return s.cat.live(ctx, key)
}
