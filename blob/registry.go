package blob

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/trace"
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
//
// opts (WithMeterProvider, WithTracerProvider, WithLogger, WithKeysInSpans)
// say where the store's telemetry goes. They reach the driver's opener in
// ctx (see OpenOptionsFrom), and with it every store the opener opens with
// Open, so the replicas of a quorum:// URL and the tiers of a tiered:// one
// get them too; options already in ctx are the defaults of those given here.
// With a TracerProvider, Open records a span of the open (SCHEME.Open) and
// returns the store wrapped in a TracedStore; without one it returns the
// driver's store itself.
func Open(ctx context.Context, rawURL string, opts ...OpenOption) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, Errorf("open", "", ErrInvalidArgument, "malformed URL %s: %v", Redact(rawURL), err)
	}
	if u.Fragment != "" || strings.HasSuffix(rawURL, "#") {
		return nil, Errorf("open", "", ErrInvalidArgument, "URL %s has a #fragment, which no store reads (escape a # in a parameter as %%23)", Redact(rawURL))
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
	ctx, o := withOpenOptions(ctx, opts)
	if o.TracerProvider == nil {
		s, err := open(ctx, u)
		if err != nil {
			return nil, redactError(err, rawURL)
		}
		return s, nil
	}
	ctx, span := o.TracerProvider.Tracer(tracerName).Start(ctx, u.Scheme+".Open", trace.WithAttributes(AttrStore.String(u.Scheme)))
	s, err := open(ctx, u)
	if err != nil {
		err = redactError(err, rawURL)
		end(span, err)
		return nil, err
	}
	span.End()
	return NewTracedStore(s, TracingOptions{TracerProvider: o.TracerProvider, Scheme: u.Scheme, RecordKeys: o.KeysInSpans}), nil
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

// maxNesting bounds how deep redaction follows URLs nested in query values; a
// value nested deeper is hidden whole.
const maxNesting = 8

// Redact returns rawURL safe to print. It replaces with "REDACTED": user
// information; the values of credential-like query parameters (key, token,
// sig, password, ...); the user information of any other value of the form
// user:password@host (an endpoint); and, recursively, the same parts of every
// URL nested in a query value (quorum's replica=, tiered's hot= and cold=,
// endpoints). A query that does not parse, and a #fragment, are hidden whole.
func Redact(rawURL string) string { return redactURL(rawURL, 0) }

func redactURL(raw string, depth int) string {
	// No store reads a fragment (Open refuses one), so none is shown.
	if i := strings.IndexByte(raw, '#'); i >= 0 && i < len(raw)-1 {
		return redactURL(raw[:i], depth) + "#REDACTED"
	}
	base, query, hasQuery := strings.Cut(raw, "?")
	base = redactAuthority(base)
	if !hasQuery {
		return base
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return base + "?REDACTED"
	}
	changed := false
	for k, vs := range q {
		for i, v := range vs {
			if nv := redactValue(k, v, depth); nv != v {
				vs[i] = nv
				changed = true
			}
		}
	}
	if !changed {
		return base + "?" + query
	}
	return base + "?" + q.Encode()
}

// redactAuthority hides the user information of "scheme://user:pw@host/...".
func redactAuthority(base string) string {
	i := strings.Index(base, "://")
	if i < 0 {
		return base
	}
	authority := base[i+3:]
	if k := strings.IndexByte(authority, '/'); k >= 0 {
		authority = authority[:k]
	}
	if j := strings.LastIndex(authority, "@"); j >= 0 {
		return base[:i+3] + "REDACTED@" + base[i+3+j+1:]
	}
	return base
}

func redactValue(name, v string, depth int) string {
	switch {
	case isSensitiveParam(name):
		return "REDACTED"
	case !looksLikeURL(v) && strings.Contains(v, "@"):
		// host:port with user information, as in endpoint=u:p@h:443.
		return "REDACTED" + v[strings.LastIndex(v, "@"):]
	case !looksLikeURL(v):
		return v
	case depth >= maxNesting:
		return "REDACTED"
	}
	return redactURL(v, depth+1)
}

// looksLikeURL reports whether a query value may be a URL with credentials of
// its own: anything with "://" or a query.
func looksLikeURL(v string) bool {
	return strings.Contains(v, "://") || strings.Contains(v, "?")
}

// Secrets returns the credential strings of rawURL, longest first: what
// Redact hides, at every level of nesting, each both as written in the URL and
// decoded. Use it with RedactSecrets to clean free text (an SDK's error, a
// log line) that might quote them.
func Secrets(rawURL string) []string {
	var out []string
	collectSecrets(rawURL, 0, &out)
	out = slices.DeleteFunc(out, func(s string) bool { return len(s) < minSecretLen })
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// minSecretLen: shorter strings are not replaced in free text, where they
// would match everywhere; Redact still hides them in URLs.
const minSecretLen = 3

func collectSecrets(raw string, depth int, out *[]string) {
	base, query, _ := strings.Cut(raw, "?")
	if i := strings.Index(base, "://"); i >= 0 {
		authority := base[i+3:]
		if k := strings.IndexByte(authority, '/'); k >= 0 {
			authority = authority[:k]
		}
		if j := strings.LastIndex(authority, "@"); j >= 0 {
			addUserinfo(authority[:j], out)
		}
	}
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		kd, vd := unescapeOr(k), unescapeOr(v)
		switch {
		case isSensitiveParam(kd):
			*out = append(*out, v, vd)
		case depth >= maxNesting:
			*out = append(*out, v, vd)
		case looksLikeURL(vd):
			collectSecrets(vd, depth+1, out)
		case strings.Contains(vd, "@"):
			addUserinfo(vd[:strings.LastIndex(vd, "@")], out)
		}
	}
}

func addUserinfo(ui string, out *[]string) {
	*out = append(*out, ui, unescapeOr(ui))
	user, pw, ok := strings.Cut(ui, ":")
	*out = append(*out, user, unescapeOr(user))
	if ok {
		*out = append(*out, pw, unescapeOr(pw))
	}
}

func unescapeOr(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// RedactSecrets replaces every occurrence in text of each secret (as
// returned by Secrets), whether raw or escaped once or twice as a query or
// path component would be, by "REDACTED".
func RedactSecrets(text string, secrets []string) string {
	for _, s := range secrets {
		if len(s) < minSecretLen {
			continue
		}
		q := url.QueryEscape(s)
		for _, form := range []string{s, q, url.PathEscape(s), url.QueryEscape(q), strings.ReplaceAll(q, "+", "%20")} {
			text = strings.ReplaceAll(text, form, "REDACTED")
		}
	}
	return text
}

// redactError hides the credentials of rawURL from err's message while keeping
// err reachable with errors.Is and errors.As.
func redactError(err error, rawURL string) error {
	return RedactError(err, Secrets(rawURL))
}

// RedactError hides secrets from err's message, in every form
// RedactSecrets knows, while keeping err reachable with errors.Is and
// errors.As. A driver that holds credentials of its own (not in its URL)
// passes its errors through it.
func RedactError(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	red := RedactSecrets(msg, secrets)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
