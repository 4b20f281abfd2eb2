package gcsrapid

import (
	"context"
	"errors"
	"io"
	"maps"

	"sync"

	"cloud.google.com/go/storage"

	"github.com/zonalblob/zonalblob/blob"
)

// An object made by Create does not exist for anyone until its writer's Close
// returns, though a prewarmed object exists on the service, empty, from its
// prewarm. So Prewarm marks the objects it creates with this metadata key,
// and Stat, List and reads hide a marked object that holds no committed
// write: no bytes, and not unmarked by the commit of an empty write. A
// prewarmed writer commits at least one byte with its flush, or, for an empty
// write, clears the mark (one metadata operation). The mark never reaches
// callers' Attributes.
const prewarmedKey = "zonalblob-prewarmed"

// errUnwritten explains a NotFound for an object that exists on the service.
var errUnwritten = errors.New("gcsrapid: a prewarmed object whose write has not committed")

func marked(md map[string]string) bool { return md[prewarmedKey] != "" }

// withMark returns opts with the prewarm mark added to its metadata.
func withMark(opts *blob.WriterOptions) *blob.WriterOptions {
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	md := make(map[string]string, len(o.Metadata)+1)
	maps.Copy(md, o.Metadata)
	md[prewarmedKey] = "1"
	o.Metadata = md
	return &o
}

// withoutMark returns md without the prewarm mark.
func withoutMark(md map[string]string) map[string]string {
	if _, ok := md[prewarmedKey]; !ok {
		return md
	}
	md = maps.Clone(md)
	delete(md, prewarmedKey)
	return md
}

// unmark clears the mark of a prewarmed object whose committed write is empty.
func (s *Store) unmark(ctx context.Context, key string, gen int64) error {
	o := s.bucket.Object(key)
	if gen > 0 {
		o = o.If(storage.Conditions{GenerationMatch: gen})
	}
	_, err := o.Update(ctx, storage.ObjectAttrsToUpdate{Metadata: map[string]string{prewarmedKey: ""}})
	return err
}

// probeLen is how much of a doubtful prewarmed object a probe reads: enough
// for the whole of a typical record, so that its true size is known too.
const probeLen = 64 << 10

// unwritten reports whether a is a prewarmed object whose write has not
// committed. The size the service reports for an unfinalized object may be
// out of date (smaller than the truth, never larger), so a marked object that
// claims no bytes is checked by reading it (up to probeLen bytes); when it
// holds bytes, a.Size is corrected to what the read found.
func (s *Store) unwritten(ctx context.Context, a *storage.ObjectAttrs) (bool, error) {
	if !marked(a.Metadata) || a.Size > 0 {
		return false, nil
	}
	n, err := s.probe(ctx, a.Name, a.Generation)
	if err != nil {
		return false, err
	}
	a.Size = n
	return n == 0, nil
}

// probe reads up to probeLen bytes of generation gen of key and returns how
// many there were: the object's size if fewer than probeLen, a lower bound
// otherwise. A generation that is gone holds nothing.
func (s *Store) probe(ctx context.Context, key string, gen int64) (int64, error) {
	s.stats.probes.Add(1)
	o := s.bucket.Object(key)
	if gen > 0 {
		o = o.Generation(gen)
	}
	r, err := openRead(ctx, s, func() (*storage.Reader, error) { return o.NewRangeReader(ctx, 0, probeLen) })
	if errors.Is(classify(err), blob.ErrNotFound) || isOutOfRange(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return 0, err
	}
	return n, nil
}

func notFoundUnwritten(op, key string) error {
	return &blob.Error{Op: op, Key: key, Kind: blob.ErrNotFound, Err: errUnwritten}
}

// visible drops the unwritten prewarmed objects from one response of a
// listing, checking the doubtful ones concurrently.
func (s *Store) visible(ctx context.Context, attrs []*storage.ObjectAttrs) ([]*storage.ObjectAttrs, error) {
	hide := make([]bool, len(attrs))
	errs := make([]error, len(attrs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, a := range attrs {
		if a.Prefix != "" || !marked(a.Metadata) || a.Size > 0 {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			hide[i], errs[i] = s.unwritten(ctx, a)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := attrs[:0]
	for i, a := range attrs {
		if !hide[i] {
			out = append(out, a)
		}
	}
	return out, nil
}
