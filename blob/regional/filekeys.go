package regional

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/zonalblob/zonalblob/blob"
)

// A file:// store keeps each key as a path under its directory, through
// gocloud's fileblob, which hex-escapes what a file name cannot hold
// ("__0x1__" for a control character, a "/" after "/" or "..", a final "/").
// What escaping leaves ambiguous, or what the file system cannot hold, is
// refused before any I/O, so that every key a file:// store accepts
// round-trips exactly:
//   - a leading "/": the path join drops it, so "/x" would be "x";
//   - a "." path segment, or a final "..": the path is cleaned;
//   - a final segment ending in ".attrs" (fileblob's attribute files) or
//     shaped like fileblob's temporary files (NAME.<hex>.tmp);
//   - a path segment longer than fileSegmentMax bytes once escaped, or a whole
//     escaped key longer than filePathMax bytes.
const (
	// fileSegmentMax is NAME_MAX (255) less the 21 bytes fileblob appends to
	// a file's name for its temporary file (".<16 hex digits>.tmp").
	fileSegmentMax = 255 - 21
	// filePathMax leaves PATH_MAX (4096) room for the store's directory.
	filePathMax = 3072
)

// tempName matches the names of fileblob's temporary files.
var tempName = regexp.MustCompile(`\.[0-9a-f]+\.tmp$`)

// checkFileKey reports why key cannot be a file:// key, or nil.
func checkFileKey(op, key string) error {
	if strings.HasPrefix(key, "/") {
		return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot begin with "/" (the file system would make "/x" the same object as "x")`)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "." {
			return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot have a "." path segment`)
		}
	}
	last := key[strings.LastIndexByte(key, '/')+1:]
	switch {
	case last == "..":
		return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot end in a ".." path segment`)
	case strings.HasSuffix(last, ".attrs"):
		return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot end in ".attrs" (the store keeps attributes in such files)`)
	case tempName.MatchString(last):
		return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// key cannot end like a temporary file (.<hex>.tmp)`)
	}
	escaped := escapedFileKey(key)
	if len(escaped) > filePathMax {
		return blob.Errorf(op, key, blob.ErrInvalidKey, "a file:// key can be at most %d bytes once escaped for the file system; this one is %d", filePathMax, len(escaped))
	}
	for seg := range strings.SplitSeq(escaped, "/") {
		if len(seg) > fileSegmentMax {
			return blob.Errorf(op, key, blob.ErrInvalidKey, "a file:// key's path segments (between slashes) can be at most %d bytes once escaped for the file system; this key has one of %d", fileSegmentMax, len(seg))
		}
	}
	return nil
}

// escapedFileKey is the relative path fileblob stores key under, on Unix:
// its escapeKey, which is gocloud's internal escape.HexEscape with fileblob's
// choice of runes.
func escapedFileKey(key string) string {
	r := []rune(key)
	var b strings.Builder
	for i, c := range r {
		esc := c < 32 ||
			(i > 1 && c == '/' && r[i-1] == '.' && r[i-2] == '.') ||
			(i > 0 && c == '/' && r[i-1] == '/') ||
			(c == '/' && i == len(r)-1) ||
			isEscapeSequence(r, i)
		if esc {
			fmt.Fprintf(&b, "__%#x__", c)
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// isEscapeSequence reports whether r[i:] reads as "__0x<hex>__", which
// fileblob escapes so that no key reads as another's escape (the test of
// gocloud's escape.unescape).
func isEscapeSequence(r []rune, i int) bool {
	rest, ok := strings.CutPrefix(string(r[i:]), "__0x")
	if !ok {
		return false
	}
	end := strings.IndexByte(rest, '_')
	if end < 0 || !strings.HasPrefix(rest[end:], "__") {
		return false
	}
	_, err := strconv.ParseInt(rest[:end], 16, 32)
	return err == nil
}

// checkFileURL refuses a file: URL that is not file:///ABSOLUTE/PATH (or
// file://localhost/ABSOLUTE/PATH), before any I/O: "file:dir", "file:/dir",
// "file://dir/x" and "file://host/x" would otherwise name the current
// directory, or a path other than the one written.
func checkFileURL(u *url.URL) error {
	const want = "a file:// URL must be file:///ABSOLUTE/PATH (three slashes, or file://localhost/ABSOLUTE/PATH)"
	switch {
	case u.Opaque != "":
		abs, err := filepath.Abs(u.Opaque)
		if err != nil {
			abs = "/ABSOLUTE/PATH"
		}
		return fmt.Errorf("%s; got the relative path %q (for that directory here, write %s)", want, u.Opaque, (&url.URL{Scheme: "file", Path: abs}).String())
	case u.User != nil:
		return fmt.Errorf("%s; got user information before the path", want)
	case u.OmitHost:
		return fmt.Errorf("%s; got file:%s", want, u.EscapedPath())
	case u.Host != "" && u.Host != "localhost":
		return fmt.Errorf("%s; got host %q, which would be read as the start of the path or ignored: write file:///%s%s for that directory", want, u.Host, u.Host, u.EscapedPath())
	case !strings.HasPrefix(u.Path, "/"):
		return fmt.Errorf("%s; got no path", want)
	}
	return nil
}

// fileConflict names the one way a valid file:// key can still fail: a file
// system cannot hold a file and a directory of one name, so "a" and "a/b"
// cannot both be objects of a file:// store (on a bucket they can). fileblob
// reports it as an unclassified rename or mkdir error naming local paths; the
// caller gets ErrInvalidKey and the rule instead. Other errors pass through.
func fileConflict(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
		return blob.Errorf(op, key, blob.ErrInvalidKey, `a file:// store cannot hold both a key and keys below it ("a" and "a/b"): a file system cannot have a file and a directory of one name`)
	}
	return err
}
