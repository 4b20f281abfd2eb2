package main

import (
	"net/url"
	"slices"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

// redactor hides the credentials of a command's URL arguments from text that is
// about to be printed. blob.Open already redacts its own errors; this catches a
// secret that a driver or SDK might echo later, from any operation.
type redactor struct {
	secrets []string // longest first, so a secret containing another goes whole
}

// newRedactor learns the secrets of every argument that is a URL. What counts
// as a secret is what blob.Redact hides, so the two never disagree.
func newRedactor(args []string) *redactor {
	r := &redactor{}
	for _, a := range args {
		u, err := url.Parse(a)
		if err != nil || u.Scheme == "" {
			continue
		}
		red, err := url.Parse(blob.Redact(a))
		if err != nil {
			continue
		}
		if u.User != nil {
			r.secrets = append(r.secrets, u.User.Username())
			if p, ok := u.User.Password(); ok {
				r.secrets = append(r.secrets, p)
			}
		}
		rq := red.Query()
		for k, vs := range u.Query() {
			if !slices.Equal(vs, rq[k]) {
				r.secrets = append(r.secrets, vs...)
			}
		}
	}
	r.secrets = slices.DeleteFunc(r.secrets, func(s string) bool { return len(s) < 3 })
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

func (r *redactor) redact(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "REDACTED")
		s = strings.ReplaceAll(s, url.QueryEscape(sec), "REDACTED")
		s = strings.ReplaceAll(s, url.PathEscape(sec), "REDACTED")
	}
	return s
}
