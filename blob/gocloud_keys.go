package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// gocloud applications may use keys our contract refuses (NUL, invalid UTF-8),
// and gocloud drivers hex-escape what their backend cannot store. The bridge
// does the same: such bytes become "__0x<hex>__", and a literal escape-like
// sequence in a key has its first underscore escaped, so the mapping is
// reversible and two gocloud keys never share one Store key.

func escapeGocloudKey(k string) string {
	if !needsEscape(k) {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); {
		r, n := utf8.DecodeRuneInString(k[i:])
		switch {
		case k[i] == 0, r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "__0x%x__", k[i])
			i++
		case isEscapeAt(k, i):
			b.WriteString("__0x5f__")
			i++
		default:
			b.WriteString(k[i : i+n])
			i += n
		}
	}
	return b.String()
}

func needsEscape(k string) bool {
	return !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 || strings.Contains(k, "__0x")
}

// isEscapeAt reports whether k[i:] starts with "__0x<hex>__".
func isEscapeAt(k string, i int) bool {
	_, _, ok := parseEscape(k, i)
	return ok
}

func parseEscape(k string, i int) (byte, int, bool) {
	if !strings.HasPrefix(k[i:], "__0x") {
		return 0, 0, false
	}
	j := i + 4
	var v int
	for j < len(k) && j-i-4 < 2 && isHex(k[j]) {
		v = v*16 + hexVal(k[j])
		j++
	}
	if j == i+4 || !strings.HasPrefix(k[j:], "__") {
		return 0, 0, false
	}
	return byte(v), j + 2, true
}

func unescapeGocloudKey(k string) string {
	if !strings.Contains(k, "__0x") {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); {
		if v, next, ok := parseEscape(k, i); ok {
			b.WriteByte(v)
			i = next
			continue
		}
		b.WriteByte(k[i])
		i++
	}
	return b.String()
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func hexVal(c byte) int {
	if c <= '9' {
		return int(c - '0')
	}
	return int(c-'a') + 10
}
