package tiered

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// markerPrefix starts the names of move markers in the hot store. Two
// private-use code points sort after every ordinary key and contain no
// delimiter a listing would group on, so markers never show in a listing
// (List drops them) and no user key collides with them (keys starting with
// the prefix are refused).
const markerPrefix = "\U0010FFFD\U0010FFFD"

// A marker is a move's durable intent: written to hot, naming the hot
// generation being moved, before the move reads the object, and deleted after
// it ends. A user's Delete that deleted that very generation from hot sets the
// marker's State to deleted, which tells the move, or the recovery of a move
// whose process crashed, that its cold copy must not survive.
type marker struct {
	Key   string    `json:"key"`
	Gen   string    `json:"gen"`
	Owner string    `json:"owner"`
	State string    `json:"state"` // stateMoving or stateDeleted
	Time  time.Time `json:"time"`
}

const (
	stateMoving  = "moving"
	stateDeleted = "deleted"
)

func markerKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return markerPrefix + hex.EncodeToString(sum[:])
}

func isMarker(key string) bool { return strings.HasPrefix(key, markerPrefix) }

func newOwner() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeMarker records that a move of key begins. It fails with ErrExists if a
// marker is there: another move of key is running, or one ended without
// cleaning up and recovery has not yet looked at it.
func (s *Store) writeMarker(ctx context.Context, key, g1 string) (gen string, err error) {
	m := marker{Key: key, Gen: g1, Owner: s.opts.Owner, State: stateMoving, Time: time.Now()}
	b, _ := json.Marshal(m)
	mk := markerKey(key)
	if err := s.fence(ctx); err != nil {
		return "", err
	}
	if err := blob.Put(ctx, s.hot, mk, b, &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "application/json"}); err != nil {
		return "", err
	}
	a, err := s.hot.Stat(ctx, mk)
	if err != nil {
		return "", err
	}
	return a.Generation, nil
}

