package azpremium

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
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

// The Store's own credentials leave its errors in no form: raw, or escaped
// as a query or path component (a SAS token in a request URL is), and the
// error stays what it was for errors.Is.
func TestRedactEveryForm(t *testing.T) {
	key := "k3y/with+special=chars"
	for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key), url.QueryEscape(url.QueryEscape(key))} {
		err := redact(fmt.Errorf("GET https://acct.blob.core.windows.net/c?sig=%s: %w", form, blob.ErrNotFound), []string{key})
		if strings.Contains(err.Error(), form) || !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("%q: %v", form, err)
		}
		if !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%q: the redacted error is no longer ErrNotFound: %v", form, err)
		}
	}
}
