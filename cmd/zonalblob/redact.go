package main

import (
	"io"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
)

// argSecrets are the credentials in a command line: those of every URL
// argument, flag values (--url=...) included, at every level of nesting, as
// blob.Secrets finds them.
func argSecrets(args []string) []string {
	var out []string
	for _, a := range args {
		out = append(out, blob.Secrets(a)...)
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			out = append(out, blob.Secrets(v)...)
		}
	}
	return out
}

// redactWriter hides secrets from everything written through it: a
// command's stderr, the standard logger. blob.Open already redacts its own
// errors; this catches a secret that a driver or SDK echoes later, from any
// operation, and a usage error quoting an argument.
type redactWriter struct {
	w       io.Writer
	secrets []string
}

func (r redactWriter) Write(p []byte) (int, error) {
	if len(r.secrets) == 0 {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, blob.RedactSecrets(string(p), r.secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactText is the redaction of a whole text: a bench report.
func redactText(text string, args []string) string {
	return blob.RedactSecrets(text, argSecrets(args))
}

// underlying returns the writer a redactWriter wraps, for terminal checks.
func underlying(w io.Writer) io.Writer {
	if r, ok := w.(redactWriter); ok {
		return r.w
	}
	return w
}
