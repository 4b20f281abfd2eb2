package tiered

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered/internal/packlog"
)

// recoverMarkers finishes what moves of shard's keys, and operations under
// a key's lock in hot, left behind: the markers of pack moves (in cold)
// that failed in this Store or whose process crashed, and, in shard 0's
// pass, locks whose holders are gone.
func (s *Store) recoverMarkers(ctx context.Context, shard int) {
	for obj, err := range blob.All(ctx, s.hot, &blob.ListOptions{Prefix: markerPrefix}) {
		if err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		var err error
		switch {
		case isLeaseKey(obj.Key):
			// The compactor's leases, when they live in hot.
		case isLock(obj.Key) && shard == 0:
			err = s.recoverLock(ctx, obj)
		case isObjectMarker(obj.Key):
			err = fmt.Errorf("tiered: hot holds %q, the marker of a move of one object, which only earlier versions made and only they recover: run one of them until no such marker is left", obj.Key)
		}
		if err != nil && ctx.Err() == nil {
			s.fail(err)
		}
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

// isObjectMarker reports whether a key in hot is the marker of a move of
// one object (the prefix and a SHA-256 in hex), which earlier versions
// wrote before moving an object to a cold object of its own name.
func isObjectMarker(key string) bool {
	h, ok := strings.CutPrefix(key, markerPrefix)
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// dropBatchMarker removes a pack move's marker.
func (s *Store) dropBatchMarker(ctx context.Context, mk string) error {
	if err := s.fence(ctx); err != nil {
		return err
	}
	err := s.cold.Delete(ctx, mk, nil)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	}
	return err
}

// recoverBatch removes the marker of a pack move of shard's keys that ended
// without doing so: whatever the move left is safe as it is (see movePack),
// and a user who deleted one of its keys meanwhile killed the version when
// they found it.
func (s *Store) recoverBatch(ctx context.Context, obj blob.ListObject, shard int) error {
	b, err := blob.ReadAll(ctx, s.cold, obj.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	var m batchMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return blob.Errorf("recover", obj.Key, blob.ErrInvalidArgument, "malformed pack move marker")
	}
	// A pack holds the keys of one shard; a marker that names none is
	// shard 0's.
	if len(m.Items) > 0 && !s.inShard(m.Items[0].Key, shard) || len(m.Items) == 0 && shard != 0 {
		return nil
	}
	if s.activeBatch(obj.Key) || (m.Owner != s.opts.Owner && time.Now().Sub(m.Time) < 2*s.opts.MoveTimeout) {
		return nil // being moved, here or perhaps by another process
	}
	if m.Packed && s.retirer != nil {
		// Its pack was committed in time and its objects retired, by a
		// move that ended within MoveTimeout of m.Time: once operations in
		// flight meanwhile have landed, a retirement that finds nothing
		// left on any replica confirms it.
		if time.Now().Sub(m.Time) < s.opts.MoveTimeout+s.retirer.InFlightBound()+s.opts.MaxClockSkew {
			return nil
		}
		clean, err := s.confirmRetired(ctx, m.Items)
		if err != nil || !clean {
			// Retired again (or a replica did not answer): confirm again
			// later.
			m.Time = time.Now()
			mb, _ := json.Marshal(m)
			if err := s.fence(ctx); err != nil {
				return err
			}
			if perr := blob.Put(ctx, s.cold, obj.Key, mb, &blob.WriterOptions{ContentType: "application/json"}); perr != nil {
				return perr
			}
			return err
		}
	}
	s.stats.recovered.Add(1)
	return s.dropBatchMarker(ctx, obj.Key)
}

// confirmRetired retires items again and reports whether that found no
// copy of any of them on any replica.
func (s *Store) confirmRetired(ctx context.Context, items []packlog.Version) (bool, error) {
	clean := true
	for _, it := range items {
		h, err := s.retirer.Survey(ctx, it.Key)
		if err != nil {
			return false, err
		}
		if err := s.fence(ctx); err != nil {
			return false, err
		}
		res, err := s.retirer.Retire(ctx, h, it.Gen)
		s.stats.retired.Add(int64(res.Deleted))
		if err != nil {
			return false, err
		}
		clean = clean && res.Deleted == 0
	}
	return clean, nil
}

// activeBatch reports whether this Store's own pack move is using marker mk.
func (s *Store) activeBatch(mk string) bool {
	s.batchMu.Lock()
	defer s.batchMu.Unlock()
	return s.batches[mk]
}

// markedItems returns the versions every pack move under way names.
func (s *Store) markedItems(ctx context.Context) (map[packlog.Version]bool, error) {
	out := map[packlog.Version]bool{}
	err := s.eachMarkedItem(ctx, func(it packlog.Version) { out[it] = true })
	return out, err
}

// eachMarkedItem calls f with each item of each pack move marker in cold;
// a marker gone or unreadable by the time it is read names nothing.
func (s *Store) eachMarkedItem(ctx context.Context, f func(packlog.Version)) error {
	for obj, err := range blob.All(ctx, s.cold, &blob.ListOptions{Prefix: batchPrefix}) {
		if err != nil {
			return err
		}
		b, err := blob.ReadAll(ctx, s.cold, obj.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		var m batchMarker
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		for _, it := range m.Items {
			f(it)
		}
	}
	return nil
}
