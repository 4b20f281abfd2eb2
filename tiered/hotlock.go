package tiered

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// lockPrefix names the locks that conditional operations on a key whose
// version lives in cold only hold in hot (see lockHot). Like markers, they
// never show in a listing and are never moved.
const lockPrefix = markerPrefix + "lock/"

// lockTokenKey is the metadata key of a lock holding its holder's token.
const lockTokenKey = "zonalblob-tiered-lock"

func lockKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return lockPrefix + hex.EncodeToString(sum[:])
}

func isLock(key string) bool { return strings.HasPrefix(key, lockPrefix) }

// lockLease is the age after which a lock is taken to be abandoned (its
// holder crashed) and may be removed by anyone: twice MoveTimeout, which
// bounds what a holder does under it, and MaxClockSkew.
func (s *Store) lockLease() time.Duration { return 2*s.opts.MoveTimeout + s.opts.MaxClockSkew }

// lockHot takes key's lock in hot, waiting while another process holds it,
// and returns a context bounded by MoveTimeout for the work done under it
// and the function that releases it.
//
// A conditional operation acting on a version of key that lives in cold
// only (a CAS of it, a Delete of it) checks the tiers and commits under
// this lock: the lock is a write in hot, IfNotExist, that every contender
// must win, so the exclusion holds between processes (over a quorum the
// write is a consensus round). The check is made again under the lock, so
// what an earlier holder committed (a version in hot, a tombstone: a
// holder that writes one waits hotDeleteDelay after it, before it lets go)
// is seen.
func (s *Store) lockHot(ctx context.Context, key string) (context.Context, func(), error) {
	lk := lockKey(key)
	var b [8]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	wo := &blob.WriterOptions{If: blob.IfNotExist(), ContentType: "text/plain", Metadata: map[string]string{lockTokenKey: token}}
	failures := 0
	for wait := 500 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		perr := blob.Put(ctx, s.hot, lk, []byte(key), wo)
		if perr == nil {
			break
		}
		if !errors.Is(perr, blob.ErrExists) {
			// The write failed, or its outcome is unknown (a quorum's
			// round that lost a race may still take effect): the lock
			// says whose it is.
			if failures++; failures > 5 || ctx.Err() != nil {
				return nil, nil, perr
			}
		}
		a, err := s.hot.Stat(ctx, lk)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			continue // released meanwhile, or our write did not land
		case err != nil:
			return nil, nil, err
		case a.Metadata[lockTokenKey] == token:
			// Our own write, which reported a failure but took effect.
		case time.Now().Sub(a.ModTime) > s.lockLease():
			// Its holder is gone: remove it, on condition of its generation.
			if err := s.hot.Delete(ctx, lk, &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)}); err != nil &&
				!errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) {
				return nil, nil, err
			}
			continue
		default:
			select {
			case <-ctx.Done():
				return nil, nil, &blob.Error{Op: driver.OpWrite, Key: key, Err: ctx.Err()}
			case <-time.After(wait):
			}
			continue
		}
		break
	}
	held, cancel := context.WithTimeoutCause(ctx, s.opts.MoveTimeout, errLockOutlasted)
	release := func() {
		cancel()
		// Released even if the caller's context ended: a lock left behind
		// holds others up until its lease ends.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.MoveTimeout)
		defer rcancel()
		s.unlockHot(rctx, lk, token)
	}
	return held, release, nil
}

// errLockOutlasted ends the context lockHot returns: the work under a lock
// must end within MoveTimeout, as others may take the lock over once it is
// older than its lease.
var errLockOutlasted = errors.New("tiered: the work under the key's lock in hot outlasted MoveTimeout")

// outlasted returns err, or, if the end of held (a context lockHot
// returned) caused it, an error that says so rather than a bare deadline
// error while the caller's context is live.
func (s *Store) outlasted(held context.Context, op, key string, err error) error {
	if err == nil || !errors.Is(context.Cause(held), errLockOutlasted) {
		return err
	}
	return &blob.Error{Op: op, Key: key, Err: fmt.Errorf("%w (%v): %v", errLockOutlasted, s.opts.MoveTimeout, err)}
}

// unlockHot removes the lock lk if it is still the one written with token.
func (s *Store) unlockHot(ctx context.Context, lk, token string) {
	for range 3 {
		a, err := s.hot.Stat(ctx, lk)
		if err != nil || a.Metadata[lockTokenKey] != token {
			return // gone, or taken over once its lease ended
		}
		err = s.hot.Delete(ctx, lk, &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)})
		if err == nil || errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) {
			return
		}
	}
}

// recoverLock removes a lock whose holder is gone (older than its lease),
// found among the markers at the start of a pass.
func (s *Store) recoverLock(ctx context.Context, obj blob.ListObject) error {
	a, err := s.hot.Stat(ctx, obj.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if time.Now().Sub(a.ModTime) <= s.lockLease() {
		return nil
	}
	if err := s.fence(ctx); err != nil {
		return err
	}
	err = s.hot.Delete(ctx, obj.Key, &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)})
	if errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrPrecondition) {
		return nil
	}
	return err
}
