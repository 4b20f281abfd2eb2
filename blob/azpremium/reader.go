package azpremium

import (
	"context"
	"fmt"
	"io"
	"strings"

	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// NewRangeReader implements blob.Store.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	if err := s.begin(ctx, driver.OpRead, key, true); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, blob.Errorf(driver.OpRead, key, blob.ErrInvalidArgument, "negative offset %d", offset)
	}
	bc := s.client.NewBlobClient(escapeKey(key))
	if length == 0 {
		// The SDK reads a zero Count as "to the end"; ask for the attributes only.
		return s.emptyReader(ctx, key)
	}
	var o azblobblob.DownloadStreamOptions
	if offset > 0 || length > 0 {
		o.Range = azblobblob.HTTPRange{Offset: offset, Count: max(length, 0)}
	}
	resp, err := bc.DownloadStream(ctx, &o)
	if err != nil {
		if bloberror.HasCode(err, bloberror.InvalidRange) {
			// Reading at or past the end is not an error: io.EOF at once.
			return s.emptyReader(ctx, key)
		}
		return nil, s.wrap(driver.OpRead, key, err, classify)
	}
	size := derefInt(resp.ContentLength)
	if resp.ContentRange != nil {
		if _, total, ok := strings.Cut(*resp.ContentRange, "/"); ok {
			fmt.Sscanf(total, "%d", &size)
		}
	}
	attrs := func() *blob.Attributes {
		a := &blob.Attributes{
			Key:                key,
			Size:               size,
			ContentType:        deref(resp.ContentType),
			CacheControl:       deref(resp.CacheControl),
			ContentDisposition: deref(resp.ContentDisposition),
			ContentEncoding:    deref(resp.ContentEncoding),
			ContentLanguage:    deref(resp.ContentLanguage),
			Metadata:           decodeMetadata(resp.Metadata),
			ModTime:            derefTime(resp.LastModified),
			CreateTime:         derefTime(resp.CreationTime),
		}
		if resp.ETag != nil {
			a.ETag, a.Generation = string(*resp.ETag), string(*resp.ETag)
		}
		if resp.ContentRange == nil {
			a.MD5 = resp.ContentMD5
		}
		return a
	}
	return driver.NewReader(key, redactedBody{resp.Body, s.secrets}, attrs, classify), nil
}

func (s *Store) emptyReader(ctx context.Context, key string) (blob.Reader, error) {
	a, err := s.stat(ctx, driver.OpRead, key)
	if err != nil {
		return nil, err
	}
	return driver.EmptyReader(a), nil
}

// redactedBody hides the Store's credentials from the errors of a download
// (a broken connection's error can quote the request URL and its SAS token).
type redactedBody struct {
	io.ReadCloser
	secrets []string
}

func (b redactedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = redact(err, b.secrets)
	}
	return n, err
}
