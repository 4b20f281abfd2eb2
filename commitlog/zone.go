package commitlog

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// segKey names a segment: the epoch of the writer that created it and the
// offset of its first record. Names sort as keys do: by epoch, then offset.
type segKey struct {
	epoch uint64
	first int64
}

func (k segKey) String() string { return fmt.Sprintf("%010d-%020d", k.epoch, k.first) }

// compare orders keys by epoch, then by first offset, as their names sort.
func (k segKey) compare(o segKey) int {
	return cmp.Or(cmp.Compare(k.epoch, o.epoch), cmp.Compare(k.first, o.first))
}

// maxSegEpoch is the highest epoch a segment's name can hold (10 digits).
// An epoch key above it is damage, never a writer's: no writer claims one.
const maxSegEpoch = 9_999_999_999

func parseSegKey(s string) (segKey, bool) {
	e, f, ok := strings.Cut(s, "-")
	if !ok || len(e) != 10 || len(f) != 20 || !digits(e) || !digits(f) {
		return segKey{}, false
	}
	ep, err1 := strconv.ParseUint(e, 10, 64)
	fi, err2 := strconv.ParseInt(f, 10, 64)
	if err1 != nil || err2 != nil {
		return segKey{}, false
	}
	return segKey{ep, fi}, true
}

// parseEpoch parses the name of an epoch key: exactly 20 digits, at most
// maxSegEpoch.
func parseEpoch(s string) (uint64, bool) {
	if len(s) != 20 || !digits(s) {
		return 0, false
	}
	e, err := strconv.ParseUint(s, 10, 64)
	return e, err == nil && e <= maxSegEpoch
}

func digits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

// mode is how a zone stores a segment.
type mode int

const (
	// modeAppend: one object per segment, each append conditional on the
	// object's size (blob.Appender with IfSizeMatch). Positions are bytes.
	modeAppend mode = iota
	// modeStream: one object per segment appended to over a long-lived
	// stream (blob.AppendStreamer); taking the stream over fences the
	// previous holder. Positions are bytes.
	modeStream
	// modeSlots, for stores without appends: a segment is a directory of
	// numbered slot objects, each created with IfNotExist, so that two
	// writers of the same slot have one winner. Positions are slot numbers.
	modeSlots
)

func (m mode) String() string {
	return [...]string{"append", "stream", "slots"}[m]
}

// zone is the log on one Store.
type zone struct {
	idx  int
	s    blob.Store
	log  string // the log's name, the prefix of every key
	mode mode

	mu      sync.Mutex
	streams map[segKey]blob.AppendStream
	// foreign counts names under the log's prefixes that do not parse:
	// skipped, never trusted (see Stats.Foreign).
	foreign atomic.Int64
	// amnesic: the zone lacks the log's intact marker (replaced by an empty
	// bucket, or lost objects, or was down when the log began), so its
	// answers may lack what it once held. Its answers are used but never
	// counted toward a quorum that absence is read from (see intactEpoch).
	amnesic atomic.Bool
}

func (z *zone) segPrefix() string { return z.log + "/seg/" }
func (z *zone) segKey(k segKey) string {
	if z.mode == modeSlots {
		return z.segPrefix() + k.String() + "/"
	}
	return z.segPrefix() + k.String()
}
func slotKey(dir string, n int64) string { return fmt.Sprintf("%s%010d", dir, n) }

// create creates segment k holding content. It fails with an error wrapping
// blob.ErrExists if the segment exists.
func (z *zone) create(ctx context.Context, k segKey, content []byte) error {
	switch z.mode {
	case modeSlots:
		return blob.Put(ctx, z.s, slotKey(z.segKey(k), 0), content, &blob.WriterOptions{If: blob.IfNotExist()})
	case modeStream:
		st, err := z.s.(blob.AppendStreamer).CreateAppendStream(ctx, z.segKey(k), content)
		if err != nil {
			return err
		}
		z.setStream(k, st)
		return nil
	}
	return blob.Put(ctx, z.s, z.segKey(k), content, &blob.WriterOptions{If: blob.IfNotExist()})
}

