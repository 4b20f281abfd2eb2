package azpremium

import (
	"fmt"
	"strings"
)

// Azure metadata names are C# identifiers, compared without case, and come
// back through Go's HTTP client with canonicalized case ("X-Ms-Meta-Owner").
// So names are stored lower-case, with every other byte, upper-case letters
// included, hex-escaped in gocloud's form ("__0x2d__" for '-'); values are
// percent-escaped (they travel as HTTP header values). Any map round-trips; a
// value that a foreign client wrote with a literal '%' and two hex digits
// reads back decoded.

func encodeMetadata(md map[string]string) (map[string]*string, error) {
	if len(md) == 0 {
		return nil, nil
	}
	out := make(map[string]*string, len(md))
	for k, v := range md {
		if k == "" {
			return nil, fmt.Errorf("empty metadata key")
		}
		ek := escapeName(k)
		ev := escapeValue(v)
		out[ek] = &ev
	}
	return out, nil
}

func decodeMetadata(md map[string]*string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		val := ""
		if v != nil {
			val = unescapeValue(*v)
		}
		out[unescapeName(k)] = val
	}
	return out
}

func escapeName(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c == '_' && !strings.HasPrefix(k[i:], "__0x") || c >= '0' && c <= '9' && i > 0
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "__0x%02x__", c)
		}
	}
	return b.String()
}

func unescapeName(k string) string {
	k = strings.ToLower(k)
	if !strings.Contains(k, "__0x") {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); {
		if len(k)-i >= 8 && k[i:i+4] == "__0x" && k[i+6:i+8] == "__" {
			if v, ok := hexByte(k[i+4], k[i+5]); ok {
				b.WriteByte(v)
				i += 8
				continue
			}
		}
		b.WriteByte(k[i])
		i++
	}
	return b.String()
}

func escapeValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		// Leading and trailing spaces are trimmed by HTTP, so escape them too.
		edgeSpace := c == ' ' && (i == 0 || i == len(v)-1)
		if c < 0x20 || c >= 0x7f || c == '%' || edgeSpace {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unescapeValue(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); {
		if v[i] == '%' && i+2 < len(v) {
			if c, ok := hexByte(v[i+1], v[i+2]); ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(v[i])
		i++
	}
	return b.String()
}

func hexByte(a, b byte) (byte, bool) {
	x, ok1 := hexVal(a)
	y, ok2 := hexVal(b)
	return x<<4 | y, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
