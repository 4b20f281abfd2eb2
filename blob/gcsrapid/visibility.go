package gcsrapid

import (
	"context"
	"errors"
	"io"
	"maps"
	"strconv"

	"cloud.google.com/go/storage"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/parallel"
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

// writeIDKey is the metadata key of the random identifier a write gives the
// object it creates, so that after a stream failed before the service's reply
// (which carries the generation) the writer can tell its own object from
// another writer's: it completes or deletes its own, never another's.
const writeIDKey = "zonalblob-write"

// withWriteID returns opts with the write identifier id, and the declared
// size if not empty (see sizeKey), added to its metadata.
func withWriteID(opts *blob.WriterOptions, id, size string) *blob.WriterOptions {
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	md := make(map[string]string, len(o.Metadata)+2)
	maps.Copy(md, o.Metadata)
	md[writeIDKey] = id
	if size != "" {
		md[sizeKey] = size
	}
	o.Metadata = md
	return &o
}

// withoutMark returns md without the driver's own keys: the prewarm mark and
// the write identifier.
func withoutMark(md map[string]string) map[string]string {
	_, m := md[prewarmedKey]
	_, w := md[writeIDKey]
	_, z := md[sizeKey]
	if !m && !w && !z {
		return md
	}
	md = maps.Clone(md)
	delete(md, prewarmedKey)
	delete(md, writeIDKey)
	delete(md, sizeKey)
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
	if !doubtful(a.Metadata, a.Size) {
		return false, nil
	}
	hide, n, err := s.hidden(ctx, a.Name, a.Generation, a.Metadata, a.Size)
	if err != nil {
		return false, err
	}
	a.Size = n
	return hide, nil
}

// sizeKey is the metadata key under which a write of more than one message
// declares its size when it creates its object, or "?" while a streamed
// write's size is unknown (cleared by its commit). The service makes an object
// live as soon as the message that creates it arrives, and a write larger than
// one message (maxMessage) reaches it in pieces; so an object that declares a
// size and holds fewer bytes, or declares "?", holds no committed write, and
// Stat, List and reads hide it, as they hide an unwritten prewarmed object.
const sizeKey = "zonalblob-size"

// maxMessage is the most object data one write message carries (the client's
// quantum and a Rapid bucket's limit): a write of at most this much reaches
// the service with the message that creates its object, so it appears whole.
const maxMessage = 2 << 20

// declaredSize returns the size md declares: ok is false if it declares none,
// and n is -1 for a streamed write not yet committed.
func declaredSize(md map[string]string) (n int64, ok bool) {
	v := md[sizeKey]
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return -1, true
	}
	return n, true
}

// doubtful reports whether an object with metadata md whose size is reported
// as size may hold no committed write: it declares a size it does not reach
// (by the report, which may be out of date), or is a prewarmed object that
// reports no bytes.
func doubtful(md map[string]string, size int64) bool {
	if d, ok := declaredSize(md); ok {
		return d < 0 || size < d
	}
	return marked(md) && size == 0
}

// hidden reports whether generation gen of key, with metadata md and
// reported size, holds no committed write, and its size as far as known. It
// reads the object to settle a doubtful size: its byte at the declared size
// minus one, or up to probeLen bytes of a prewarmed object.
func (s *Store) hidden(ctx context.Context, key string, gen int64, md map[string]string, size int64) (bool, int64, error) {
	if d, ok := declaredSize(md); ok {
		switch {
		case d < 0:
			return true, size, nil
		case size >= d:
			return false, size, nil
		}
		whole, err := s.reaches(ctx, key, gen, d)
		if err != nil || !whole {
			return !whole, size, err
		}
		return false, d, nil
	}
	if !marked(md) || size > 0 {
		return false, size, nil
	}
	n, err := s.probe(ctx, key, gen)
	if err != nil {
		return false, size, err
	}
	return n == 0, n, nil
}

// reaches reports whether generation gen of key holds at least n > 0 bytes,
// by reading its byte n-1.
func (s *Store) reaches(ctx context.Context, key string, gen, n int64) (bool, error) {
	s.stats.probes.Add(1)
	o := s.bucket.Object(key)
	if gen > 0 {
		o = o.Generation(gen)
	}
	r, err := openRead(ctx, s, func() (*storage.Reader, error) { return o.NewRangeReader(ctx, n-1, 1) })
	if errors.Is(classify(err), blob.ErrNotFound) || isOutOfRange(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close()
	k, err := io.Copy(io.Discard, r)
	return k == 1, err
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
	var doubt []int
	for i, a := range attrs {
		if a.Prefix == "" && doubtful(a.Metadata, a.Size) {
			doubt = append(doubt, i)
		}
	}
	parallel.Do(len(doubt), 16, func(j int) {
		i := doubt[j]
		hide[i], errs[i] = s.unwritten(ctx, attrs[i])
	})
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
