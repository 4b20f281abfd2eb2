package gcsrapidtest

import (
	"bytes"
	"crypto/md5"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestContentMatchesBytes grows contents by appends of every size around
// the piece boundary, keeping frozen snapshots on the way, and checks each
// snapshot and the live content against the plain bytes they stand for:
// sizes, every kind of slice (inside a piece, across pieces, empty), the
// prefixes a truncation takes, CRC32C and MD5. A snapshot must not see the
// appends made after it.
func TestContentMatchesBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 7, 511, 512, 513, 4096, contentChunk - 1, contentChunk, contentChunk + 1, 3*contentChunk + 5}
	type snap struct {
		c    content
		want []byte
	}
	for round := range 4 {
		var c content
		var model []byte
		var snaps []snap
		for range 40 {
			n := sizes[rng.IntN(len(sizes))]
			if rng.IntN(4) == 0 {
				n = rng.IntN(64 << 10)
			}
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			c.append(p)
			model = append(model, p...)
			if rng.IntN(3) == 0 {
				snaps = append(snaps, snap{c.frozen(), bytes.Clone(model)})
			}
		}
		snaps = append(snaps, snap{c, model})
		for i, s := range snaps {
			check(t, round, i, s.c, s.want, rng)
		}
	}
}

func check(t *testing.T, round, i int, c content, want []byte, rng *rand.Rand) {
	t.Helper()
	if c.size() != int64(len(want)) {
		t.Fatalf("round %d snapshot %d: size %d, want %d", round, i, c.size(), len(want))
	}
	if got := c.slice(0, c.size()); !bytes.Equal(got, want) {
		t.Fatalf("round %d snapshot %d: whole slice differs", round, i)
	}
	for range 50 {
		a := rng.Int64N(int64(len(want)) + 1)
		b := a + rng.Int64N(int64(len(want))-a+1)
		if got := c.slice(a, b); !bytes.Equal(got, want[a:b]) {
			t.Fatalf("round %d snapshot %d: slice [%d, %d) differs", round, i, a, b)
		}
		p := c.prefix(b)
		if p.size() != b || !bytes.Equal(p.slice(0, b), want[:b]) || p.crc() != crc32.Checksum(want[:b], crc32cTable) {
			t.Fatalf("round %d snapshot %d: prefix %d differs", round, i, b)
		}
	}
	if c.crc() != crc32.Checksum(want, crc32cTable) {
		t.Fatalf("round %d snapshot %d: crc differs", round, i)
	}
	if c.md5() != md5.Sum(want) {
		t.Fatalf("round %d snapshot %d: md5 differs", round, i)
	}
}
