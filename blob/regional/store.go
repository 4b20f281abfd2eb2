package regional

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	gcblob "gocloud.dev/blob"

	// The gocloud drivers whose URLs this package serves.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Schemes are the URL schemes this package registers on blob.Open.
var Schemes = []string{"mem", "file", "gs", "s3", "azblob"}

func init() {
	for _, s := range Schemes {
		// gocloud serves these schemes itself, so only our registry learns them.
		blob.Register(s, func(ctx context.Context, u *url.URL) (blob.Store, error) { return open(ctx, u) })
	}
}

// Open opens a gocloud bucket URL as a Store.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "malformed URL %s", blob.Redact(rawURL))
	}
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	gu, err := gocloudURL(u)
	if err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: err}
	}
	var b *gcblob.Bucket
	var release func() error
	if u.Scheme == "gs" && u.Query().Has("endpoint") {
		if b, release, err = openGCSEndpoint(ctx, gu); err != nil {
			return nil, err
		}
	} else if b, err = gcblob.OpenBucket(ctx, gu.String()); err != nil {
		return nil, &blob.Error{Op: driver.OpOpen, Kind: blob.ErrInvalidArgument, Err: err}
	}
	opts := Options{}
	switch u.Scheme {
	case "mem":
		opts.LocalPreconditions = true
	case "file":
		opts.LocalPreconditions = true
		opts.SortListings = true
		opts.fileTree = true
		// Stores on one directory share one lock table, so preconditions hold
		// across them within this process.
		opts.lockDomain = "file:" + filepath.Clean(u.Path)
	case "azblob":
		opts.BufferedUploads = true
	}
	s := New(b, opts)
	s.release = release
	return s, nil
}

// gocloudURL checks u before any I/O and returns the URL to give gocloud:
// a file: URL must name an absolute directory, and takes temporary files
// beside the objects by default; a cloud URL must name its bucket (and, for
// s3://, a region), and its path, if any, becomes the key prefix.
func gocloudURL(u *url.URL) (*url.URL, error) {
	gu := *u
	q := u.Query()
	switch u.Scheme {
	case "file":
		if err := checkFileURL(u); err != nil {
			return nil, err
		}
		// fileblob takes any non-empty value of these as true, so that
		// create_dir=false would create the directory and a bare
		// ?create_dir would not: read them as the booleans they look like.
		for _, name := range []string{"create_dir", "no_tmp_dir"} {
			if !q.Has(name) {
				continue
			}
			v := q.Get(name)
			on, err := strconv.ParseBool(v)
			if v == "" {
				on, err = true, nil
			}
			if err != nil || len(q[name]) > 1 {
				return nil, fmt.Errorf("parameter %s: %q is not true or false (given once)", name, v)
			}
			if on {
				q.Set(name, "true")
			} else {
				q.Del(name)
			}
		}
		// A temporary file in os.TempDir cannot be renamed into a directory
		// on another file system (a tmpfs, a mounted volume), so every write
		// there would fail; beside its object it always can. no_tmp_dir=false
		// asks for fileblob's own default.
		if !u.Query().Has("no_tmp_dir") {
			q.Set("no_tmp_dir", "true")
		}
		gu.RawQuery = q.Encode()
		return &gu, nil
	case "mem":
		if u.Host != "" || u.User != nil {
			return nil, fmt.Errorf("mem:// takes no bucket name or user (each mem:// store is new and empty); got %q", u.Host)
		}
	case "gs", "s3", "azblob":
		what := "bucket"
		if u.Scheme == "azblob" {
			what = "container"
		}
		if u.Host == "" {
			return nil, fmt.Errorf("%s name is required: %s://%s", what, u.Scheme, strings.ToUpper(what))
		}
		if u.User != nil {
			return nil, fmt.Errorf("%s:// URLs carry no credentials; the cloud SDK takes them from the environment", u.Scheme)
		}
		if u.Scheme == "s3" && !q.Has("region") && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			return nil, fmt.Errorf("region is required: s3://%s?region=REGION (or set AWS_REGION)", u.Host)
		}
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		switch {
		case q.Has("prefix"):
			return nil, fmt.Errorf("%s:// URL has both a path and ?prefix=; give the prefix once", u.Scheme)
		case !strings.HasSuffix(p, "/"):
			return nil, fmt.Errorf("the path %q of a %s:// URL is a key prefix and must end in \"/\" (%s://%s/%s/); to name one object, give its key as the KEY argument", p, u.Scheme, u.Scheme, u.Host, p)
		}
		if err := blob.ValidateKey(driver.OpOpen, p); err != nil {
			return nil, err
		}
		q.Set("prefix", p)
		gu.Path, gu.RawPath = "", ""
		gu.RawQuery = q.Encode()
	}
	return &gu, nil
}

