package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/zonalblob/zonalblob/blob"
)

// openStore opens the store at rawURL. Its errors name the URL, redacted, since
// a command may open two.
func openStore(ctx context.Context, rawURL string) (blob.Store, error) {
	st, err := blob.Open(ctx, rawURL)
	if err == nil {
		if o, ok := ctx.Value(openedStoresKey{}).(*openedStores); ok {
			o.add(rawURL, st)
		}
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

// openedStores are the stores a command opened, for --stats.
type openedStores struct {
	mu     sync.Mutex
	stores []openedStore
}

type openedStore struct {
	url string
	st  blob.Store
}

type openedStoresKey struct{}

// withOpenedStores returns a context in which openStore records every store
// it opens.
func withOpenedStores(ctx context.Context) (context.Context, *openedStores) {
	o := &openedStores{}
	return context.WithValue(ctx, openedStoresKey{}, o), o
}

func (o *openedStores) add(url string, st blob.Store) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stores = append(o.stores, openedStore{url, st})
}

func (o *openedStores) list() []openedStore {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]openedStore(nil), o.stores...)
}

// gluedKey splits a store URL that has an object's key glued on, as
// gsutil's gs://bucket/key, into the store and the key: a path that does not
// end in "/" (a cloud URL's path is a prefix ending in "/"; gcsrapid://,
// quorum://, tiered://, ... take none), or for file:// the part of the path
// below its deepest existing directory. ok is false for a URL that names a
// store as it is (a file:// URL of an existing directory, or with
// create_dir). It is only a guess, for a hint after a usage error.
func gluedKey(arg string) (store, key string, ok bool) {
	if !isStoreURL(arg) {
		return "", "", false
	}
	u, err := url.Parse(arg)
	if err != nil || u.Opaque != "" || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return "", "", false
	}
	if u.Scheme != "file" {
		if u.Host == "" {
			return "", "", false
		}
		key = strings.TrimPrefix(u.Path, "/")
		u.Path, u.RawPath = "", ""
		return u.String(), key, true
	}
	// A directory that does not exist yet is a new store, not a key.
	if u.Query().Has("create_dir") {
		return "", "", false
	}
	// The path itself may exist: as the file of the object named.
	dir := filepath.Clean(u.Path)
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", false
		}
		dir = parent
	}
	if dir == filepath.Clean(u.Path) || dir == "/" {
		return "", "", false
	}
	key = strings.TrimPrefix(path.Clean(u.Path), filepath.ToSlash(dir)+"/")
	u.Path, u.RawPath = dir, ""
	return u.String(), key, true
}

// shellQuote quotes s for a POSIX shell if it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:@%+,=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
