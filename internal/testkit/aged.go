// Package testkit holds what tests of several packages share: views and
// wrappers of stores that stand for conditions no emulator makes on its own.
package testkit

import (
	"context"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// AgedBy returns hot as a process whose clock is d ahead of the service's
// sees it: every version it is shown is d older (ModTime, and the issue
// time of a quorum's generations), so a tiered Store over it takes for old
// enough to move or retire what the others take for young. The tiers are
// the same objects; only the ages differ. A quorum keeps its retirement.
func AgedBy(hot blob.Store, d time.Duration) blob.Store {
	return AgedByFunc(hot, func() time.Duration { return d })
}

// AgedByFunc is AgedBy by d() at each call (negative: younger).
func AgedByFunc(hot blob.Store, d func() time.Duration) blob.Store {
	a := Aged{Store: hot, d: d}
	if r, ok := blob.Unobserved(hot).(blob.Retirer); ok && blob.CapabilitiesOf(hot).Retire {
		return AgedRetirer{Aged: a, r: r}
	}
	return a
}

// Aged is the view AgedBy returns of a store that does not retire.
type Aged struct {
	blob.Store
	d func() time.Duration
}

// Close does nothing: the view's owner closes the store it shows.
func (Aged) Close() error { return nil }

func (s Aged) older(a *blob.Attributes) *blob.Attributes {
	if a == nil {
		return nil
	}
	c := *a
	c.ModTime = c.ModTime.Add(-s.d())
	return &c
}

func (s Aged) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	a, err := s.Store.Stat(ctx, key)
	return s.older(a), err
}

func (s Aged) List(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	p, err := s.Store.List(ctx, o)
	if p != nil {
		d := s.d()
		for i := range p.Objects {
			p.Objects[i].ModTime = p.Objects[i].ModTime.Add(-d)
		}
	}
	return p, err
}

func (s Aged) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	r, err := s.Store.NewRangeReader(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return agedReader{Reader: r, a: s.older(r.Attributes())}, nil
}

type agedReader struct {
	blob.Reader
	a *blob.Attributes
}

func (r agedReader) Attributes() *blob.Attributes { return r.a }

// AgedRetirer is Aged over a store that retires versions (a quorum).
type AgedRetirer struct {
	Aged
	r blob.Retirer
}

type agedHolding struct {
	blob.Holding
	a *blob.Attributes
}

func (h agedHolding) Attributes() *blob.Attributes { return h.a }

func (s AgedRetirer) Survey(ctx context.Context, key string) (blob.Holding, error) {
	h, err := s.r.Survey(ctx, key)
	if h == nil {
		return nil, err
	}
	return agedHolding{Holding: h, a: s.older(h.Attributes())}, err
}

func (s AgedRetirer) ReadHeld(ctx context.Context, h blob.Holding) ([]byte, error) {
	return s.r.ReadHeld(ctx, held(h))
}

func (s AgedRetirer) Retire(ctx context.Context, h blob.Holding, version string) (blob.Retired, error) {
	return s.r.Retire(ctx, held(h), version)
}

func (s AgedRetirer) InFlightBound() time.Duration { return s.r.InFlightBound() }

func (s AgedRetirer) GenerationTime(generation string) (time.Time, bool) {
	t, ok := s.r.GenerationTime(generation)
	return t.Add(-s.d()), ok
}

func held(h blob.Holding) blob.Holding {
	if a, ok := h.(agedHolding); ok {
		return a.Holding
	}
	return h
}
