package gcsrapidtest

import (
	"crypto/md5"
	"hash/crc32"
)

// contentChunk is the most bytes one piece of an object's content holds.
const contentChunk = 1 << 20

// content is an object's bytes, held in pieces of at most contentChunk, so
// that an appendable object grows without its bytes being copied again at
// each doubling: a log segment of 64 MiB taking appends of a few KiB would
// otherwise spend the emulator's CPU (on the machine of the client it
// serves) on copies and on zeroing fresh memory that a real service does
// not charge to the client. Every piece but the last is full.
//
// A content is a value: an appended one shares its full pieces with the
// content it came from, and its last piece's array, written only past the
// length any earlier value holds; a snapshot (frozen) is never written
// through.
type content struct {
	pieces [][]byte
	n      int64
}

func contentOf(p []byte) content {
	var c content
	c.append(p)
	return c
}

func (c content) size() int64 { return c.n }

// append adds p. The last piece grows by doubling up to contentChunk, so
// that small objects stay small; beyond that each new piece is a chunk.
func (c *content) append(p []byte) {
	for len(p) > 0 {
		k := len(c.pieces) - 1
		if k < 0 || len(c.pieces[k]) == contentChunk {
			c.pieces = append(c.pieces, make([]byte, 0, min(max(len(p), 512), contentChunk)))
			k++
		}
		last := c.pieces[k]
		take := min(len(p), contentChunk-len(last))
		if len(last)+take > cap(last) {
			grown := make([]byte, len(last), min(max(2*cap(last), len(last)+take), contentChunk))
			copy(grown, last)
			last = grown
		}
		c.pieces[k] = append(last, p[:take]...)
		c.n += int64(take)
		p = p[take:]
	}
}

// frozen returns c with every piece clipped to its length, so that appends
// to c never reach what it holds (they go to a new array).
func (c content) frozen() content {
	ps := make([][]byte, len(c.pieces))
	for i, p := range c.pieces {
		ps[i] = p[:len(p):len(p)]
	}
	return content{pieces: ps, n: c.n}
}

// slice returns the bytes [off, end): the piece itself when they lie in one,
// a copy otherwise. The caller does not write to it.
func (c content) slice(off, end int64) []byte {
	if off == end {
		return nil
	}
	i, at := int(off/contentChunk), off%contentChunk
	if at+(end-off) <= int64(len(c.pieces[i])) {
		return c.pieces[i][at : at+(end-off)]
	}
	out := make([]byte, 0, end-off)
	for off < end {
		i, at := int(off/contentChunk), off%contentChunk
		p := c.pieces[i][at:min(int64(len(c.pieces[i])), at+(end-off))]
		out = append(out, p...)
		off += int64(len(p))
	}
	return out
}

// prefix returns a copy of the first n bytes, sharing nothing with c.
func (c content) prefix(n int64) content {
	var out content
	content{pieces: c.pieces, n: min(n, c.n)}.each(out.append)
	return out
}

// each calls f with the pieces in order, up to c's size.
func (c content) each(f func([]byte)) {
	n := c.n
	for _, p := range c.pieces {
		take := min(int64(len(p)), n)
		if take == 0 {
			return
		}
		f(p[:take])
		n -= take
	}
}

func (c content) crc() uint32 {
	var sum uint32
	c.each(func(p []byte) { sum = crc32.Update(sum, crc32cTable, p) })
	return sum
}

func (c content) md5() [md5.Size]byte {
	h := md5.New()
	c.each(func(p []byte) { h.Write(p) })
	var sum [md5.Size]byte
	h.Sum(sum[:0])
	return sum
}
