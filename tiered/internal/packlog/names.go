// Package packlog is the pack log of a tiered Store: the packs and
// tombstones it keeps in cold under a reserved prefix, their format, their
// names and the metadata that says which keys each may hold or kill, the
// log's inventory, and the catalog that lists the log and caches what it
// read (a summary and a key filter of every pack, the packs' indexes in a
// bounded cache, every tombstone and every kill).
//
// The catalog is built from the cold store and a Config: it knows nothing
// of the hot tier, the compactor or its leases beyond what Config gives it.
package packlog

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReservedPrefix starts the names of what a tiered Store keeps beside
// users' objects (its markerPrefix, which is built from this): locks and
// leases in hot, the pack log, its inventory and move markers in cold.
const ReservedPrefix = "\U0010FFFD\U0010FFFD"

// Prefix starts the names, in cold, of packs and tombstones: the pack
// log. A name is the log prefix, the wall-clock time it was chosen at (20
// decimal digits of Unix nanoseconds, so names sort by it), a kind and a
// random suffix. Like move markers, these names are hidden from listings and
// refused as user keys.
const Prefix = ReservedPrefix + "log/"

// KindPack and KindTombstone are the kinds of log objects, as their names
// say them.
const (
	KindPack      = "p"
	KindTombstone = "t"
)

// NewName returns a new name of kind in the pack log, chosen at t.
func NewName(kind string, t time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%020d-%s-%s", Prefix, t.UnixNano(), kind, hex.EncodeToString(b[:]))
}

// ParseName returns the time a log name was chosen at, and its kind; ok is
// false if name is not a log name.
func ParseName(name string) (t time.Time, kind string, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok || len(rest) < 23 || rest[20] != '-' {
		return time.Time{}, "", false
	}
	ns, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return time.Time{}, "", false
	}
	return time.Unix(0, ns), rest[21:22], true
}

// logFloor is the smallest log name chosen at or after t.
func logFloor(t time.Time) string {
	if t.UnixNano() <= 0 {
		return ""
	}
	return fmt.Sprintf("%s%020d", Prefix, t.UnixNano())
}

// rangeKey is the metadata of a pack or tombstone that names the range of
// keys it holds or kills: base64url of the first and last keys, each cut to
// rangeKeyLen bytes, joined by ".". It lets a damaged one be blamed for the
// keys it may hold, and no others.
const (
	rangeKey    = "zonalblob-tiered-range"
	rangeKeyLen = 256
)

// Metadata returns the metadata of a log object holding or killing
// versions of keys.
func Metadata(keys []string) map[string]string {
	if len(keys) == 0 {
		return nil
	}
	lo, hi := slices.Min(keys), slices.Max(keys)
	cut := func(k string) string {
		if len(k) > rangeKeyLen {
			k = k[:rangeKeyLen]
		}
		return base64.RawURLEncoding.EncodeToString([]byte(k))
	}
	return map[string]string{rangeKey: cut(lo) + "." + cut(hi)}
}

// parseRange reads a rangeKey value.
func parseRange(v string) (lo, hi string, ok bool) {
	a, b, found := strings.Cut(v, ".")
	l, err1 := base64.RawURLEncoding.DecodeString(a)
	h, err2 := base64.RawURLEncoding.DecodeString(b)
	if !found || err1 != nil || err2 != nil {
		return "", "", false
	}
	return string(l), string(h), true
}

// Keys returns the keys the index holds or kills.
func (idx *Index) Keys() []string {
	keys := make([]string, 0, len(idx.Entries)+len(idx.Kills))
	for _, e := range idx.Entries {
		keys = append(keys, e.Key)
	}
	for _, k := range idx.Kills {
		keys = append(keys, k.Key)
	}
	return keys
}
