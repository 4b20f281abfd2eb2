package packlog

import (
	"container/list"
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

func (c *indexCache) get(name string) *LoadedPack {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[name]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*LoadedPack)
}

func (c *indexCache) put(lp *LoadedPack) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[lp.Name]; ok {
		c.order.MoveToFront(el)
		return
	}
	if lp.cost > c.max {
		return
	}
	c.byKey[lp.Name] = c.order.PushFront(lp)
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
	lp := c.order.Remove(el).(*LoadedPack)
	delete(c.byKey, lp.Name)
	c.used -= lp.cost
}

// size returns the bytes and indexes the cache holds.
func (c *indexCache) size() (bytes int64, indexes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.order.Len()
}
