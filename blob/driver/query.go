package driver

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Query reads a URL's query parameters for an Opener and remembers which were
// read, so that Err can reject the unknown ones.
//
//	q := driver.NewQuery(u)
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

// Size returns the parameter as a byte count, a plain number or one with a
// KiB, MiB or GiB suffix ("8388608", "8MiB"), or def when absent. Negative
// sizes are malformed.
func (q *Query) Size(name string, def int64) int64 {
	v, ok := q.get(name)
	if !ok {
		return def
	}
	digits, mult := v, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if d, ok := strings.CutSuffix(v, u.suffix); ok {
			digits, mult = d, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || digits != strconv.FormatInt(n, 10) || n > math.MaxInt64/mult {
		q.fail(name, "%q is not a size like 8388608 or 8MiB", v)
		return def
	}
	return n * mult
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
	return &blob.Error{Op: OpOpen, Kind: blob.ErrInvalidArgument, Err: errors.Join(errs...)}
}
