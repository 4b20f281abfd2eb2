package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
)

// finalizer is the replica capability Finalize forwards to: sealing an
// appendable or unfinalized object (blob.Finalizer).
type finalizer interface {
	Finalize(ctx context.Context, key string) error
}

// Finalize seals key's acknowledged version on every replica that holds it
// and can seal (a replica store with a Finalize method, such as gcsrapid's),
// in parallel. It first settles the key as a majority read does, so the
// version sealed is the one reads return. It fails with ErrNotFound when the
// key holds no value, with an error wrapping ErrUnsupported when no holder
// can seal, and with the holders' errors when any of them failed. A replica
// that receives the version later, by repair, holds it as a replica writer
// leaves it.
func (s *Store) Finalize(ctx context.Context, key string) error {
	if err := s.check("finalize", key); err != nil {
		return err
	}
	cur, _, err := s.settle(ctx, "finalize", key)
	if err != nil {
		return err
	}
	if cur.gone() {
		return &blob.Error{Op: "finalize", Key: key, Kind: blob.ErrNotFound}
	}
	xs, _ := s.surveyAll(ctx, key)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	sealers := 0
	for _, x := range xs {
		f, ok := x.r.s.(finalizer)
		if !x.ok() || x.kind != live || x.ver != cur.ver || !ok {
			continue
		}
		sealers++
		wg.Go(func() {
			if err := f.Finalize(ctx, key); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("replica %d: %w", x.r.idx, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	switch {
	case sealers == 0:
		return &blob.Error{Op: "finalize", Key: key, Kind: blob.ErrUnsupported, Err: errors.New("no replica holding the version can finalize")}
	case len(errs) > 0:
		return &blob.Error{Op: "finalize", Key: key, Err: errors.Join(errs...)}
	}
	return nil
}