// append adds content to segment k if the segment ends at pos, and returns
// the new end. A segment that no longer ends at pos fails with an error
// wrapping blob.ErrPrecondition: someone else appended (a recovery's fence,
// or an earlier append of ours that failed after taking effect).
func (z *zone) append(ctx context.Context, k segKey, pos int64, content []byte) (int64, error) {
	switch z.mode {
	case modeSlots:
		err := blob.Put(ctx, z.s, slotKey(z.segKey(k), pos), content, &blob.WriterOptions{If: blob.IfNotExist()})
		if errors.Is(err, blob.ErrExists) {
			err = &blob.Error{Op: driver.OpAppend, Key: slotKey(z.segKey(k), pos), Kind: blob.ErrPrecondition, Err: err}
		}
		if err != nil {
			return pos, err
		}
		return pos + 1, nil
	case modeStream:
		st, err := z.stream(ctx, k)
		if err != nil {
			return pos, err
		}
		if st.Size() != pos {
			return pos, blob.Errorf(driver.OpAppend, z.segKey(k), blob.ErrPrecondition, "segment is %d bytes, not %d", st.Size(), pos)
		}
		if err := st.Append(ctx, content); err != nil {
			z.dropStream(k, st)
			return pos, err
		}
		return pos + int64(len(content)), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := blob.Append(ctx, z.s, z.segKey(k), &blob.AppendOptions{IfSizeMatch: pos})
	if err != nil {
		return pos, err
	}
	if _, err := w.Write(content); err != nil {
		cancel()
		w.Close()
		return pos, err
	}
	if err := w.Close(); err != nil {
		return pos, err
	}
	return pos + int64(len(content)), nil
}

// errCopyLost: a zone no longer holds the copy of a segment its writer was
// appending to (replaced by an empty bucket, or the segment deleted), so
// what the writer appends there is no part of that copy.
var errCopyLost = errors.New("commitlog: the zone lost its copy of the segment")

// appendAfter is append for the segment's writer, whose last append to k on
// z put prev at pos-1 (or whose create put it at 0), and for a recovery's
// copies after its fence (prev: the fence's slot, or its last copy's). In
// the slot layout a slot is created whether or not the slots before it
// exist: on a zone replaced by an empty bucket, or where the segment was
// deleted, the slot a recovery's fence took is free again, and an old
// writer's append (or the recovery's copy) there would succeed, and count
// toward W, in a copy no reader or recovery sees (no header, no fence).
// So once the slot is written, the slot before it must still hold prev:
// then the zone kept this copy from the slot before to now, and the slot
// is on it. Otherwise the append fails (errCopyLost): the writer's resync
// after it fails too (see resyncOn), and the zone sits the segment out;
// the recovery does not count the zone. The other layouts need no check: an append
// conditional on an object that is gone fails on its own.
func (z *zone) appendAfter(ctx context.Context, k segKey, pos int64, prev, content []byte) (int64, error) {
	newPos, err := z.append(ctx, k, pos, content)
	if err != nil || z.mode != modeSlots || pos == 0 {
		return newPos, err
	}
	key := slotKey(z.segKey(k), pos-1)
	p, err := blob.ReadAll(ctx, z.s, key)
	if errors.Is(err, blob.ErrNotFound) || err == nil && !bytes.Equal(p, prev) {
		return pos, fmt.Errorf("%w: slot %s is gone or not the one written", errCopyLost, key)
	}
	if err != nil {
		return pos, err
	}
	return newPos, nil
}

func (z *zone) setStream(k segKey, st blob.AppendStream) {
	z.mu.Lock()
	old := z.streams[k]
	z.streams[k] = st
	z.mu.Unlock()
	// Closed once z.mu is released (see closeStreams).
	if old != nil && old != st {
		old.Close()
	}
}

func (z *zone) dropStream(k segKey, st blob.AppendStream) {
	z.mu.Lock()
	if z.streams[k] == st {
		delete(z.streams, k)
	}
	z.mu.Unlock()
	st.Close()
}

// stream returns the open stream of segment k, taking the object over if
// this process holds none (which fences whoever held it).
func (z *zone) stream(ctx context.Context, k segKey) (blob.AppendStream, error) {
	if st := z.held(k); st != nil {
		return st, nil
	}
	st, err := z.s.(blob.AppendStreamer).TakeOverAppendStream(ctx, z.segKey(k))
	if err != nil {
		return nil, err
	}
	z.setStream(k, st)
	return st, nil
}

// held returns the stream of segment k this process holds, if any.
func (z *zone) held(k segKey) blob.AppendStream {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.streams[k]
}

// forget stops using st, a stream of segment k that failed, and ends it in
// the background: its Sends in flight fail with it, and their callbacks
// must not run under the caller's locks.
func (z *zone) forget(k segKey, st blob.AppendStream) {
	z.mu.Lock()
	if z.streams[k] == st {
		delete(z.streams, k)
	}
	z.mu.Unlock()
	go st.Close()
}

// dropSegmentStream ends this process's stream of segment k, if any.
func (z *zone) dropSegmentStream(k segKey) {
	z.mu.Lock()
	st := z.streams[k]
	delete(z.streams, k)
	z.mu.Unlock()
	if st != nil {
		st.Close() // once z.mu is released (see closeStreams)
	}
}

// holdsStreams reports that this process holds a stream on z.
func (z *zone) holdsStreams() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.streams) > 0
}

