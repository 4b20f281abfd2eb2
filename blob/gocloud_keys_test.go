package blob

import "testing"

func TestGocloudKeyEscapeRoundTrip(t *testing.T) {
	for _, k := range []string{
		"plain", "a\x00b", "bad\xff\xfe", "__0x41__", "x__0x0__y", "__0x", "__0xzz__", "日本\x00語", "__0x5f__",
	} {
		e := escapeGocloudKey(k)
		if err := ValidateKey("t", e); err != nil {
			t.Errorf("escape(%q) = %q is not a valid key: %v", k, e, err)
		}
		if got := unescapeGocloudKey(e); got != k {
			t.Errorf("unescape(escape(%q)) = %q (escaped %q)", k, got, e)
		}
	}
	if escapeGocloudKey("a\x00") == escapeGocloudKey("a__0x0__") {
		t.Error("two keys escape to the same key")
	}
}