// Options configure New.
type Options struct {
	// LocalPreconditions enforces IfNotExist and IfGenerationMatch under a lock
	// in this process, for buckets that only this process uses (mem://, or a
	// directory). Off, they are passed to the backend.
	LocalPreconditions bool
	// SortListings lists the whole prefix and sorts it for every page, for
	// backends that do not list in byte order (gocloud's fileblob walks the
	// directory tree, which is not byte order).
	SortListings bool
	// BufferedUploads buffers each write in memory and sends it with one
	// Bucket.Upload at Close, instead of gocloud's streaming writer. gocloud
	// v0.47's azureblob writer panics when a streamed upload fails (an
	// IfNotExist loser, say), so azblob:// sets it.
	BufferedUploads bool

	lockDomain string
	fileTree   bool
}

// Store is a gocloud bucket as a blob.Store.
type Store struct {
	b     *gcblob.Bucket
	opts  Options
	locks *keyLocks
	life  driver.Lifecycle
	// release, if set, frees what open made for the bucket (the gRPC client
	// of a gs:// endpoint) once the bucket is closed.
	release func() error
}

var (
	_ blob.Store  = (*Store)(nil)
	_ blob.Copier = (*Store)(nil)
)

// New wraps b. Closing the Store closes b.
func New(b *gcblob.Bucket, opts Options) *Store {
	s := &Store{b: b, opts: opts}
	if opts.LocalPreconditions {
		s.locks = locksFor(opts.lockDomain)
	}
	return s
}

// Bucket returns the underlying gocloud bucket.
func (s *Store) Bucket() *gcblob.Bucket { return s.b }

// check is the kit's closed and key check, plus the keys a file tree cannot
// hold.
func (s *Store) check(op, key string) error {
	if err := s.life.Check(op, key); err != nil {
		return err
	}
	if s.opts.fileTree {
		return checkFileKey(op, key)
	}
	return nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if err := s.check(driver.OpStat, key); err != nil {
		return nil, err
	}
	if s.opts.SortListings {
		defer s.locks.lock(key)()
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return nil, driver.WrapError(driver.OpStat, key, err, classify)
	}
	return s.attrs(key, a), nil
}

func (s *Store) attrs(key string, a *gcblob.Attributes) *blob.Attributes {
	out := &blob.Attributes{
		Key:                key,
		Size:               a.Size,
		ContentType:        a.ContentType,
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		MD5:                a.MD5,
		ETag:               a.ETag,
		Generation:         a.ETag,
		CreateTime:         a.CreateTime,
		ModTime:            a.ModTime,
	}
	if len(a.Metadata) > 0 {
		out.Metadata = make(map[string]string, len(a.Metadata))
		for k, v := range a.Metadata {
			if k == generationKey && s.opts.LocalPreconditions {
				out.Generation = v
				continue
			}
			out.Metadata[k] = v
		}
		if len(out.Metadata) == 0 {
			out.Metadata = nil
		}
	}
	return out
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	if err := s.check(driver.OpDelete, key); err != nil {
		return err
	}
	cond, err := blob.CheckDelete(key, opts)
	if err != nil {
		return err
	}
	if !cond.IsZero() && !s.opts.LocalPreconditions {
		return blob.Errorf(driver.OpDelete, key, blob.ErrUnsupported, "generation preconditions on this bucket")
	}
	if s.opts.LocalPreconditions {
		unlock := s.locks.lock(key)
		defer unlock()
		if err := s.checkPrecondition(ctx, driver.OpDelete, key, cond); err != nil {
			return err
		}
	}
	return driver.WrapError(driver.OpDelete, key, s.b.Delete(ctx, key), classify)
}

// Copy implements blob.Copier with the backend's server-side copy, or,
// under a condition or with local preconditions, through a writer of this
// Store. IfGenerationMatch needs local preconditions, under which the
// writer checks the destination's generation and commits under the key's
// lock; without them no write here can be conditional on a generation, so
// it is refused.
func (s *Store) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	if err := s.check(driver.OpCopy, srcKey); err != nil {
		return err
	}
	if err := s.check(driver.OpCopy, dstKey); err != nil {
		return err
	}
	cond, err := blob.CheckCopy(dstKey, opts, s.opts.LocalPreconditions)
	if err != nil {
		return err
	}
	if s.opts.LocalPreconditions || !cond.IsZero() {
		// gocloud's Copy has no conditions and keeps the source's metadata
		// (our generation token included), so copy through a writer instead.
		return blob.CopyBetween(ctx, s, dstKey, s, srcKey, opts)
	}
	return driver.WrapError(driver.OpCopy, srcKey, s.b.Copy(ctx, dstKey, srcKey, nil), classify)
}

// Close implements blob.Store.
func (s *Store) Close() error {
	if !s.life.Close() {
		return driver.ClosedError(driver.OpClose, "")
	}
	err := s.b.Close()
	if s.release != nil {
		err = errors.Join(err, s.release())
	}
	return err
}
