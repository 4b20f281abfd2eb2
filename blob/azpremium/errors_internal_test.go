package azpremium

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/zonalblob/zonalblob/blob"
)

func TestClassifyBucketAndPermission(t *testing.T) {
	for _, c := range []struct {
		code   bloberror.Code
		status int
		want   error
	}{
		{bloberror.ContainerNotFound, 404, blob.ErrBucketNotFound},
		{bloberror.BlobNotFound, 404, blob.ErrNotFound},
		{bloberror.AuthorizationFailure, 403, blob.ErrPermission},
		{bloberror.AuthenticationFailed, 403, blob.ErrPermission},
		{"", 401, blob.ErrPermission},
	} {
		err := &azcore.ResponseError{ErrorCode: string(c.code), StatusCode: c.status}
		if got := classify(err); !errors.Is(got, c.want) {
			t.Errorf("classify(%s, %d) = %v, want %v", c.code, c.status, got, c.want)
		}
	}
}
