package blob

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
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
