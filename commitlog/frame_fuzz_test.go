package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// FuzzDecodeFrames feeds decodeFrames arbitrary bytes, as a damaged or
// foreign segment holds: it never panics, never claims more bytes than it
// was given, and every frame it returns is exactly the encoding of what it
// decoded (so nothing it accepts is misread); what it leaves undecoded
// without an error is an incomplete frame, and every error is errCorrupt.
func FuzzDecodeFrames(f *testing.F) {
	seg := segKey{3, 100}
	frames := [][]byte{
		encodeHeader(seg, segKey{2, 40}),
		encodeFrame(frameData, 3, 100, 99, [][]byte{[]byte("a"), {}, bytes.Repeat([]byte("r"), 300)}),
		encodeFrame(frameData, 3, 103, 102, nil),
		encodeFrame(frameFence, 4, 103, 102, nil),
		encodeFrame(frameSeal, 3, 103, 102, nil),
		encodeFrame(frameMoved, 3, 103, 102, [][]byte{[]byte("regional")}),
	}
	all := bytes.Join(frames, nil)
	f.Add(all)
	for _, fr := range frames {
		f.Add(fr)
		f.Add(fr[:len(fr)-1])
	}
	f.Add(all[:len(all)/2])
	f.Add([]byte("ZCL1\x00\x00\x00\x1d"))
	f.Fuzz(func(t *testing.T, p []byte) {
		out, n, err := decodeFrames(p)
		if n < 0 || n > len(p) {
			t.Fatalf("consumed %d of %d bytes", n, len(p))
		}
		if err != nil && !errors.Is(err, errCorrupt) {
			t.Fatalf("error %v does not wrap errCorrupt", err)
		}
		pos := 0
		for i, fr := range out {
			again := encode(fr.kind, fr.epoch, fr.first, fr.lac, fr.prevEpoch, fr.prevFirst, fr.records)
			if !bytes.Equal(again, fr.raw) || !bytes.Equal(fr.raw, p[pos:pos+len(fr.raw)]) {
				t.Fatalf("frame %d is not the encoding of what was decoded from it", i)
			}
			pos += len(fr.raw)
			if fr.end != int64(pos) {
				t.Fatalf("frame %d ends at %d, want %d", i, fr.end, pos)
			}
		}
		if pos != n {
			t.Fatalf("frames take %d bytes, decodeFrames says %d", pos, n)
		}
		if err == nil && n < len(p) {
			rest := p[n:]
			if len(rest) >= frameHeaderSize && string(rest[:4]) == frameMagic {
				if body := int(uint32(rest[4])<<24 | uint32(rest[5])<<16 | uint32(rest[6])<<8 | uint32(rest[7])); frameHeaderSize+body <= len(rest) {
					t.Fatalf("a whole frame of %d bytes was left undecoded without an error", frameHeaderSize+body)
				}
			} else if len(rest) >= frameHeaderSize {
				t.Fatalf("%d bytes that are not a frame were left without an error", len(rest))
			}
		}
	})
}

// FuzzSegmentNames: a name parseSegKey or parseEpoch accepts is the one
// name of the key it parses to, so no two names stand for one segment or
// epoch, and every key the log can write parses back.
func FuzzSegmentNames(f *testing.F) {
	for _, s := range []string{"0000000003-00000000000000000100", "00000000000000000007", "9999999999-99999999999999999999", "0000000003-0000000000000000010", "+000000003-00000000000000000100", "10000000000000000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k, ok := parseSegKey(s); ok {
			if k.String() != s {
				t.Fatalf("%q parses to %v, whose name is %q", s, k, k.String())
			}
			if k.first < 0 {
				t.Fatalf("%q parses to a negative offset", s)
			}
		}
		if e, ok := parseEpoch(s); ok {
			if fmt.Sprintf("%020d", e) != s || e > maxSegEpoch {
				t.Fatalf("%q parses to epoch %d", s, e)
			}
		}
		for _, k := range []segKey{{0, 0}, {maxSegEpoch, 1<<63 - 1}, {uint64(len(s)), int64(len(s))}} {
			if got, ok := parseSegKey(k.String()); !ok || got != k {
				t.Fatalf("%v's name %q parses to %v, %v", k, k.String(), got, ok)
			}
		}
	})
}
