package packlog

import "hash/maphash"

// Filter is a Bloom filter of a pack's keys: about 10 bits a key, so that a
// lookup reads the index of a pack that does not hold its key about once
// in a hundred packs it checks. Its hash is seeded once per process: the
// filters one process builds agree with one another.
type Filter struct {
	bits []uint64
}

const bloomHashes = 7

var bloomSeed = maphash.MakeSeed()

// NewFilter returns an empty Filter sized for n keys.
func NewFilter(n int) *Filter {
	return &Filter{bits: make([]uint64, max(1, (n*10+63)/64))}
}

func (b *Filter) positions(key string, f func(uint64)) {
	h := maphash.String(bloomSeed, key)
	h1, h2 := h&0xffffffff, h>>32|1
	m := uint64(len(b.bits) * 64)
	for i := range uint64(bloomHashes) {
		f((h1 + i*h2) % m)
	}
}

// Add adds key to the filter.
func (b *Filter) Add(key string) {
	b.positions(key, func(p uint64) { b.bits[p/64] |= 1 << (p % 64) })
}

// Has reports whether the filter may hold key: false means it does not.
func (b *Filter) Has(key string) bool {
	ok := true
	b.positions(key, func(p uint64) { ok = ok && b.bits[p/64]&(1<<(p%64)) != 0 })
	return ok
}
