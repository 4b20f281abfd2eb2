package s3express_test

import (
	"context"
	"fmt"
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
			b, err := s3blob.OpenBucket(ctx, srv.Client(), name, nil)
			if err != nil {
				t.Fatal(err)
			}
			return regional.New(b, regional.Options{})
		},
		Caps: conformance.Caps{GenerationPreconditions: false, NonSlashDelimiters: true},
	})
}
