package blob

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Test for them with errors.Is; a Store returns them wrapped in
// an *Error.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: a write with IfNotExist found the object already there.
	ErrExists = errors.New("object already exists")
	// ErrPrecondition: a generation precondition did not hold.
	ErrPrecondition = errors.New("precondition failed")
	// ErrClosed: the Store, Writer or Reader was already closed.
	ErrClosed = errors.New("closed")
	// ErrInvalidKey: the key is not a valid object key. Returned before any I/O.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidArgument: an option or URL is malformed. Returned before any I/O.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnsupported is errors.ErrUnsupported: the backend cannot do this.
	ErrUnsupported = errors.ErrUnsupported
	// ErrBucketNotFound: the bucket (container, directory bucket) itself does
	// not exist. It is not ErrNotFound: no object is missing, the store is
	// misconfigured, and a caller deciding from a missing object (a log's
	// end, a compactor's move) must not take one for the other.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrPermission: the service refused the credentials, or the call to
	// them (HTTP 401 or 403, gRPC Unauthenticated or PermissionDenied).
	ErrPermission = errors.New("permission denied")
	// ErrCorrupt: stored bytes or state do not verify (a checksum, a
	// length, a format): the object named is damaged, and no byte of it
	// was served as good.
	ErrCorrupt = errors.New("corrupt object")
)

// Error records a failed operation on a key. Kind is the sentinel that classifies
// it (nil when none applies); Err is the cause, usually the backend's own error.
// errors.Is and errors.As see both.
type Error struct {
	Op   string // "read", "write", "stat", "list", "delete", "open", ...
	Key  string // the object key, or the prefix for list
	Kind error  // a sentinel such as ErrNotFound, or nil
	Err  error  // the cause, or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("blob: ")
	b.WriteString(e.Op)
	if e.Key != "" {
		fmt.Fprintf(&b, " %q", shortKey(e.Key))
	}
	switch {
	case e.Kind != nil && e.Err != nil && e.Err != e.Kind:
		fmt.Fprintf(&b, ": %v: %v", e.Kind, e.Err)
	case e.Kind != nil:
		fmt.Fprintf(&b, ": %v", e.Kind)
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause, so errors.Is(err, ErrNotFound) and
// errors.As(err, &sdkErr) both work.
func (e *Error) Unwrap() []error {
	switch {
	case e.Kind != nil && e.Err != nil && e.Kind != e.Err:
		return []error{e.Kind, e.Err}
	case e.Kind != nil:
		return []error{e.Kind}
	case e.Err != nil:
		return []error{e.Err}
	}
	return nil
}

// Errorf returns an *Error for op on key with the given sentinel kind and a cause
// built from format and args (which may wrap with %w).
func Errorf(op, key string, kind error, format string, args ...any) error {
	return &Error{Op: op, Key: key, Kind: kind, Err: fmt.Errorf(format, args...)}
}

// shortKey keeps error messages readable for very long keys: their start,
// their end and their length.
func shortKey(k string) string {
	const max, head, tail = 96, 48, 16
	if len(k) <= max {
		return k
	}
	h, t := head, len(k)-tail
	for h > 0 && !utf8.RuneStart(k[h]) {
		h--
	}
	for t < len(k) && !utf8.RuneStart(k[t]) {
		t++
	}
	return fmt.Sprintf("%s...(%d bytes)...%s", k[:h], len(k), k[t:])
}
