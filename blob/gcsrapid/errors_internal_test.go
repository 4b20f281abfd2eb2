package gcsrapid

import (
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zonalblob/zonalblob/blob"
)

func TestClassifyBucketAndPermission(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("x: %w", storage.ErrBucketNotExist), blob.ErrBucketNotFound},
		{storage.ErrObjectNotExist, blob.ErrNotFound},
		{status.Error(codes.PermissionDenied, "no"), blob.ErrPermission},
		{status.Error(codes.Unauthenticated, "no"), blob.ErrPermission},
		{&googleapi.Error{Code: 403}, blob.ErrPermission},
		{&googleapi.Error{Code: 401}, blob.ErrPermission},
	} {
		if got := classify(c.err); !errors.Is(got, c.want) {
			t.Errorf("classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
