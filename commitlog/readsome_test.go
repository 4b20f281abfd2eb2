package commitlog

import (
	"bytes"
	"context"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
)

// TestReadSomeIsReadInPieces: a bounded read of a segment returns its
// frames a piece at a time, the same frames at the same positions as one
// whole read, no piece past the bound unless it is one frame longer than
// the bound (returned whole, never cut), and every piece at least one
// frame, so that a reader moving from piece to piece never stalls. Frames
// of every size around the bound, up to 5 times it.
func TestReadSomeIsReadInPieces(t *testing.T) {
	ctx := context.Background()
	const limit = 1000
	z := &zone{idx: 0, s: testkit.Mem(t), log: "pieces", mode: modeAppend}
	k := segKey{1, 0}
	var seg []byte
	seg = append(seg, encodeHeader(k, segKey{})...)
	next := int64(0)
	for _, n := range []int{1, 10, limit - 100, limit, limit + 1, 3, 5 * limit, 2, limit / 2, limit / 2, 4 * limit} {
		rec := bytes.Repeat([]byte{byte(n)}, n)
		seg = append(seg, encodeFrame(frameData, 1, next, next-1, [][]byte{rec})...)
		next++
	}
	seg = append(seg, encodeFrame(frameSeal, 1, next, next-1, nil)...)
	if err := blob.Put(ctx, z.s, z.segKey(k), seg, nil); err != nil {
		t.Fatal(err)
	}
	whole, end, err := z.read(ctx, k, 0)
	if err != nil || end != int64(len(seg)) {
		t.Fatalf("whole read: %d frames to %d of %d, %v", len(whole), end, len(seg), err)
	}
	var got []frame
	pos := int64(0)
	for pos < end {
		frames, next, err := z.readSome(ctx, k, pos, limit)
		if err != nil {
			t.Fatalf("piece at %d: %v", pos, err)
		}
		if len(frames) == 0 {
			t.Fatalf("piece at %d returned no frame", pos)
		}
		if n := next - pos; n > limit && len(frames) > 1 {
			t.Errorf("piece at %d: %d bytes in %d frames, past the bound %d", pos, n, len(frames), limit)
		}
		got = append(got, frames...)
		pos = next
	}
	if len(got) != len(whole) {
		t.Fatalf("pieces returned %d frames, the whole read %d", len(got), len(whole))
	}
	for i := range got {
		if got[i].end != whole[i].end || !bytes.Equal(got[i].raw, whole[i].raw) {
			t.Errorf("frame %d: pieces returned it ending at %d, the whole read at %d", i, got[i].end, whole[i].end)
		}
	}
}
