package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"

	"github.com/zonalblob/zonalblob/blob"
)

// openStore opens the store at rawURL. Its errors name the URL, redacted, since
// a command may open two.
func openStore(ctx context.Context, rawURL string) (blob.Store, error) {
	st, err := blob.Open(ctx, rawURL)
	if err == nil {
		return st, nil
	}
	hint := ""
	if u, perr := url.Parse(rawURL); perr == nil && u.Scheme == "file" && u.Opaque == "" && !u.OmitHost &&
		(u.Host == "" || u.Host == "localhost") && !u.Query().Has("create_dir") {
		if _, serr := os.Stat(u.Path); errors.Is(serr, fs.ErrNotExist) {
			hint = " (add ?create_dir=true to the URL to create the directory)"
		}
	}
	return nil, fmt.Errorf("cannot open %s: %w%s", blob.Redact(rawURL), err, hint)
}

// schemePrefix is how a store URL begins; anything else is a local path
// (write ./name:with:colons for a local file whose name looks like a URL).
var schemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func isStoreURL(arg string) bool { return schemePrefix.MatchString(arg) }