// closeStreams ends the streams of every segment before keep (all of them
// if keep is nil); those of later segments, created ahead of their roll, stay.
//
// The streams are closed once z.mu is released: closing a pipelined stream
// fails its Sends in flight, whose callbacks take l.mu and then z.mu (see
// forget), which deadlocked when a create that ran as the writer closed
// ended its streams.
func (z *zone) closeStreams(keep *segKey) {
	var closing []blob.AppendStream
	z.mu.Lock()
	for k, st := range z.streams {
		if keep == nil || k.compare(*keep) < 0 {
			closing = append(closing, st)
			delete(z.streams, k)
		}
	}
	z.mu.Unlock()
	for _, st := range closing {
		st.Close()
	}
}

// read returns the whole frames of segment k from pos on and the position
// after the last of them. A missing segment fails with blob.ErrNotFound.
func (z *zone) read(ctx context.Context, k segKey, pos int64) ([]frame, int64, error) {
	if z.mode == modeSlots {
		return z.readSlots(ctx, k, pos)
	}
	p, err := blob.ReadRange(ctx, z.s, z.segKey(k), pos, -1)
	if err != nil {
		return nil, pos, err
	}
	return z.decode(k, pos, p, true)
}

// readSome is read bounded to about limit bytes, for a reader that must
// not wait for, or hold, a whole segment at once (a reader far behind, or
// one catching up on a zone it had not read): it returns the whole frames
// of the limit bytes from pos on, or the frame that starts at pos whole if
// it is longer. limit <= 0, and slot copies, read as read does.
func (z *zone) readSome(ctx context.Context, k segKey, pos, limit int64) ([]frame, int64, error) {
	if limit <= 0 || z.mode == modeSlots {
		return z.read(ctx, k, pos)
	}
	p, err := blob.ReadRange(ctx, z.s, z.segKey(k), pos, limit)
	if err != nil {
		return nil, pos, err
	}
	if int64(len(p)) < limit {
		return z.decode(k, pos, p, true) // the end of the copy
	}
	if len(p) >= frameHeaderSize && string(p[:4]) == frameMagic {
		if n := frameHeaderSize + int64(binary.BigEndian.Uint32(p[4:])); n > limit && n <= frameHeaderSize+maxFrameBody {
			return z.readSome(ctx, k, pos, n)
		}
	}
	return z.decode(k, pos, p, false)
}

// decode decodes the bytes p read from pos of segment k; whole says they
// run to the end of the copy, so that a piece of a frame after the last
// whole one can be told from a frame the bound cut.
func (z *zone) decode(k segKey, pos int64, p []byte, whole bool) ([]frame, int64, error) {
	frames, n, err := decodeFrames(p)
	for i := range frames {
		frames[i].end += pos
	}
	if tail := len(p) - n; whole && err == nil && tail > 0 && tail < frameHeaderSize {
		// Fewer bytes than a frame's header after the last whole frame:
		// not a frame being written (an append reaches the store in one
		// piece, or in pieces of megabytes), but damage. Waiting for it
		// to complete, or appending after it, would never end.
		err = fmt.Errorf("%w: %d bytes after the last frame, at byte %d", errCorrupt, tail, n)
	}
	if err != nil {
		return frames, pos + int64(n), blob.Errorf(driver.OpRead, z.segKey(k), nil, "%w", err)
	}
	return frames, pos + int64(n), nil
}

