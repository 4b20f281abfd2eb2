package tiered

import (
	"container/list"
	"hash/maphash"
	"sync"
)

// indexCache holds the most recently used pack indexes, up to max bytes
// (each counted at its size as stored in the pack). An index larger than
// the whole cache is not kept.
type indexCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // of *loadedPack, most recently used first
	byKey map[string]*list.Element
}

func newIndexCache(max int64) *indexCache {
	return &indexCache{max: max, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *indexCache) get(name string) *loadedPack {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[name]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*loadedPack)
}

func (c *indexCache) put(lp *loadedPack) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[lp.name]; ok {
		c.order.MoveToFront(el)
		return
	}
	if lp.cost > c.max {
		return
	}
	c.byKey[lp.name] = c.order.PushFront(lp)
	c.used += lp.cost
	for c.used > c.max {
		c.removeLocked(c.order.Back())
	}
}

func (c *indexCache) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[name]; ok {
		c.removeLocked(el)
	}
}

func (c *indexCache) removeLocked(el *list.Element) {
	lp := c.order.Remove(el).(*loadedPack)
	delete(c.byKey, lp.name)
	c.used -= lp.cost
}

// size returns the bytes and indexes the cache holds.
func (c *indexCache) size() (bytes int64, indexes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.order.Len()
}

// bloom is a Bloom filter of a pack's keys: about 10 bits a key, so that a
// lookup reads the index of a pack that does not hold its key about once
// in a hundred packs it checks.
type bloom struct {
	bits []uint64
}

const bloomHashes = 7

var bloomSeed = maphash.MakeSeed()

func newBloom(n int) *bloom {
	return &bloom{bits: make([]uint64, max(1, (n*10+63)/64))}
}

func (b *bloom) positions(key string, f func(uint64)) {
	h := maphash.String(bloomSeed, key)
	h1, h2 := h&0xffffffff, h>>32|1
	m := uint64(len(b.bits) * 64)
	for i := range uint64(bloomHashes) {
		f((h1 + i*h2) % m)
	}
}

func (b *bloom) add(key string) {
	b.positions(key, func(p uint64) { b.bits[p/64] |= 1 << (p % 64) })
}

func (b *bloom) has(key string) bool {
	ok := true
	b.positions(key, func(p uint64) { ok = ok && b.bits[p/64]&(1<<(p%64)) != 0 })
	return ok
}
