package tiered

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
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
	err := s.hot.Delete(ctx, markerKey(key), &blob.DeleteOptions{IfGenerationMatch: gen})
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
		err := s.cold.Delete(ctx, m.Key, &blob.DeleteOptions{IfGenerationMatch: ca.Generation})
		if err != nil && !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) {
			return err
		}
	}
	return s.removeMarker(ctx, m.Key, gen)
}
