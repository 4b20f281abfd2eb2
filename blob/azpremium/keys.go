package azpremium

import (
	"fmt"
	"strings"
)

// Keys are blob names as they are, except for bytes the service cannot keep:
// Azure (and Azurite) fold '\' into '/', and Azurite cannot list names with
// control characters. Those bytes are stored hex-escaped as "__0x5c__", the
// form gocloud's azureblob uses, and a literal "__0x" in a key has its first
// '_' escaped, so the mapping is reversible. Listings are in the byte order of
// the stored names, which differs from the keys' order only among keys that
// contain such bytes.

func needsKeyEscape(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] == '\\' {
			return true
		}
	}
	return strings.Contains(k, "__0x")
}

func escapeKey(k string) string {
	if !needsKeyEscape(k) {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c < 0x20 || c == '\\' || c == '_' && isKeyEscapeAt(k, i) {
			fmt.Fprintf(&b, "__0x%02x__", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isKeyEscapeAt reports whether k[i:] reads as an escape: "__0x", two hex
// digits, "__".
func isKeyEscapeAt(k string, i int) bool {
	if len(k)-i < 8 || k[i:i+4] != "__0x" || k[i+6:i+8] != "__" {
		return false
	}
	_, ok := hexByte(k[i+4], k[i+5])
	return ok
}

func unescapeKey(k string) string {
	if !strings.Contains(k, "__0x") {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); {
		if isKeyEscapeAt(k, i) {
			c, _ := hexByte(k[i+4], k[i+5])
			b.WriteByte(c)
			i += 8
			continue
		}
		b.WriteByte(k[i])
		i++
	}
	return b.String()
}
