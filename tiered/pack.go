package tiered

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/parallel"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
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
	Items []packlog.Version `json:"items"`
	Owner string            `json:"owner"`
	Time  time.Time         `json:"time"`
	// Packed is set, over a hot store that retires (see retirer), once the
	// pack was committed in time and before any of its objects is retired:
	// recovery then retires them again, and the marker stays until every
	// replica answered.
	Packed bool `json:"packed,omitempty"`
}

func batchMarkerKey(pack string) string {
	return batchPrefix + strings.TrimPrefix(pack, packlog.Prefix)
}

type packItem struct {
	obj   blob.ListObject
	attrs *blob.Attributes
	data  []byte       // nil in a streamed pack (see packMove.streamed)
	crc   uint32       // of the version's bytes, in a streamed pack
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
//
// An object larger than PackMaxBytes is a pack of its own, whose bytes are
// streamed from hot to cold rather than held (see packMove.streamed).
func (s *Store) movePack(ctx context.Context, objs []blob.ListObject) (moveCounts, error) {
	mv := &packMove{s: s, streamed: len(objs) == 1 && objs[0].Size > s.opts.PackMaxBytes}
	defer mv.release()
	if !mv.lock(objs) {
		return mv.moveCounts, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()
	if err := mv.finalize(ctx); err != nil {
		return mv.moveCounts, err
	}
	if err := mv.mark(ctx); err != nil {
		return mv.moveCounts, err
	}
	if err := mv.read(ctx); err != nil || len(mv.keep) == 0 {
		return mv.end(ctx, err)
	}
	if err := mv.index(ctx); err != nil {
		return mv.end(ctx, err)
	}
	if err := mv.write(ctx); err != nil || len(mv.keep) == 0 {
		return mv.end(ctx, err)
	}
	if err := mv.markPacked(ctx); err != nil {
		return mv.end(ctx, err)
	}
	err := mv.removeFromHot(ctx)
	if s.retirer != nil {
		// The marker stays, and with it what the log knows of these
		// versions, until a later retirement confirms every copy is gone
		// (recoverBatch).
		return mv.moveCounts, err
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
	idx     *packlog.Index
	data    bytes.Buffer
	moveCounts
	// streamed is set for a pack of one object larger than PackMaxBytes:
	// its bytes are read from hot twice, never held. The first read (3)
	// checks them against the Stat and sums them for the index, which
	// precedes the data; the second (5) is copied into the pack, which is
	// not committed unless those bytes sum the same.
	streamed bool
}

// lock takes each key's lock; busy keys are left for the next pass. It
// reports whether any key is held.
func (mv *packMove) lock(objs []blob.ListObject) bool {
	for _, o := range objs {
		unlock, ok := mv.s.locks.tryLock(o.Key)
		if !ok {
			mv.s.stats.busy.Add(1)
			mv.busy++
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
	mv.name = packlog.NewName(packlog.KindPack, mv.chosen)
	mv.marker = batchMarker{Pack: mv.name, Owner: s.opts.Owner, Time: time.Now()}
	if err := s.fillGenerations(ctx, mv.held); err != nil {
		return err
	}
	for _, o := range mv.held {
		if o.Generation != "" {
			mv.marker.Items = append(mv.marker.Items, packlog.Version{Key: o.Key, Gen: o.Generation})
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

// moveCounts is what a move did, for its pass's result.
type moveCounts struct {
	moved     int   // objects that left hot for the pack
	size      int64 // their bytes
	conflicts int   // objects changed or deleted by a user meanwhile
	busy      int   // objects whose keys were locked in this process
}

// end drops the marker (7) and returns what the move did, with err.
func (mv *packMove) end(ctx context.Context, err error) (moveCounts, error) {
	if rerr := mv.s.dropBatchMarker(ctx, mv.mk); rerr != nil && err == nil {
		err = rerr
	}
	return mv.moveCounts, err
}

// read Stats and reads each object (3), Concurrency at a time: it is
// packed only if its generation is still the marker's.
func (mv *packMove) read(ctx context.Context) error {
	s := mv.s
	items := make([]*packItem, len(mv.held))
	var mu sync.Mutex
	var firstErr error
	parallel.Do(len(mv.held), s.opts.Concurrency, func(i int) {
		it, err := s.readForPack(ctx, mv.held[i], mv.streamed)
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
	if err := s.catalog.Sync(ctx, time.Now()); err != nil {
		return err
	}
	mv.idx = &packlog.Index{}
	for _, it := range mv.keep {
		if s.retirer != nil {
			// Over a retirer, a version packed and killed since, or one
			// older than a version a pack holds, is only retired (a copy a
			// retirement left). One a pack serves already is packed again:
			// that pack may be one committed too late for every reader to
			// find.
			p, err := s.catalog.PackedAs(ctx, it.obj.Key, it.attrs.Generation)
			if err != nil {
				return err
			}
			it.stale = p.Dead()
			if it.stale {
				continue
			}
		}
		a := *it.attrs
		e := packlog.Entry{Key: a.Key, Off: int64(mv.data.Len()), Len: int64(len(it.data)), Attrs: &a, CRC: crc32.Checksum(it.data, packlog.Castagnoli)}
		if mv.streamed {
			e.Len, e.CRC = a.Size, it.crc
		}
		mv.idx.Entries = append(mv.idx.Entries, e)
		mv.idx.DataBytes += e.Len
		mv.data.Write(it.data)
		live, err := s.catalog.Live(ctx, a.Key)
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
// that follow. A streamed pack whose object changed since it was summed is
// not written, and the move keeps nothing.
func (mv *packMove) write(ctx context.Context) error {
	s := mv.s
	if len(mv.idx.Entries) == 0 {
		return nil
	}
	var data io.Reader = &mv.data
	if mv.streamed {
		it := mv.keep[0]
		r, err := s.openVersion(ctx, it.obj.Key, it.attrs)
		if err != nil {
			return mv.changed(err)
		}
		defer r.Close()
		data = &sameBytes{r: r, size: it.attrs.Size, crc: it.crc}
	}
	committed, err := s.writePack(ctx, mv.chosen, mv.name, mv.idx, data)
	if err != nil {
		return mv.changed(err)
	}
	return latency.Sleep(ctx, s.hotDeleteDelay()-time.Since(committed))
}

// changed returns err, or, if err says the streamed object changed between
// its two reads, nil and a move that keeps nothing.
func (mv *packMove) changed(err error) error {
	if !errors.Is(err, errVersionChanged) {
		return err
	}
	mv.s.stats.conflicts.Add(1)
	mv.conflicts++
	mv.keep = nil
	return nil
}

// markPacked, over a retirer, rewrites the marker as packed, naming what
// was packed or stale: recovery retires those from now on.
func (mv *packMove) markPacked(ctx context.Context) error {
	s := mv.s
	if s.retirer == nil {
		return nil
	}
	mv.marker.Packed, mv.marker.Items = true, nil
	for _, it := range mv.keep {
		mv.marker.Items = append(mv.marker.Items, packlog.Version{Key: it.obj.Key, Gen: it.attrs.Generation})
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
			mv.conflicts++
		case s.retirer != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
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

// writePack writes a pack (its head from idx, then data), verifies it,
// checks it was committed in time for every reader's refresh to find it,
// and adds it to the catalog. It returns when it was committed. A failed
// read of data commits nothing.
func (s *Store) writePack(ctx context.Context, chosen time.Time, name string, idx *packlog.Index, data io.Reader) (time.Time, error) {
	head, err := packlog.Head(idx)
	if err != nil {
		return time.Time{}, err
	}

	// 5. The pack, verified, in time.
	if err := s.fence(ctx); err != nil {
		return time.Time{}, err
	}
	wo := &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/octet-stream", Metadata: packlog.Metadata(idx.Keys())}
	if err := blob.WriteFrom(ctx, s.cold, name, io.MultiReader(bytes.NewReader(head), data), wo); err != nil {
		return time.Time{}, err
	}
	committed := time.Now()
	pa, err := s.cold.Stat(ctx, name)
	if err != nil {
		return time.Time{}, fmt.Errorf("tiered: verify pack: %w", err)
	}
	if want := int64(len(head)) + idx.DataBytes; pa.Size != want {
		return time.Time{}, fmt.Errorf("tiered: verify pack: size %d, wrote %d", pa.Size, want)
	}
	if time.Since(chosen) >= s.catalog.Window()/2 {
		// Readers might not find it: the objects stay in hot, whose versions
		// the pack's copies duplicate (a later rewrite drops the copies).
		return time.Time{}, fmt.Errorf("tiered: pack %s took %v, more than half the log window", name, time.Since(chosen))
	}
	lp, err := packlog.ReadIndex(ctx, s.cold, name)
	if err != nil {
		return time.Time{}, err
	}
	s.catalog.AddPack(lp)
	s.stats.packs.Add(1)
	return committed, nil
}

// removeMoved removes a packed object's version from hot: a conditional
// delete, or over a retirer a retirement of it and every older copy. It
// reports whether the version left hot (false: a newer one, or none, was
// there).
func (s *Store) removeMoved(ctx context.Context, it *packItem) (bool, error) {
	if s.retirer == nil {
		if err := s.fence(ctx); err != nil {
			return false, err
		}
		err := s.hot.Delete(ctx, it.obj.Key, &blob.DeleteOptions{If: blob.IfGenerationMatch(it.attrs.Generation)})
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if t, ok := s.retirer.GenerationTime(it.attrs.Generation); ok && time.Since(t) < s.retirer.InFlightBound()+s.opts.MaxClockSkew {
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
	res, err := s.retirer.Retire(ctx, it.hold, it.attrs.Generation)
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
		if s.retirer != nil {
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
// went since it was listed. In a streamed pack it reads the object only to
// check and sum it (sumVersion).
func (s *Store) readForPack(ctx context.Context, o blob.ListObject, streamed bool) (*packItem, error) {
	it, err := s.statForPack(ctx, o, streamed)
	if it == nil || err != nil {
		return nil, err
	}
	if streamed {
		it.crc, err = s.sumVersion(ctx, o.Key, it.attrs)
	} else if s.retirer != nil {
		it.data, err = s.retirer.ReadHeld(ctx, it.hold)
		if errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound) {
			err = errVersionChanged
		} else if err == nil && !readAsStated(it.data, it.attrs) {
			err = errVersionChanged
		}
	} else {
		it.data, err = s.readVersion(ctx, o.Key, it.attrs)
	}
	if errors.Is(err, errVersionChanged) {
		return nil, nil
	}
	return it, err
}

// statForPack is readForPack's Stat: over a retirer, a survey of every
// replica (what the retirement needs), whose holding the item keeps. It
// returns nil if the object is not the version the marker named, not old
// enough, a grave, or (unless streamed) larger than PackMaxBytes.
func (s *Store) statForPack(ctx context.Context, o blob.ListObject, streamed bool) (*packItem, error) {
	it := &packItem{obj: o}
	var err error
	if s.retirer != nil {
		if it.hold, err = s.retirer.Survey(ctx, o.Key); err != nil {
			return nil, err
		}
		it.attrs = it.hold.Attributes()
	} else if it.attrs, err = s.hot.Stat(ctx, o.Key); errors.Is(err, blob.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	a := it.attrs
	if a == nil || a.Generation != o.Generation || time.Now().Sub(a.ModTime) < s.opts.After || !streamed && a.Size > s.opts.PackMaxBytes || isGrave(a) {
		return nil, nil // changed since the marker named it
	}
	if a.Generation == "" {
		return nil, fmt.Errorf("tiered: hot store gives no generation for %q: cannot move it safely", o.Key)
	}
	return it, nil
}

// errVersionChanged: hot no longer holds the version a move read.
var errVersionChanged = errors.New("tiered: hot object changed during the move")

// openVersion opens hot's object key if it is still the version a
// describes (as far as the reader tells: the bytes are checked after);
// errVersionChanged otherwise.
func (s *Store) openVersion(ctx context.Context, key string, a *blob.Attributes) (blob.Reader, error) {
	r, err := s.hot.NewRangeReader(ctx, key, 0, -1)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, errVersionChanged
	} else if err != nil {
		return nil, err
	}
	if g := r.Attributes().Generation; g != "" && g != a.Generation {
		r.Close()
		return nil, errVersionChanged
	}
	return r, nil
}

// readVersion reads the version a describes from hot.
func (s *Store) readVersion(ctx context.Context, key string, a *blob.Attributes) ([]byte, error) {
	r, err := s.openVersion(ctx, key, a)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, errVersionChanged
	} else if err != nil {
		return nil, err
	}
	if !readAsStated(b, a) {
		return nil, errVersionChanged // a newer version was read
	}
	return b, nil
}

// sumVersion reads the version a describes from hot without keeping it,
// and returns the CRC32C of its bytes once their size and MD5 match a's.
func (s *Store) sumVersion(ctx context.Context, key string, a *blob.Attributes) (uint32, error) {
	r, err := s.openVersion(ctx, key, a)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	c, m := crc32.New(packlog.Castagnoli), md5.New()
	n, err := io.Copy(io.MultiWriter(c, m), r)
	if errors.Is(err, blob.ErrNotFound) {
		return 0, errVersionChanged
	} else if err != nil {
		return 0, err
	}
	if n != a.Size || len(a.MD5) > 0 && !bytes.Equal(m.Sum(nil), a.MD5) {
		return 0, errVersionChanged
	}
	return c.Sum32(), nil
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

// sameBytes passes on the bytes of a version read a second time, for a
// streamed pack, and fails with errVersionChanged, at their end or once
// they run over, if they are not the bytes the first read summed: the pack
// copying them is then not committed.
type sameBytes struct {
	r    io.Reader
	size int64
	crc  uint32
	n    int64
	sum  uint32
}

func (v *sameBytes) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.sum = crc32.Update(v.sum, packlog.Castagnoli, p[:n])
	switch {
	case v.n > v.size, errors.Is(err, blob.ErrNotFound):
		return n, errVersionChanged
	case err == io.EOF && (v.n != v.size || v.sum != v.crc):
		return n, errVersionChanged
	}
	return n, err
}
