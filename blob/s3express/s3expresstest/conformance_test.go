package s3expresstest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/drivertest"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// The conformance run checks the emulator's general purpose bucket mode
// against gocloud's own S3 driver, s3blob, driven by the real SDK: if s3blob
// passes gocloud's driver suite here, the emulator answers the way S3 does
// for everything that suite covers.
//
// s3blob does not export its driver.Bucket, only a *blob.Bucket, so
// bucketDriver adapts the public API back to driver.Bucket. Every call goes
// straight through to s3blob, SignedURL included: the emulator verifies
// SigV4 signatures, so the suite's check that a URL signed for one method
// or content type fails for another is meaningful.

const conformanceBucket = "conformance"

type harness struct {
	srv *s3expresstest.Server
}

func newHarness(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	srv, err := s3expresstest.NewServer(s3expresstest.Options{Buckets: []string{conformanceBucket}})
	if err != nil {
		return nil, err
	}
	return &harness{srv: srv}, nil
}

func (h *harness) open(ctx context.Context, bucket string) (driver.Bucket, error) {
	b, err := s3blob.OpenBucket(ctx, h.srv.Client(), bucket, nil)
	if err != nil {
		return nil, err
	}
	return &bucketDriver{b: b}, nil
}

func (h *harness) MakeDriver(ctx context.Context) (driver.Bucket, error) {
	return h.open(ctx, conformanceBucket)
}

func (h *harness) MakeDriverForNonexistentBucket(ctx context.Context) (driver.Bucket, error) {
	return h.open(ctx, "no-such-bucket")
}

func (h *harness) HTTPClient() *http.Client         { return h.srv.HTTPClient() }
func (h *harness) SupportsCopy() bool               { return true }
func (h *harness) SupportsNonSlashDelimiters() bool { return true }
func (h *harness) Close()                           { h.srv.Close() }

func TestConformanceS3blobOnPlainBucket(t *testing.T) {
	drivertest.RunConformanceTests(t, newHarness, []drivertest.AsTest{s3AsTest{}})
}

type bucketDriver struct {
	b *blob.Bucket
}

func (d *bucketDriver) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }

func (d *bucketDriver) As(i any) bool                 { return d.b.As(i) }
func (d *bucketDriver) ErrorAs(err error, i any) bool { return d.b.ErrorAs(err, i) }
func (d *bucketDriver) Close() error                  { return d.b.Close() }

func (d *bucketDriver) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := d.b.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl: a.CacheControl, ContentDisposition: a.ContentDisposition, ContentEncoding: a.ContentEncoding,
		ContentLanguage: a.ContentLanguage, ContentType: a.ContentType, Metadata: a.Metadata,
		CreateTime: a.CreateTime, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag, AsFunc: a.As,
	}, nil
}

func (d *bucketDriver) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	token := opts.PageToken
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	size := opts.PageSize
	if size <= 0 {
		size = 1000
	}
	objs, next, err := d.b.ListPage(ctx, token, size, &blob.ListOptions{
		Prefix: opts.Prefix, Delimiter: opts.Delimiter, BeforeList: opts.BeforeList,
	})
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{
			Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir, AsFunc: o.As,
		})
	}
	return page, nil
}

func (d *bucketDriver) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	r, err := d.b.NewRangeReader(ctx, key, offset, length, &blob.ReaderOptions{BeforeRead: opts.BeforeRead})
	if err != nil {
		return nil, err
	}
	return &reader{r: r}, nil
}

type reader struct{ r *blob.Reader }

func (r *reader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *reader) Close() error               { return r.r.Close() }
func (r *reader) As(i any) bool              { return r.r.As(i) }
func (r *reader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (d *bucketDriver) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return d.b.NewWriter(ctx, key, &blob.WriterOptions{
		BufferSize: opts.BufferSize, MaxConcurrency: opts.MaxConcurrency, CacheControl: opts.CacheControl,
		ContentDisposition: opts.ContentDisposition, ContentEncoding: opts.ContentEncoding,
		ContentLanguage: opts.ContentLanguage, ContentType: contentType, DisableContentTypeDetection: true,
		ContentMD5: opts.ContentMD5, Metadata: opts.Metadata, BeforeWrite: opts.BeforeWrite, IfNotExist: opts.IfNotExist,
	})
}

func (d *bucketDriver) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	return d.b.Copy(ctx, dstKey, srcKey, &blob.CopyOptions{BeforeCopy: opts.BeforeCopy})
}

func (d *bucketDriver) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	return d.b.DeleteWithOptions(ctx, key, &blob.DeleteOptions{BeforeDelete: opts.BeforeDelete})
}

func (d *bucketDriver) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	return d.b.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: opts.Expiry, Method: opts.Method,
		ContentType: opts.ContentType, EnforceAbsentContentType: opts.EnforceAbsentContentType, BeforeSign: opts.BeforeSign})
}

// s3AsTest checks that the SDK's own types come through s3blob's As
// functions when it talks to the emulator.
type s3AsTest struct{}

func (s3AsTest) Name() string { return "s3blob As over s3expresstest" }

func (s3AsTest) BucketCheck(b *blob.Bucket) error {
	var c *s3.Client
	if !b.As(&c) {
		return errors.New("Bucket.As(*s3.Client) failed")
	}
	return nil
}

func (s3AsTest) ErrorCheck(b *blob.Bucket, err error) error {
	var ae smithy.APIError
	if !b.ErrorAs(err, &ae) {
		return fmt.Errorf("ErrorAs(smithy.APIError) failed for %v", err)
	}
	if ae.ErrorCode() != "NoSuchKey" && ae.ErrorCode() != "NotFound" {
		return fmt.Errorf("error code %q, want NoSuchKey or NotFound", ae.ErrorCode())
	}
	return nil
}

func (s3AsTest) BeforeRead(as func(any) bool) error {
	var in *s3.GetObjectInput
	if !as(&in) {
		return errors.New("BeforeRead As(*s3.GetObjectInput) failed")
	}
	return nil
}

func (s3AsTest) BeforeWrite(as func(any) bool) error  { return nil }
func (s3AsTest) BeforeCopy(as func(any) bool) error   { return nil }
func (s3AsTest) BeforeDelete(as func(any) bool) error { return nil }
func (s3AsTest) BeforeSign(as func(any) bool) error   { return nil }

func (s3AsTest) BeforeList(as func(any) bool) error {
	var in *s3.ListObjectsV2Input
	if !as(&in) {
		return errors.New("BeforeList As(*s3.ListObjectsV2Input) failed")
	}
	return nil
}

func (s3AsTest) AttributesCheck(attrs *blob.Attributes) error {
	var out s3.HeadObjectOutput
	if !attrs.As(&out) {
		return errors.New("Attributes.As(s3.HeadObjectOutput) failed")
	}
	if out.ETag == nil || *out.ETag != attrs.ETag {
		return fmt.Errorf("HeadObjectOutput.ETag %v, Attributes.ETag %q", out.ETag, attrs.ETag)
	}
	return nil
}

func (s3AsTest) ReaderCheck(r *blob.Reader) error {
	var out s3.GetObjectOutput
	if !r.As(&out) {
		return errors.New("Reader.As(s3.GetObjectOutput) failed")
	}
	return nil
}

func (s3AsTest) ListObjectCheck(o *blob.ListObject) error {
	if o.IsDir {
		var p types.CommonPrefix
		if !o.As(&p) {
			return errors.New("ListObject.As(types.CommonPrefix) failed")
		}
		return nil
	}
	var obj types.Object
	if !o.As(&obj) {
		return errors.New("ListObject.As(types.Object) failed")
	}
	return nil
}
