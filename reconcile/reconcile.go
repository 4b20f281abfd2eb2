// Package reconcile deletes orphans: objects under a prefix that nothing
// references any more, such as the pooled, pre-created objects of a process
// that crashed or the copies left by a failed quorum write.
//
// An object is deleted only when all of these hold:
//
//   - it is older than the grace window by the store's clock: its CreateTime
//     (or ModTime when the store gives no CreateTime) is that old; an object
//     with no such time is never deleted;
//   - if its key ends like a name made by blob.Create (blob.NameTime), that
//     name time is older than the grace window too. A name only ever makes an
//     object younger, never older: any key may end like a Create name (a Put
//     can pick one), so a name alone never gets an object deleted, but a
//     young name keeps an object without a request;
//   - the caller's liveness check, asked last, says it is not referenced (an
//     error from the check keeps the object);
//   - it has not changed since it was examined: the delete is conditional on
//     the generation that Stat returned.
//
// The grace window must exceed MaxItemAge + WriteTimeout (+ ClockSkew) of the
// writer pool that makes objects under the prefix: a pooled object may wait
// MaxItemAge before it is handed out and WriteTimeout more before its write
// commits, so a shorter window could delete a file in flight. New refuses such
// a configuration. DryRun reports what would be deleted and deletes nothing.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// Options configure a Reconciler.
type Options struct {
	// Prefix selects the objects examined. Required, so that a mistake cannot
	// sweep a whole bucket.
	Prefix string
	// GraceWindow: younger objects are never deleted.
	GraceWindow time.Duration
	// MaxItemAge and WriteTimeout are those of the pool writing under Prefix
	// (gcsrapid's options of the same names); ClockSkew is the largest
	// difference between the clocks that name objects and this one.
	MaxItemAge, WriteTimeout, ClockSkew time.Duration
	// IsLive reports whether key is referenced. Required.
	IsLive func(ctx context.Context, key string) (bool, error)
	// DryRun lists what would be deleted without deleting it.
	DryRun bool
	// Concurrency bounds the objects examined at once (default 8).
	Concurrency int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Reconciler deletes unreferenced objects under a prefix (see the package doc).
type Reconciler struct {
	s    blob.Store
	opts Options
}

// opReconcile is the Op of New's errors.
const opReconcile = "reconcile"

// ErrUnsafe is wrapped by New's error for a grace window that could delete an
// object whose write is still in flight.
var ErrUnsafe = errors.New("reconcile: grace window too short for the pool's MaxItemAge + WriteTimeout")

// New returns a Reconciler for s, or an error if opts are incomplete or unsafe.
func New(s blob.Store, opts Options) (*Reconciler, error) {
	switch {
	case s == nil:
		return nil, blob.Errorf(opReconcile, "", blob.ErrInvalidArgument, "no store")
	case opts.Prefix == "":
		return nil, blob.Errorf(opReconcile, "", blob.ErrInvalidArgument, "a prefix is required")
	case opts.IsLive == nil:
		return nil, blob.Errorf(opReconcile, opts.Prefix, blob.ErrInvalidArgument, "a liveness check is required")
	case opts.GraceWindow <= 0 || opts.MaxItemAge < 0 || opts.WriteTimeout < 0 || opts.ClockSkew < 0:
		return nil, blob.Errorf(opReconcile, opts.Prefix, blob.ErrInvalidArgument, "grace window must be positive and the other durations not negative")
	}
	if err := pool.CheckGrace(opts.MaxItemAge, opts.WriteTimeout, opts.ClockSkew, opts.GraceWindow); err != nil {
		return nil, &blob.Error{Op: opReconcile, Key: opts.Prefix, Kind: blob.ErrInvalidArgument, Err: fmt.Errorf("%w: %v", ErrUnsafe, err)}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reconciler{s: s, opts: opts}, nil
}

// Report says what one Run did.
type Report struct {
	Scanned int // objects listed under the prefix
	Young   int // kept: inside the grace window
	Live    int // kept: referenced
	Undated int // kept: no name time, CreateTime or ModTime
	Changed int // kept: changed or gone between examination and delete
	// Deleted are the orphans deleted, or in a dry run the ones that would be.
	Deleted []string
	Errors  []error // failures; each kept its object
}

// Run examines every object under the prefix once.
func (r *Reconciler) Run(ctx context.Context) (*Report, error) {
	rep := &Report{}
	var mu sync.Mutex
	var listErr error
	objects := func(yield func(blob.ListObject) bool) {
		for obj, err := range blob.All(ctx, r.s, &blob.ListOptions{Prefix: r.opts.Prefix}) {
			if err != nil {
				listErr = err
				return
			}
			if obj.IsDir {
				continue
			}
			mu.Lock()
			rep.Scanned++
			mu.Unlock()
			if !yield(obj) {
				return
			}
		}
	}
	if !parallel.Range(ctx, objects, r.opts.Concurrency, func(obj blob.ListObject) {
		v, err := r.examine(ctx, obj)
		mu.Lock()
		defer mu.Unlock()
		switch v {
		case young:
			rep.Young++
		case live:
			rep.Live++
		case undated:
			rep.Undated++
		case changed:
			rep.Changed++
		case deleted:
			rep.Deleted = append(rep.Deleted, obj.Key)
		}
		if err != nil {
			rep.Errors = append(rep.Errors, err)
		}
	}) && listErr == nil {
		listErr = ctx.Err()
	}
	return rep, listErr
}

type verdict int

const (
	kept verdict = iota
	young
	live
	undated
	changed
	deleted
)

func (r *Reconciler) examine(ctx context.Context, obj blob.ListObject) (verdict, error) {
	born, named := blob.NameTime(obj.Key)
	if named && r.opts.Now().Sub(born) <= r.opts.GraceWindow {
		return young, nil // decided from the name alone, with no request
	}
	// The generation read here is what the delete is conditional on, so an
	// object rewritten after the liveness check below is kept.
	a, err := r.s.Stat(ctx, obj.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return changed, nil
	} else if err != nil {
		return kept, err
	}
	stored := a.CreateTime
	if stored.IsZero() {
		stored = a.ModTime
	}
	if stored.IsZero() {
		return undated, nil
	}
	if r.opts.Now().Sub(stored) <= r.opts.GraceWindow {
		return young, nil
	}
	isLive, err := r.opts.IsLive(ctx, obj.Key)
	if err != nil {
		return kept, fmt.Errorf("reconcile: liveness of %q: %w", obj.Key, err)
	}
	if isLive {
		return live, nil
	}
	if r.opts.DryRun {
		return deleted, nil
	}
	// A store that reports no generation cannot check one: the delete is
	// then unconditional, as the object is still judged dead.
	var dopts *blob.DeleteOptions
	if a.Generation != "" {
		dopts = &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)}
	}
	err = r.s.Delete(ctx, obj.Key, dopts)
	switch {
	case err == nil:
		return deleted, nil
	case errors.Is(err, blob.ErrNotFound), errors.Is(err, blob.ErrPrecondition):
		return changed, nil
	}
	return kept, err
}
