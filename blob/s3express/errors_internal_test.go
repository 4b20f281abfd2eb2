package s3express

import (
	"errors"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/zonalblob/zonalblob/blob"
)

func TestClassifyBucketAndPermission(t *testing.T) {
	for code, want := range map[string]error{
		"NoSuchBucket":          blob.ErrBucketNotFound,
		"AccessDenied":          blob.ErrPermission,
		"InvalidAccessKeyId":    blob.ErrPermission,
		"SignatureDoesNotMatch": blob.ErrPermission,
		"NoSuchKey":             blob.ErrNotFound,
	} {
		err := &smithy.GenericAPIError{Code: code, Message: "m"}
		if got := classify(err); !errors.Is(got, want) {
			t.Errorf("classify(%s) = %v, want %v", code, got, want)
		}
	}
}
