package tiered

import (
	"fmt"
	"testing"
)

// What a Store remembers of its writes is bounded, whatever the pattern of
// keys: the newest writes are kept, and the slots of keys written again do
// not pile up.
func TestWrittenIsBounded(t *testing.T) {
	var w written
	for i := range 3 * writtenMax {
		w.note(fmt.Sprintf("k/%d", i), fmt.Sprint(i))
	}
	if n := w.len(); n != writtenMax {
		t.Fatalf("%d keys remembered, want %d", n, writtenMax)
	}
	if g, ok := w.gen(fmt.Sprintf("k/%d", 3*writtenMax-1)); !ok || g != fmt.Sprint(3*writtenMax-1) {
		t.Errorf("the newest write: %q, %v", g, ok)
	}
	if _, ok := w.gen("k/0"); ok {
		t.Error("the oldest write is still remembered")
	}
	for i := range 10 * writtenMax {
		w.note("same", fmt.Sprint(i))
	}
	if len(w.order) > 2*writtenMax {
		t.Errorf("%d slots for %d keys", len(w.order), w.len())
	}
	if g, _ := w.gen("same"); g != fmt.Sprint(10*writtenMax-1) {
		t.Errorf("a key written again: %q", g)
	}
	w.note("same", "")
	if _, ok := w.gen("same"); ok {
		t.Error("a forgotten key is remembered")
	}
}
