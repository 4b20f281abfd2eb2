package blob

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// nameTimeLayout sorts lexicographically in time order and is fixed width.
const nameTimeLayout = "20060102T150405.000000000Z"

// nameSuffixLen is the length of the part NewName appends to a prefix: the
// timestamp, a dash and 16 hex digits of randomness.
const nameSuffixLen = len(nameTimeLayout) + 1 + 16

var lastName struct {
	sync.Mutex
	t time.Time
}

// NewName returns a new object name under prefix: prefix, the creation time in
// UTC to the nanosecond, a dash and 64 random bits, for example
// "log/20261129T205253.123456789Z-9f86d081884c7d65".
//
// Names from one process sort in the order they were made (the clock is made
// strictly increasing); names from different processes sort by their clocks
// and are unique with overwhelming probability. The time is when the name was
// reserved, not when an object under it was written: Create's pools reserve
// names ahead of their writes. NameTime recovers the time, so a reconciler can
// keep young objects from the name alone.
func NewName(prefix string) string {
	now := time.Now().UTC().Round(0)
	lastName.Lock()
	if !now.After(lastName.t) {
		now = lastName.t.Add(time.Nanosecond)
	}
	lastName.t = now
	lastName.Unlock()
	var r [8]byte
	rand.Read(r[:])
	var b strings.Builder
	b.Grow(len(prefix) + nameSuffixLen)
	b.WriteString(prefix)
	b.WriteString(now.Format(nameTimeLayout))
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(r[:]))
	return b.String()
}

// NameTime returns the creation time encoded in a name made by NewName, and
// false if key does not end like one.
func NameTime(key string) (time.Time, bool) {
	if len(key) < nameSuffixLen {
		return time.Time{}, false
	}
	s := key[len(key)-nameSuffixLen:]
	ts, dash, rnd := s[:len(nameTimeLayout)], s[len(nameTimeLayout)], s[len(nameTimeLayout)+1:]
	if dash != '-' {
		return time.Time{}, false
	}
	if _, err := hex.DecodeString(rnd); err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(nameTimeLayout, ts)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}