// readMarker returns the marker of key and its generation, or ErrNotFound.
func (s *Store) readMarker(ctx context.Context, key string) (*marker, string, error) {
	mk := markerKey(key)
	a, err := s.hot.Stat(ctx, mk)
	if err != nil {
		return nil, "", err
	}
	b, err := blob.ReadAll(ctx, s.hot, mk)
	if err != nil {
		return nil, "", err
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || m.Key != key {
		return nil, "", blob.Errorf(driver.OpRead, mk, blob.ErrInvalidArgument, "malformed move marker")
	}
	return &m, a.Generation, nil
}

// removeMarker deletes key's marker if it is still generation gen: a marker a
// user has since set to deleted is left for recovery to act on.
func (s *Store) removeMarker(ctx context.Context, key, gen string) error {
	err := s.hot.Delete(ctx, markerKey(key), &blob.DeleteOptions{If: blob.IfGenerationMatch(gen)})
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	return err
}

// noteDelete is the user's side of the protocol: after a Delete removed
// generation deleted of key from hot, a move of that generation that was
// under way is told, through its marker, that its copy must go. A move of a
// later generation is not touched.
func (s *Store) noteDelete(ctx context.Context, key, deleted string) error {
	for range 5 {
		m, gen, err := s.readMarker(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if m.State == stateDeleted || m.Gen != deleted {
			return nil
		}
		m.State = stateDeleted
		b, _ := json.Marshal(m)
		err = blob.Put(ctx, s.hot, markerKey(key), b, &blob.WriterOptions{If: blob.IfGenerationMatch(gen), ContentType: "application/json"})
		if err == nil || errors.Is(err, blob.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
	}
	return blob.Errorf(driver.OpDelete, key, nil, "tiered: move marker kept changing")
}

// recoverMarkers finishes what moves of shard's keys left behind: markers
// of this Store's failed moves and of moves whose process crashed (same
// Owner, or older than twice MoveTimeout, after which their process can no
// longer commit). Locks left behind are shard 0's to remove.
func (s *Store) recoverMarkers(ctx context.Context, shard int) {
	for obj, err := range blob.All(ctx, s.hot, &blob.ListOptions{Prefix: markerPrefix}) {
		if err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		if isLeaseKey(obj.Key) {
			continue // the compactor leases, when they live in hot
		}
		var err error
		switch {
		case isLock(obj.Key) && shard == 0:
			err = s.recoverLock(ctx, obj)
		case !isLock(obj.Key):
			err = s.recoverMarker(ctx, obj, shard)
		}
		if err != nil && ctx.Err() == nil {
			s.fail(err)
		}
	}
	if !s.packing() {
		return
	}
	for obj, err := range blob.All(ctx, s.cold, &blob.ListOptions{Prefix: batchPrefix}) {
		if err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		if err := s.recoverBatch(ctx, obj, shard); err != nil && ctx.Err() == nil {
			s.fail(err)
		}
	}
}

// resolver is a hot store whose failed writes can take effect after they
// returned (a quorum): Resolve makes sure those before it either have or
// never will.
type resolver interface {
	Resolve(ctx context.Context, key string) error
}

func (s *Store) recoverMarker(ctx context.Context, obj blob.ListObject, shard int) error {
	b, err := blob.ReadAll(ctx, s.hot, obj.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil || markerKey(m.Key) != obj.Key {
		return blob.Errorf("recover", obj.Key, blob.ErrInvalidArgument, "malformed move marker")
	}
	if !s.inShard(m.Key, shard) {
		return nil // another shard's, recovered under its lease
	}
	if m.Owner != s.opts.Owner && time.Now().Sub(m.Time) < 2*s.opts.MoveTimeout {
		return nil // another process may still be moving it
	}
	unlock, ok := s.locks.tryLock(m.Key)
	if !ok {
		return nil // this process is moving it right now
	}
	defer unlock()
	s.stats.recovered.Add(1)
	got, gen, err := s.readMarker(ctx, m.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	ca, err := s.cold.Stat(ctx, m.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return s.removeMarker(ctx, m.Key, gen)
	} else if err != nil {
		return err
	}
	token, copied := ca.Metadata[generationKey]
	stale := false
	switch {
	case !copied || token != got.Gen:
		// Not this move's copy (a user's object, or an older move's): the
		// move left nothing in cold.
	case got.State == stateDeleted:
		// A user deleted the generation being moved: its copy may not
		// outlive that.
		stale = true
	default:
		if r, ok := blob.Unobserved(s.hot).(resolver); ok {
			// The move's delete from hot may have failed with its accept on
			// a replica or two: a quorum read that hears one finishes it,
			// later. Resolved, it either took effect or never will, and
			// the Stat below tells which.
			if err := r.Resolve(ctx, m.Key); err != nil {
				return err
			}
		}
		ha, err := s.hot.Stat(ctx, m.Key)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			// The move deleted hot (a user who deleted this generation would
			// have marked the marker before their Delete returned): the copy
			// is the object.
		case err != nil:
			return err
		case ha.Generation != token:
			stale = true // overwritten: hot's newer version shadows the copy
		}
		// Hot still at the copy's generation: the move did not finish and the
		// next pass moves it again over the copy.
	}
	if stale {
		if err := s.fence(ctx); err != nil {
			return err
		}
		err := s.cold.Delete(ctx, m.Key, &blob.DeleteOptions{If: ifKnownGeneration(ca.Generation)})
		if err != nil && !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
	}
	return s.removeMarker(ctx, m.Key, gen)
}

// compactEach moves the objects of shard older than After one by one, at
// most Concurrency at a time.
func (s *Store) compactEach(ctx context.Context, shard int, note func(moveOutcome, int64, error)) {
	var mu sync.Mutex
	var oldest time.Time
	parallel.Range(ctx, s.eligible(ctx, shard, note), s.opts.Concurrency, func(obj blob.ListObject) {
		o, size, err := s.moveKey(ctx, obj.Key)
		if err != nil && ctx.Err() == nil {
			s.fail(err)
		} else if err != nil {
			err = nil // cancelled by Close: not a failure of the move
		}
		note(o, size, err)
		if o == busy || err != nil {
			mu.Lock()
			if oldest.IsZero() || obj.ModTime.Before(oldest) {
				oldest = obj.ModTime
			}
			mu.Unlock()
		}
	})
	s.setLag(shard, oldest)
}

// moveKey moves key from hot to cold. The steps, and what a crash or a
// concurrent user does between them, are described in docs/tiered.md (A move).
func (s *Store) moveKey(ctx context.Context, key string) (moveOutcome, int64, error) {
	unlock, ok := s.locks.tryLock(key)
	if !ok {
		s.stats.busy.Add(1)
		return busy, 0, nil
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opts.MoveTimeout)
	defer cancel()

	// 1. Finalize, where the hot store needs it.
	if blob.CapabilitiesOf(s.hot).Finalize {
		if err := blob.Finalize(ctx, s.hot, key); errors.Is(err, blob.ErrNotFound) {
			return none, 0, nil
		} else if err != nil {
			return none, 0, fmt.Errorf("tiered: finalize %q: %w", key, err)
		}
	}
	// 2. Stat hot: the generation g1 is what we move and what the hot delete
	// is conditional on.
	a, err := s.hot.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return none, 0, nil
	} else if err != nil {
		return none, 0, err
	}
	if time.Now().Sub(a.ModTime) < s.opts.After || isGrave(a) {
		return none, 0, nil // overwritten or deleted since it was listed
	}
	g1 := a.Generation
	if g1 == "" {
		return none, 0, fmt.Errorf("tiered: hot store gives no generation for %q: cannot move it safely", key)
	}
	// 3. The marker, then hot again: a user who deletes g1 from now on finds
	// the marker; one who deleted it before is seen here.
	mgen, err := s.writeMarker(ctx, key, g1)
	if errors.Is(err, blob.ErrExists) {
		s.stats.busy.Add(1)
		return busy, 0, nil
	} else if err != nil {
		return none, 0, err
	}
	// Until the copy may have landed, the marker can simply go.
	abandon := func(o moveOutcome, err error) (moveOutcome, int64, error) {
		rerr := s.removeMarker(ctx, key, mgen)
		if errors.Is(rerr, blob.ErrPrecondition) {
			// A user deleted g1 and marked the marker; no copy of ours is in
			// cold, so there is nothing left for the mark to do.
			rerr = s.dropMarker(ctx, key)
		}
		if rerr != nil && err == nil {
			err = rerr
		}
		if o == conflict {
			s.stats.conflicts.Add(1)
		}
		return o, 0, err
	}
	if a2, err := s.hot.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) || (err == nil && a2.Generation != g1) {
		return abandon(conflict, nil)
	} else if err != nil {
		return abandon(none, err)
	}
	// 4. Copy to cold, recording g1.
	if err := s.copyToCold(ctx, key, a); errors.Is(err, errGenerationChanged) {
		return abandon(conflict, nil)
	} else if err != nil {
		// The commit may have happened though it failed: the marker stays,
		// and recovery decides about the copy.
		return none, 0, err
	}
	// 5. Verify the cold copy and learn its generation c1.
	ca, err := s.cold.Stat(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		// Only a delete removes a cold copy, and a delete removes hot too.
		return abandon(conflict, nil)
	} else if err != nil {
		return none, 0, fmt.Errorf("tiered: verify %q: %w", key, err)
	}
	c1 := ca.Generation
	if ca.Size != a.Size || ca.Metadata[generationKey] != g1 || (len(a.MD5) > 0 && len(ca.MD5) > 0 && !bytes.Equal(a.MD5, ca.MD5)) {
		// Not ours, or not intact: hot still has the object, so removing the
		// copy loses nothing.
		if err := s.removeCopy(ctx, key, c1); err != nil {
			return none, 0, err
		}
		return abandon(none, fmt.Errorf("tiered: verify %q: cold copy differs (size %d vs %d)", key, ca.Size, a.Size))
	}
	// Reads prefer what packs serve to cold's own object: older versions of
	// key in packs die before hot's goes (writeTombstone waits
	// hotDeleteDelay).
	if _, err := s.killPacked(ctx, key); err != nil {
		return none, 0, err
	}
	if err := s.fence(ctx); err != nil {
		return none, 0, err
	}
	// 6. Delete hot, only if it is still generation g1.
	err = s.hot.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g1)})
	switch {
	case err == nil:
		// 7. Remove the marker. If a user deleted g1 meanwhile (after step 6
		// their hot delete found nothing, but their cold delete may have run
		// before the copy landed), they marked it: the copy goes.
		if rerr := s.removeMarker(ctx, key, mgen); errors.Is(rerr, blob.ErrPrecondition) {
			if err := s.removeCopy(ctx, key, c1); err != nil {
				return none, 0, err
			}
			s.stats.conflicts.Add(1)
			return conflict, 0, s.dropMarker(ctx, key)
		} else if rerr != nil {
			return none, 0, rerr // recovery will find hot gone and keep the copy
		}
		s.stats.moved.Add(1)
		s.stats.bytes.Add(a.Size)
		return moved, a.Size, nil
	case errors.Is(err, blob.ErrPrecondition), errors.Is(err, blob.ErrNotFound):
		// Overwritten (hot's newer version shadows the copy) or deleted by a
		// user who could not see the copy: either way it goes.
		if err := s.removeCopy(ctx, key, c1); err != nil {
			return none, 0, err
		}
		s.stats.conflicts.Add(1)
		return conflict, 0, s.dropMarker(ctx, key)
	default:
		// Ambiguous (the delete may have happened): the marker stays and
		// recovery, seeing whether hot still has g1, decides.
		return none, 0, err
	}
}