func (z *zone) readSlots(ctx context.Context, k segKey, pos int64) ([]frame, int64, error) {
	dir := z.segKey(k)
	var out []frame
	for {
		p, err := blob.ReadAll(ctx, z.s, slotKey(dir, pos))
		if errors.Is(err, blob.ErrNotFound) {
			if pos == 0 {
				return nil, 0, err
			}
			return out, pos, nil
		}
		if err != nil {
			return out, pos, err
		}
		frames, n, err := decodeFrames(p)
		if err == nil && n != len(p) {
			err = fmt.Errorf("%w: slot ends inside a frame", errCorrupt)
		}
		if err != nil {
			return out, pos, blob.Errorf(driver.OpRead, slotKey(dir, pos), nil, "%w", err)
		}
		pos++
		for i := range frames {
			frames[i].end = pos
		}
		out = append(out, frames...)
	}
}

// readPrefix returns the whole frames in about the first n bytes of
// segment k (the first few slots in slot mode).
func (z *zone) readPrefix(ctx context.Context, k segKey, n int64) ([]frame, error) {
	if z.mode == modeSlots {
		var out []frame
		for i := range int64(4) {
			p, err := blob.ReadAll(ctx, z.s, slotKey(z.segKey(k), i))
			if err != nil {
				return out, err
			}
			frames, _, err := decodeFrames(p)
			out = append(out, frames...)
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	p, err := blob.ReadRange(ctx, z.s, z.segKey(k), 0, n)
	if err != nil {
		return nil, err
	}
	frames, _, err := decodeFrames(p)
	return frames, err
}

// readHeader returns the header frame of segment k.
func (z *zone) readHeader(ctx context.Context, k segKey) (frame, error) {
	key := z.segKey(k)
	var p []byte
	var err error
	if z.mode == modeSlots {
		key = slotKey(key, 0)
		p, err = blob.ReadAll(ctx, z.s, key)
	} else {
		p, err = blob.ReadRange(ctx, z.s, key, 0, frameHeaderSize+bodyFixedSize+16)
	}
	if err != nil {
		return frame{}, err
	}
	frames, _, err := decodeFrames(p)
	if len(frames) > 0 && frames[0].kind == frameMoved {
		return frame{}, blob.Errorf(driver.OpRead, key, nil, "%w", errMovedSegment)
	}
	if err != nil || len(frames) == 0 || frames[0].kind != frameHeader {
		return frame{}, blob.Errorf(driver.OpRead, key, nil, "%w: no segment header (%v)", errCorrupt, err)
	}
	return frames[0], nil
}

// errMovedSegment: the zone holds a moved marker in place of the segment.
var errMovedSegment = errors.New("commitlog: segment moved to the regional store")

// listSegments returns the segments this zone holds from key from on (all
// of them if from is nil), in order.
func (z *zone) listSegments(ctx context.Context, from *segKey) ([]segKey, error) {
	ks, _, err := z.listLog(ctx, from)
	return ks, err
}

// listLog is listSegments that also returns the highest start a truncation
// recorded on z (0 if none).
func (z *zone) listLog(ctx context.Context, from *segKey) ([]segKey, int64, error) {
	var out []segKey
	var start int64
	prefix := z.segPrefix()
	opts := &blob.ListOptions{Prefix: prefix, Delimiter: "/"}
	if from != nil {
		// Just below from's name, so that from itself (an object, or a
		// directory of slots) is listed.
		opts.StartAfter = strings.TrimSuffix(z.segKey(*from), "/")
		opts.StartAfter = opts.StartAfter[:len(opts.StartAfter)-1]
	}
	for o, err := range blob.All(ctx, z.s, opts) {
		if err != nil {
			return nil, 0, err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/")
		if k, ok := parseSegKey(name); ok {
			out = append(out, k)
		} else if s, ok := parseStart(name); ok {
			start = max(start, s)
		} else {
			z.foreign.Add(1)
		}
	}
	return out, start, nil
}

// The start of the log. A truncation records the start it sets out to
// reach on every zone, as an empty object name/seg/start-<offset>, before
// it deletes anything; listings of the chain (readers, Open, the mover,
// the repair) drop every segment below the highest start any zone they
// read records. A segment deleted by a truncation can come back: a create
// or repair copy that was on the wire when the truncation listed, landing
// late (the services apply a request after its client gave up), or an
// older writer's repair made before it learned of a newer writer. Without
// the record such a copy, on one zone, would be taken for the log's first
// segment, and readers opened below the start would be served records
// from it (or wait for the rest of them) instead of ErrTruncated. With it
// the copy is garbage, which the next truncation deletes with the names
// below its start. The name sorts after every segment's (a letter after
// digits), so each listing of the segments reads it, at no extra request.
const startPrefix = "start-"

func (z *zone) startKey(start int64) string {
	return fmt.Sprintf("%s%s%020d", z.segPrefix(), startPrefix, start)
}

func parseStart(name string) (int64, bool) {
	d, ok := strings.CutPrefix(name, startPrefix)
	if !ok || len(d) != 20 || !digits(d) {
		return 0, false
	}
	s, err := strconv.ParseInt(d, 10, 64)
	return s, err == nil
}

// raiseStart records start on z, and removes the lower starts recorded
// there (the highest is the one that counts). Each request is bounded by
// timeout on its own (see deleteKeys).
func (z *zone) raiseStart(ctx context.Context, start int64, timeout time.Duration) error {
	if start <= 0 {
		return nil
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	err := blob.Put(c, z.s, z.startKey(start), nil, &blob.WriterOptions{If: blob.IfNotExist()})
	cancel()
	if err != nil && !errors.Is(err, blob.ErrExists) {
		return err
	}
	prefix := z.segPrefix() + startPrefix
	keys, err := z.listKeys(ctx, prefix, timeout)
	if err != nil {
		return err
	}
	old := slices.DeleteFunc(keys, func(k string) bool {
		s, ok := parseStart(strings.TrimPrefix(k, z.segPrefix()))
		return !ok || s >= start
	})
	return z.deleteKeys(ctx, old, timeout)
}

// fromStart drops the keys of segments below start.
func fromStart(keys []segKey, start int64) []segKey {
	return slices.DeleteFunc(keys, func(k segKey) bool { return k.first < start })
}

func (z *zone) epochKey(e uint64) string { return fmt.Sprintf("%s/epoch/%020d", z.log, e) }

// intactEpoch is the claim no writer makes (claims start at 1): its object
// on a zone is the log's intact marker, saying the zone holds everything of
// the log it was given. The first Open of a log writes it on every zone
// that answers; a zone replaced by an empty bucket loses it with the rest,
// and a writer's repair puts it back once the zone holds again every
// record it could have held. Quorums whose reasoning reads absence (the
// epochs above a claim, the segments of the chain, the records of the tip)
// count only zones that hold it: a record acknowledged on W zones is then
// on at least one of any N-W+1 intact ones.
const intactEpoch = 0

// claims returns the highest epoch claimed on this zone and whether it holds
// the intact marker.
func (z *zone) claims(ctx context.Context) (uint64, bool, error) {
	return z.claimsAfter(ctx, "")
}

// claimsAfter lists the claims named after startAfter: the highest, and
// whether the intact marker is among them.
func (z *zone) claimsAfter(ctx context.Context, startAfter string) (uint64, bool, error) {
	prefix := z.log + "/epoch/"
	var m uint64
	intact := false
	for o, err := range blob.All(ctx, z.s, &blob.ListOptions{Prefix: prefix, StartAfter: startAfter}) {
		if err != nil {
			return 0, false, err
		}
		e, ok := parseEpoch(strings.TrimPrefix(o.Key, prefix))
		if !ok {
			z.foreign.Add(1)
			continue
		}
		intact = intact || e == intactEpoch
		m = max(m, e)
	}
	return m, intact, nil
}

// recheckIntact looks for the intact marker again after a read whose
// answer counts toward a quorum that reads absence (an Open's listing of
// the segments, a recovery's fenced copy), and makes the zone amnesic if
// the marker is gone. An Open reads each zone's marker with its epochs,
// before it lists and fences: a zone replaced by an empty bucket after
// that and before the read answers from the empty bucket, and counted
// as intact it would hide records acknowledged on it and one zone that
// does not answer (the recovery would end before them, and the new
// writer's records would take their offsets). A marker found after the
// read was there before it: the read was of the zone as it was.
func (z *zone) recheckIntact(ctx context.Context) error {
	intact, err := blob.Exists(ctx, z.s, z.epochKey(intactEpoch))
	if err != nil {
		return err
	}
	if !intact {
		z.amnesic.Store(true)
	}
	return nil
}

// createEpoch claims epoch e on this zone (blob.ErrExists if taken).
func (z *zone) createEpoch(ctx context.Context, e uint64) error {
	return blob.Put(ctx, z.s, z.epochKey(e), nil, &blob.WriterOptions{If: blob.IfNotExist()})
}

// maxEpoch returns the highest epoch claimed on this zone after "after".
func (z *zone) maxEpoch(ctx context.Context, after uint64) (uint64, error) {
	m, _, err := z.claimsAfter(ctx, z.epochKey(after))
	return m, err
}
