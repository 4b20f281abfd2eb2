package blob

import (
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that every backend accepts.
const MaxKeyLen = 1024

// ValidateKey reports whether key can name an object on every backend: valid
// UTF-8, 1 to MaxKeyLen bytes, no NUL. The error wraps ErrInvalidKey and names op.
func ValidateKey(op, key string) error {
	switch {
	case key == "":
		return Errorf(op, key, ErrInvalidKey, "key is empty")
	case len(key) > MaxKeyLen:
		return Errorf(op, key, ErrInvalidKey, "key is %d bytes, longer than %d", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return Errorf(op, key, ErrInvalidKey, "key is not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return Errorf(op, key, ErrInvalidKey, "key contains NUL")
	}
	return nil
}

// validatePrefix checks a list or create prefix: like a key, but may be empty.
func validatePrefix(op, prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(op, prefix)
}