var errGenerationChanged = errors.New("tiered: hot object changed during the copy")

func (s *Store) copyToCold(ctx context.Context, key string, a *blob.Attributes) error {
	r, err := s.hot.NewRangeReader(ctx, key, 0, -1)
	if errors.Is(err, blob.ErrNotFound) {
		return errGenerationChanged
	} else if err != nil {
		return err
	}
	defer r.Close()
	if g := r.Attributes().Generation; g != "" && g != a.Generation {
		return errGenerationChanged
	}
	wo := blob.WriterOptionsFrom(a)
	wo.Metadata = maps.Clone(a.Metadata)
	if wo.Metadata == nil {
		wo.Metadata = map[string]string{}
	}
	wo.Metadata[generationKey] = a.Generation
	if err := s.fence(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.cold.NewWriter(wctx, key, &wo)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		w.Close()
		if errors.Is(err, blob.ErrNotFound) {
			return errGenerationChanged
		}
		return err
	}
	err = w.Close()
	if errors.Is(err, blob.ErrPrecondition) {
		// The copy carries hot's MD5 from the Stat; bytes that do not match it
		// are a newer generation read after the Stat.
		return errGenerationChanged
	}
	return err
}

// removeCopy deletes the cold copy of generation c1 that a move made,
// conditional on c1 so that a newer copy is never touched. On failure the
// move's marker stays, so recovery removes the copy later.
func (s *Store) removeCopy(ctx context.Context, key, c1 string) error {
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.cold.Delete(ctx, key, &blob.DeleteOptions{If: ifKnownGeneration(c1)})
	if err == nil || errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) {
		return nil
	}
	return err
}

