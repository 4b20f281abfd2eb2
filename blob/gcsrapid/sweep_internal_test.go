package gcsrapid

import (
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// The sweeper scans recent names from a name built with nameTimeLayout: it
// must be NewName's layout, or the scan would start in the wrong place.
func TestNameTimeLayoutIsNewNames(t *testing.T) {
	before := time.Now().Add(-time.Millisecond)
	name := blob.NewName("p/")
	floor := "p/" + before.UTC().Format(nameTimeLayout)
	if !(floor < name) || !strings.HasPrefix(name, floor[:len("p/2006")]) {
		t.Errorf("floor %q does not sort just before %q", floor, name)
	}
	if got, ok := blob.NameTime(floor + "-0000000000000000"); !ok || !got.Equal(before.UTC().Round(0).Truncate(time.Nanosecond)) {
		t.Errorf("NameTime of a floor name = %v, %v; want %v", got, ok, before.UTC())
	}
}
