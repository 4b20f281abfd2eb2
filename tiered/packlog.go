package tiered

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

// logPrefix starts the names, in cold, of packs and tombstones: the pack
// log. A name is the log prefix, the wall-clock time it was chosen at (20
// decimal digits of Unix nanoseconds, so names sort by it), a kind and a
// random suffix. Like move markers, these names are hidden from listings and
// refused as user keys.
const logPrefix = markerPrefix + "log/"

const (
	kindPack = "p"
	kindTomb = "t"
)

// logName returns a new name of kind in the pack log, chosen at t.
// logNow is the time for a new log name: the clock, or just after the last
// name this process chose if the clock has not moved past it.
func (s *Store) logNow() time.Time {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	t := time.Now()
	if !t.After(s.lastLog) {
		t = s.lastLog.Add(time.Nanosecond)
	}
	s.lastLog = t
	return t
}

func logName(kind string, t time.Time) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s%020d-%s-%s", logPrefix, t.UnixNano(), kind, hex.EncodeToString(b[:]))
}

// logTime returns the time a log name was chosen at, and its kind.
func logTime(name string) (time.Time, string, bool) {
	rest, ok := strings.CutPrefix(name, logPrefix)
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
	return fmt.Sprintf("%s%020d", logPrefix, t.UnixNano())
}

// rangeKey is the metadata of a pack or tombstone that names the range of
// keys it holds or kills: base64url of the first and last keys, each cut to
// rangeKeyLen bytes, joined by ".". It lets a damaged one be blamed for the
// keys it may hold, and no others.
const (
	rangeKey    = "zonalblob-tiered-range"
	rangeKeyLen = 256
)

// logMetadata returns the metadata of a log object holding or killing
// versions of keys.
func logMetadata(keys []string) map[string]string {
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

// indexKeys returns the keys an index holds or kills.
func indexKeys(idx *packIndex) []string {
	keys := make([]string, 0, len(idx.Entries)+len(idx.Kills))
	for _, e := range idx.Entries {
		keys = append(keys, e.Key)
	}
	for _, k := range idx.Kills {
		keys = append(keys, k.Key)
	}
	return keys
}
