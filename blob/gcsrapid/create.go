package gcsrapid

import (
	"context"
	"errors"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// Create implements blob.Creator. Writes without attributes are served from a
// pool of pre-created objects under prefix (one per prefix, up to MaxPools),
// so the caller's Write and Close cost one data round trip. Writes with
// attributes, and prefixes beyond MaxPools, create inline, which is a Put
// with IfNotExist.
func (s *Store) Create(ctx context.Context, prefix string, opts *blob.WriterOptions) (string, blob.Writer, error) {
	if s.closed.Load() {
		return "", nil, &blob.Error{Op: "create", Key: prefix, Kind: blob.ErrClosed}
	}
	if prefix != "" {
		if err := validateKey("create", prefix); err != nil {
			return "", nil, err
		}
	}
	if opts != nil && opts.IfGenerationMatch != "" {
		return "", nil, blob.Errorf("create", prefix, blob.ErrInvalidArgument, "Create makes new objects: IfGenerationMatch makes no sense")
	}
	var p *pool.Pool[*warmWriter]
	if !hasAttributes(opts) && (opts == nil || len(opts.ContentMD5) == 0) {
		p = s.poolFor(prefix)
	}
	if p == nil {
		var o blob.WriterOptions
		if opts != nil {
			o = *opts
		}
		o.IfNotExist = true
		key := blob.NewName(prefix)
		w, err := s.NewWriter(ctx, key, &o)
		return key, w, err
	}
	ww, err := p.Get(ctx)
	if err != nil {
		if errors.Is(err, pool.ErrClosed) {
			return "", nil, &blob.Error{Op: "create", Key: prefix, Kind: blob.ErrClosed}
		}
		return "", nil, blob.WrapError("create", prefix, err, classify)
	}
	w := s.newWriter(ctx, ww.key, opts, ww)
	w.pooled = true
	return ww.key, w, nil
}

// poolFor returns the pool for prefix, starting it on first use, or nil when
// pooling is off or MaxPools pools exist.
func (s *Store) poolFor(prefix string) *pool.Pool[*warmWriter] {
	if s.opts.PoolSize <= 0 {
		return nil
	}
	s.poolsMu.Lock()
	defer s.poolsMu.Unlock()
	if s.pools == nil { // closed
		return nil
	}
	if p := s.pools[prefix]; p != nil {
		return p
	}
	if len(s.pools) >= s.opts.MaxPools {
		return nil
	}
	p, err := pool.New(pool.Options[*warmWriter]{
		Load: func(ctx context.Context) (*warmWriter, error) {
			return s.prewarm(ctx, blob.NewName(prefix), nil)
		},
		Discard: func(ctx context.Context, ww *warmWriter, _ pool.DiscardReason) {
			s.discard(ctx, ww)
		},
		MaxItemAge:      s.opts.MaxItemAge,
		Capacity:        s.opts.PoolSize,
		MinIdle:         s.opts.PoolMinIdle,
		LoadConcurrency: s.opts.LoadConcurrency,
		// Creating an appendable object is a metadata operation.
		InitialLoadLatency: 80 * time.Millisecond,
	})
	if err != nil {
		return nil
	}
	s.pools[prefix] = p
	return p
}
