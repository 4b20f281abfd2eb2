package s3express

import (
	"errors"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/zonalblob/zonalblob/blob"
)

// Error codes S3 answers with that we act on.
const (
	codeConditionalConflict = "ConditionalRequestConflict"
	codeInvalidWriteOffset  = "InvalidWriteOffset"
)

// classify maps an SDK error to our sentinels by its S3 error code or, when
// the response had no body (HEAD), its HTTP status; never by message text.
func classify(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket":
			return blob.ErrBucketNotFound
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled":
			return blob.ErrPermission
		case "NoSuchKey", "NotFound", "NoSuchUpload":
			return blob.ErrNotFound
		case "PreconditionFailed", codeInvalidWriteOffset:
			return blob.ErrPrecondition
		case "NotImplemented":
			return blob.ErrUnsupported
		case "InvalidArgument", "InvalidRequest", "KeyTooLongError", "InvalidDigest", "BadDigest", "EntityTooSmall", "InvalidPart":
			return blob.ErrInvalidArgument
		}
	}
	switch httpStatus(err) {
	case http.StatusUnauthorized, http.StatusForbidden:
		return blob.ErrPermission
	case http.StatusNotFound:
		return blob.ErrNotFound
	case http.StatusPreconditionFailed:
		return blob.ErrPrecondition
	case http.StatusNotImplemented:
		return blob.ErrUnsupported
	}
	return nil
}

func httpStatus(err error) int {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isConflict reports S3's 409 ConditionalRequestConflict: a concurrent
// conditional write to the key was in flight. Retrying decides the race.
func isConflict(err error) bool {
	return errorCode(err) == codeConditionalConflict || httpStatus(err) == http.StatusConflict
}
