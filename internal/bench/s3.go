package bench

import (
	"context"
	"fmt"

	"gocloud.dev/blob/s3blob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// runS3 compares a directory bucket of S3 Express One Zone, written by our
// s3express driver, with a general purpose S3 Standard bucket written by
// gocloud's s3blob (the regional tier), each on its own emulator and
// profile.
func runS3(ctx context.Context, env *Env) error {
	express, err := s3expresstest.ProfileByName(env.ProfileName("express"))
	if err != nil {
		return err
	}
	standard, err := s3expresstest.ProfileByName(env.ProfileName("standard"))
	if err != nil {
		return err
	}
	const dirBucket = "bench--use1-az4--x-s3"
	xsrv, err := s3expresstest.NewServer(s3expresstest.Options{Profile: express, Seed: env.Seed, Buckets: []string{dirBucket}})
	if err != nil {
		return err
	}
	defer xsrv.Close()
	ssrv, err := s3expresstest.NewServer(s3expresstest.Options{Profile: standard, Seed: env.Seed, Buckets: []string{"bench"}})
	if err != nil {
		return err
	}
	defer ssrv.Close()

	ours, err := s3express.New(ctx, xsrv.Client(), dirBucket, s3express.Options{})
	if err != nil {
		return err
	}
	defer ours.Close()
	b, err := s3blob.OpenBucket(ctx, ssrv.Client(), "bench", nil)
	if err != nil {
		return err
	}
	theirs := regional.New(b, regional.Options{})
	defer theirs.Close()
	env.Measure(ctx,
		Path{Name: "s3express-put", Profile: express.Name, Requests: func() int64 { return xsrv.Stats().Requests },
			Write: func(ctx context.Context, n int, data []byte) error {
				return blob.Put(ctx, ours, fmt.Sprintf("put/%07d", n), data, nil)
			}},
		Path{Name: "s3-standard-put", Profile: standard.Name, Requests: func() int64 { return ssrv.Stats().Requests },
			Write: func(ctx context.Context, n int, data []byte) error {
				return blob.Put(ctx, theirs, fmt.Sprintf("put/%07d", n), data, nil)
			}},
	)
	return nil
}
