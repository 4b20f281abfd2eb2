package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

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
	if u, perr := url.Parse(rawURL); perr == nil && u.Scheme == "file" && !u.Query().Has("create_dir") {
		if _, serr := os.Stat(u.Path); errors.Is(serr, fs.ErrNotExist) {
			hint = " (add ?create_dir=true to the URL to create the directory)"
		}
	}
	return nil, fmt.Errorf("cannot open %s: %w%s", blob.Redact(rawURL), err, hint)
}
