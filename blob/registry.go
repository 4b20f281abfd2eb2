package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Opener opens a Store for a URL of its scheme. It validates the whole URL
// (unknown query parameters are an error, see Query) before any I/O.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

var registry struct {
	sync.RWMutex
	openers map[string]Opener
}

// Register makes Open serve scheme with open. Drivers call it from init; it does
// no I/O. Registering a scheme twice panics, as it is a programming error.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if registry.openers == nil {
		registry.openers = map[string]Opener{}
	}
	if _, dup := registry.openers[scheme]; dup {
		panic("blob: scheme " + scheme + " registered twice")
	}
	registry.openers[scheme] = open
}

// RegisterWithGocloud is Register plus the same scheme on gocloud's
// blob.DefaultURLMux, so that gocloud.dev/blob.OpenBucket(ctx, scheme+"://...")
// opens our Store through Bucket.
func RegisterWithGocloud(scheme string, open Opener) {
	Register(scheme, open)
	registerGocloud(scheme, open)
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the Store named by rawURL, for example "mem://", "file:///tmp/b" or
// "gcsrapid://bucket?pool_size=64". The driver for the scheme must be imported.
// Errors never contain credentials from rawURL (see Redact).
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, Errorf("open", "", ErrInvalidArgument, "malformed URL %s: %v", Redact(rawURL), err)
	}
	if u.Scheme == "" {
		return nil, Errorf("open", "", ErrInvalidArgument, "URL %s has no scheme; registered schemes: %s", Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	open := registry.openers[u.Scheme]
	registry.RUnlock()
	if open == nil {
		return nil, Errorf("open", "", ErrInvalidArgument, "unknown scheme %q in %s (import its driver); registered schemes: %s", u.Scheme, Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	s, err := open(ctx, u)
	if err != nil {
		return nil, redactError(err, rawURL)
	}
	return s, nil
}

// sensitiveParams are query parameter names (or parts of names) whose values
// are credentials.
var sensitiveParams = []string{"key", "secret", "token", "password", "passwd", "sig", "signature", "credential", "sas", "auth"}

func isSensitiveParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range sensitiveParams {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// Redact returns rawURL safe to print: user information and the values of
// credential-like query parameters are replaced by "REDACTED". An unparseable
// URL loses its whole query.
func Redact(rawURL string) string {
	base, query, hasQuery := strings.Cut(rawURL, "?")
	if i := strings.Index(base, "://"); i >= 0 {
		authority := base[i+3:]
		if k := strings.IndexByte(authority, '/'); k >= 0 {
			authority = authority[:k]
		}
		if j := strings.LastIndex(authority, "@"); j >= 0 {
			base = base[:i+3] + "REDACTED@" + base[i+3+j+1:]
		}
	}
	if !hasQuery {
		return base
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return base + "?REDACTED"
	}
	changed := false
	for k, vs := range q {
		if isSensitiveParam(k) {
			for i := range vs {
				vs[i] = "REDACTED"
			}
			changed = true
		}
	}
	if !changed {
		return base + "?" + query
	}
	return base + "?" + q.Encode()
}

// secrets returns the credential strings found in rawURL, longest first.
func secrets(rawURL string) []string {
	var out []string
	if u, err := url.Parse(rawURL); err == nil {
		if u.User != nil {
			out = append(out, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				out = append(out, p)
			}
		}
		for k, vs := range u.Query() {
			if isSensitiveParam(k) {
				out = append(out, vs...)
			}
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < 3 })
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redactError hides the credentials of rawURL from err's message while keeping
// err reachable with errors.Is and errors.As.
func redactError(err error, rawURL string) error {
	ss := secrets(rawURL)
	if len(ss) == 0 {
		return err
	}
	msg := err.Error()
	for _, s := range ss {
		msg = strings.ReplaceAll(msg, s, "REDACTED")
		msg = strings.ReplaceAll(msg, url.QueryEscape(s), "REDACTED")
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Query reads a URL's query parameters for an Opener and remembers which were
// read, so that Err can reject the unknown ones.
//
//	q := blob.NewQuery(u)
//	size := q.Int("pool_size", 16)
//	if err := q.Err(); err != nil { return nil, err }
type Query struct {
	scheme string
	vals   url.Values
	used   map[string]bool
	errs   []error
}

// NewQuery starts reading u's query.
func NewQuery(u *url.URL) *Query {
	return &Query{scheme: u.Scheme, vals: u.Query(), used: map[string]bool{}}
}

func (q *Query) fail(name, format string, args ...any) {
	shown := fmt.Sprintf(format, args...)
	q.errs = append(q.errs, fmt.Errorf("parameter %s: %s", name, shown))
}

func (q *Query) get(name string) (string, bool) {
	q.used[name] = true
	vs, ok := q.vals[name]
	if !ok {
		return "", false
	}
	if len(vs) > 1 {
		q.fail(name, "given %d times, want once", len(vs))
	}
	return vs[0], true
}

// Has reports whether name is present (and marks it known).
func (q *Query) Has(name string) bool {
	q.used[name] = true
	_, ok := q.vals[name]
	return ok
}

// String returns the parameter's value, or def when absent.
func (q *Query) String(name, def string) string {
	if v, ok := q.get(name); ok {
		return v
	}
	return def
}

// Strings returns every value of a repeated parameter.
func (q *Query) Strings(name string) []string {
	q.used[name] = true
	return q.vals[name]
}

// Int returns the parameter as an int, or def when absent.
func (q *Query) Int(name string, def int) int {
	v, ok := q.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		q.fail(name, "%q is not an integer", v)
		return def
	}
	return n
}

// Duration returns the parameter as a time.Duration ("250ms", "5m"), or def.
func (q *Query) Duration(name string, def time.Duration) time.Duration {
	v, ok := q.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		q.fail(name, "%q is not a duration like 250ms or 5m", v)
		return def
	}
	return d
}

// Bool returns the parameter as a bool ("true", "false", "1", "0"), or def.
func (q *Query) Bool(name string, def bool) bool {
	v, ok := q.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		q.fail(name, "%q is not true or false", v)
		return def
	}
	return b
}

// Err reports malformed values and every parameter that no getter asked for.
func (q *Query) Err() error {
	var unknown []string
	for k := range q.vals {
		if !q.used[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	errs := q.errs
	if len(unknown) > 0 {
		known := make([]string, 0, len(q.used))
		for k := range q.used {
			known = append(known, k)
		}
		slices.Sort(known)
		errs = append(errs, fmt.Errorf("unknown parameter(s) %s; %s:// accepts: %s", strings.Join(unknown, ", "), q.scheme, strings.Join(known, ", ")))
	}
	if len(errs) == 0 {
		return nil
	}
	return &Error{Op: "open", Kind: ErrInvalidArgument, Err: errors.Join(errs...)}
}
