package blob

import (
	"context"
	"errors"
	"io"
	"net/url"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// Bucket returns s as a *gocloud.dev/blob.Bucket, for apps written against
// gocloud's portable API. Closing the Bucket closes s. The Bucket's As accepts
// a *blob.Store and sets it to s.
func Bucket(s Store) *gcblob.Bucket { return gcblob.NewBucket(Driver(s)) }

// Driver returns s as a gocloud driver.Bucket (for gocloud's drivertest, or to
// wrap it further with gocloud's machinery).
func Driver(s Store) driver.Bucket { return &gocloudDriver{s: s} }

// GocloudErrorCode classifies err as gocloud does: IfNotExist conflicts and
// failed generation preconditions are FailedPrecondition.
func GocloudErrorCode(err error) gcerrors.ErrorCode {
	switch {
	case err == nil:
		return gcerrors.OK
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrBucketNotFound):
		return gcerrors.NotFound
	case errors.Is(err, ErrPermission):
		return gcerrors.PermissionDenied
	case errors.Is(err, ErrCorrupt):
		return gcerrors.Internal
	case errors.Is(err, ErrExists), errors.Is(err, ErrPrecondition):
		return gcerrors.FailedPrecondition
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidArgument):
		return gcerrors.InvalidArgument
	case errors.Is(err, ErrUnsupported):
		return gcerrors.Unimplemented
	case errors.Is(err, ErrClosed):
		return gcerrors.FailedPrecondition
	case errors.Is(err, context.Canceled):
		return gcerrors.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return gcerrors.DeadlineExceeded
	}
	return gcerrors.Unknown
}

func registerGocloud(scheme string, open Opener) {
	gcblob.DefaultURLMux().RegisterBucket(scheme, gocloudOpener(open))
}

type gocloudOpener Opener

func (o gocloudOpener) OpenBucketURL(ctx context.Context, u *url.URL) (*gcblob.Bucket, error) {
	s, err := o(ctx, u)
	if err != nil {
		return nil, redactError(err, u.String())
	}
	// The store's later errors (an SDK quoting its endpoint, say) are redacted
	// too: gocloud prints them in its own.
	return gcblob.NewBucket(&gocloudDriver{s: s, secrets: Secrets(u.String())}), nil
}

type gocloudDriver struct {
	s       Store
	secrets []string // of the URL the store was opened with
}

// redact hides the store's URL credentials from err's message.
func (d *gocloudDriver) redact(err error) error {
	if err == nil || len(d.secrets) == 0 {
		return err
	}
	msg := err.Error()
	if red := RedactSecrets(msg, d.secrets); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

var _ driver.Bucket = (*gocloudDriver)(nil)

func noAs(any) bool { return false }

func (d *gocloudDriver) ErrorCode(err error) gcerrors.ErrorCode { return GocloudErrorCode(err) }

func (d *gocloudDriver) As(i any) bool {
	p, ok := i.(*Store)
	if ok {
		*p = d.s
	}
	return ok
}

func (d *gocloudDriver) ErrorAs(err error, i any) bool { return errors.As(err, i) }

func (d *gocloudDriver) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := d.s.Stat(ctx, escapeGocloudKey(key))
	if err != nil {
		return nil, d.redact(err)
	}
	return &driver.Attributes{
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		ContentType:        a.ContentType,
		Metadata:           a.Metadata,
		CreateTime:         a.CreateTime,
		ModTime:            a.ModTime,
		Size:               a.Size,
		MD5:                a.MD5,
		ETag:               a.ETag,
		AsFunc:             noAs,
	}, nil
}

func (d *gocloudDriver) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	if opts.BeforeList != nil {
		if err := opts.BeforeList(noAs); err != nil {
			return nil, err
		}
	}
	page, err := d.s.List(ctx, &ListOptions{
		Prefix:    escapeGocloudKey(opts.Prefix),
		Delimiter: opts.Delimiter,
		PageSize:  opts.PageSize,
		PageToken: string(opts.PageToken),
	})
	if err != nil {
		return nil, d.redact(err)
	}
	out := &driver.ListPage{Objects: make([]*driver.ListObject, len(page.Objects))}
	for i, o := range page.Objects {
		out.Objects[i] = &driver.ListObject{Key: unescapeGocloudKey(o.Key), ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir, AsFunc: noAs}
	}
	if page.NextPageToken != "" {
		out.NextPageToken = []byte(page.NextPageToken)
	}
	return out, nil
}

func (d *gocloudDriver) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	if opts != nil && opts.BeforeRead != nil {
		if err := opts.BeforeRead(noAs); err != nil {
			return nil, err
		}
	}
	r, err := d.s.NewRangeReader(ctx, escapeGocloudKey(key), offset, length)
	if err != nil {
		return nil, d.redact(err)
	}
	return gocloudReader{r, d}, nil
}

type gocloudReader struct {
	r Reader
	d *gocloudDriver
}

func (r gocloudReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = r.d.redact(err)
	}
	return n, err
}
func (r gocloudReader) Close() error { return r.d.redact(r.r.Close()) }
func (r gocloudReader) As(any) bool  { return false }
func (r gocloudReader) Attributes() *driver.ReaderAttributes {
	a := r.r.Attributes()
	return &driver.ReaderAttributes{ContentType: a.ContentType, ModTime: a.ModTime, Size: a.Size}
}

func (d *gocloudDriver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	if opts.BeforeWrite != nil {
		if err := opts.BeforeWrite(noAs); err != nil {
			return nil, err
		}
	}
	w, err := d.s.NewWriter(ctx, escapeGocloudKey(key), &WriterOptions{
		ContentType:        contentType,
		CacheControl:       opts.CacheControl,
		ContentDisposition: opts.ContentDisposition,
		ContentEncoding:    opts.ContentEncoding,
		ContentLanguage:    opts.ContentLanguage,
		Metadata:           opts.Metadata,
		ContentMD5:         opts.ContentMD5,
		If:                 gocloudCondition(opts.IfNotExist),
	})
	if err != nil {
		return nil, d.redact(err)
	}
	return gocloudWriter{w, d}, nil
}

type gocloudWriter struct {
	w Writer
	d *gocloudDriver
}

func (w gocloudWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, w.d.redact(err)
}
func (w gocloudWriter) Close() error { return w.d.redact(w.w.Close()) }

func (d *gocloudDriver) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	if opts != nil && opts.BeforeCopy != nil {
		if err := opts.BeforeCopy(noAs); err != nil {
			return err
		}
	}
	return d.redact(Copy(ctx, d.s, escapeGocloudKey(dstKey), escapeGocloudKey(srcKey), nil))
}

func (d *gocloudDriver) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	if opts != nil && opts.BeforeDelete != nil {
		if err := opts.BeforeDelete(noAs); err != nil {
			return err
		}
	}
	return d.redact(d.s.Delete(ctx, escapeGocloudKey(key), nil))
}

func (d *gocloudDriver) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return "", &Error{Op: "signed URL", Key: key, Kind: ErrUnsupported}
}

func (d *gocloudDriver) Close() error { return d.redact(d.s.Close()) }

// Compile-time check that the bridge reader satisfies gocloud's interface.
var _ driver.Reader = gocloudReader{}

var _ io.Closer = (*gocloudDriver)(nil)

// gocloudCondition maps gocloud's IfNotExist flag, its only write
// precondition, to a Condition.
func gocloudCondition(ifNotExist bool) Condition {
	if ifNotExist {
		return IfNotExist()
	}
	return Condition{}
}
