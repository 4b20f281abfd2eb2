package main

import (
	"testing"

	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// A missing bucket is a failure that names the bucket (exit 1), not a
// missing key (exit 3).
func TestMissingBucket(t *testing.T) {
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Seed: 1})
	u := "gcsrapid://nope?pool_size=0&endpoint=" + srv.Endpoint()
	for _, args := range [][]string{{"put", u, "k", "-"}, {"cat", u, "k"}, {"ls", u}} {
		wantFail(t, zb(t, "v", args...), exitFailed, `bucket "nope" does not exist`, srv.Endpoint())
	}
}