// dropMarker removes key's marker whatever its state, once the move has
// dealt with its copy.
func (s *Store) dropMarker(ctx context.Context, key string) error {
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.hot.Delete(ctx, markerKey(key), nil)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	return err
}

// deleteYoung is a Delete, in a Store that does not pack, of hot's version
// g of key, which is too young for any move: the cold object it shadows
// goes first, then g, on condition of its generation, and then any marker
// naming g is marked deleted (noteDelete), for a move that misjudged g's
// age. It reports done false when the key changed and must be looked at
// again.
func (s *Store) deleteYoung(ctx context.Context, key, want, g string) (done bool, err error) {
	copyOfG, err := s.deleteColdObject(ctx, key, g)
	if err != nil {
		return true, err
	}
	err = s.hot.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g)})
	if copyOfG && (errors.Is(err, blob.ErrPrecondition) || errors.Is(err, blob.ErrNotFound)) {
		// The cold object this Delete removed was a move's copy of g
		// (by a compactor whose clock misjudged g's age): g left hot
		// in that move (a move's delete that failed can still take
		// effect later, when a quorum read finishes it), so removing
		// the copy deleted g, or g was still in hot then and this
		// Delete ran before whatever replaced it. Deleting again would
		// take effect twice.
		return true, nil
	}
	switch {
	case err == nil:
		return true, s.noteDelete(ctx, key, g)
	case errors.Is(err, blob.ErrPrecondition):
		if want != "" {
			return true, &blob.Error{Op: driver.OpDelete, Key: key, Kind: blob.ErrPrecondition, Err: err}
		}
		return false, nil // overwritten meanwhile: delete the new version
	case errors.Is(err, blob.ErrNotFound):
		// Moved out of hot by a compactor in another process (or
		// deleted): deleted from cold under key's lock in hot, like
		// any version in cold only.
		return false, nil
	default:
		return true, err
	}
}
