package s3express

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// User metadata travels in x-amz-meta-* headers, which cannot carry every
// key or value. They are escaped exactly as gocloud's s3blob escapes them
// (keys: URL path escaping, then "__0x3d__" for '@', ':' and '='; values: URL
// path escaping), so objects written through either read back the same
// through both.

var escapeSeq = regexp.MustCompile(`__0x[0-9a-fA-F]+__`)

func escapeMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[escapeKey(url.PathEscape(k))] = url.PathEscape(v)
	}
	return out
}

func unescapeMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		out[unescapeKey(pathUnescape(k))] = pathUnescape(v)
	}
	return out
}

// escapeKey hex-escapes '@', ':', '=' and the first rune of anything that
// would read back as an escape sequence.
func escapeKey(s string) string {
	literal := map[int]bool{}
	for _, m := range escapeSeq.FindAllStringIndex(s, -1) {
		literal[m[0]] = true
	}
	var b strings.Builder
	for i, r := range s {
		if r == '@' || r == ':' || r == '=' || literal[i] {
			fmt.Fprintf(&b, "__%#x__", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unescapeKey(s string) string {
	return escapeSeq.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseUint(m[4:len(m)-2], 16, 32)
		if err != nil {
			return m
		}
		return string(rune(n))
	})
}

func pathUnescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
