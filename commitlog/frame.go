package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A segment is a sequence of frames. Every append carries one or more whole
// frames, so a reader that sees a prefix of a segment sees whole frames plus,
// at most, an incomplete one at the end (a stream still being flushed).
//
//	magic   [4]byte "ZCL1"
//	length  uint32  length of the body
//	crc     uint32  CRC-32C of the body
//	body:
//	  kind   uint8   frameHeader, frameData, frameFence or frameSeal
//	  epoch  uint64  epoch of the writer (or recovery) that wrote the frame
//	  first  int64   offset of the first record (header: the segment's first offset)
//	  count  uint32  number of records
//	  lac    int64   last-add-confirmed when the frame was cut, -1 if none
//	  header only: prevEpoch uint64, prevFirst int64 (the segment this one follows)
//	  records: count x (uvarint length, bytes)
const (
	frameMagic      = "ZCL1"
	frameHeaderSize = 12
	bodyFixedSize   = 1 + 8 + 8 + 4 + 8
)

type frameKind uint8

const (
	frameHeader frameKind = 1 // first frame of a segment: its key and predecessor
	frameData   frameKind = 2 // records (count may be 0: a frame that only publishes the LAC)
	frameFence  frameKind = 3 // a recovery at epoch fenced the segment here
	frameSeal   frameKind = 4 // the writer rolled to a new segment after this frame
	// frameMoved (5, tier.go) replaces a segment moved to the regional store.
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("commitlog: corrupt frame")

// frame is a decoded frame. Records alias the buffer it was decoded from.
type frame struct {
	kind      frameKind
	epoch     uint64
	first     int64
	lac       int64
	prevEpoch uint64
	prevFirst int64
	records   [][]byte
	raw       []byte // the whole encoded frame
	end       int64  // position in the segment just after this frame
}

// encodeFrame encodes a frame.
func encodeFrame(kind frameKind, epoch uint64, first, lac int64, records [][]byte) []byte {
	return encode(kind, epoch, first, lac, 0, 0, records)
}

func encodeHeader(k segKey, prev segKey) []byte {
	return encode(frameHeader, k.epoch, k.first, -1, prev.epoch, prev.first, nil)
}

func encode(kind frameKind, epoch uint64, first, lac int64, prevEpoch uint64, prevFirst int64, records [][]byte) []byte {
	n := bodyFixedSize
	if kind == frameHeader {
		n += 16
	}
	for _, r := range records {
		n += binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(r))) + len(r)
	}
	b := make([]byte, frameHeaderSize, frameHeaderSize+n)
	copy(b, frameMagic)
	binary.BigEndian.PutUint32(b[4:], uint32(n))
	b = append(b, byte(kind))
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(first))
	b = binary.BigEndian.AppendUint32(b, uint32(len(records)))
	b = binary.BigEndian.AppendUint64(b, uint64(lac))
	if kind == frameHeader {
		b = binary.BigEndian.AppendUint64(b, prevEpoch)
		b = binary.BigEndian.AppendUint64(b, uint64(prevFirst))
	}
	for _, r := range records {
		b = binary.AppendUvarint(b, uint64(len(r)))
		b = append(b, r...)
	}
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[frameHeaderSize:], crcTable))
	return b
}

// decodeFrames decodes the whole frames at the start of p. It returns them
// and the bytes they take; an incomplete frame at the end is left undecoded.
// Bytes that are not a frame are an error wrapping errCorrupt.
func decodeFrames(p []byte) ([]frame, int, error) {
	var out []frame
	off := 0
	for len(p)-off >= frameHeaderSize {
		h := p[off:]
		if string(h[:4]) != frameMagic {
			return out, off, fmt.Errorf("%w: bad magic at byte %d", errCorrupt, off)
		}
		n := int(binary.BigEndian.Uint32(h[4:]))
		if n < bodyFixedSize || n > maxFrameBody {
			return out, off, fmt.Errorf("%w: body length %d at byte %d", errCorrupt, n, off)
		}
		if len(h) < frameHeaderSize+n {
			break
		}
		body := h[frameHeaderSize : frameHeaderSize+n]
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(h[8:]) {
			return out, off, fmt.Errorf("%w: checksum mismatch at byte %d", errCorrupt, off)
		}
		f, err := decodeBody(body)
		if err != nil {
			return out, off, fmt.Errorf("%w at byte %d", err, off)
		}
		f.raw = h[:frameHeaderSize+n]
		off += frameHeaderSize + n
		f.end = int64(off)
		out = append(out, f)
	}
	return out, off, nil
}

// maxFrameBody bounds a frame so that a corrupt length cannot make a reader
// wait for gigabytes.
const maxFrameBody = 1 << 30

func decodeBody(b []byte) (frame, error) {
	f := frame{
		kind:  frameKind(b[0]),
		epoch: binary.BigEndian.Uint64(b[1:]),
		first: int64(binary.BigEndian.Uint64(b[9:])),
		lac:   int64(binary.BigEndian.Uint64(b[21:])),
	}
	count := binary.BigEndian.Uint32(b[17:])
	rest := b[bodyFixedSize:]
	switch f.kind {
	case frameHeader:
		if len(rest) < 16 {
			return f, fmt.Errorf("%w: short header", errCorrupt)
		}
		f.prevEpoch = binary.BigEndian.Uint64(rest)
		f.prevFirst = int64(binary.BigEndian.Uint64(rest[8:]))
		rest = rest[16:]
	case frameData, frameFence, frameSeal, frameMoved:
	default:
		return f, fmt.Errorf("%w: kind %d", errCorrupt, f.kind)
	}
	if count > uint32(len(rest)) {
		return f, fmt.Errorf("%w: %d records in %d bytes", errCorrupt, count, len(rest))
	}
	f.records = make([][]byte, 0, count)
	for range count {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return f, fmt.Errorf("%w: record length", errCorrupt)
		}
		f.records = append(f.records, rest[n:n+int(l)])
		rest = rest[n+int(l):]
	}
	if len(rest) != 0 {
		return f, fmt.Errorf("%w: %d trailing bytes", errCorrupt, len(rest))
	}
	return f, nil
}
