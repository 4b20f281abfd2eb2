package azpremium

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Error codes the service uses when an account type lacks a blob type (append
// blobs on some premium accounts), absent from bloberror.
const (
	featureNotSupportedForAccount bloberror.Code = "FeatureNotSupportedForAccount"
	blobTypeNotSupported          bloberror.Code = "BlobTypeNotSupported"
)

// classify maps the service's answer to a sentinel.
func classify(err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return nil
	}
	switch bloberror.Code(re.ErrorCode) {
	case bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted:
		return blob.ErrBucketNotFound
	case bloberror.AuthenticationFailed, bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch,
		bloberror.AuthorizationProtocolMismatch, bloberror.AuthorizationResourceTypeMismatch, bloberror.AuthorizationServiceMismatch,
		bloberror.AuthorizationSourceIPMismatch, bloberror.InsufficientAccountPermissions:
		return blob.ErrPermission
	case bloberror.BlobAlreadyExists:
		return blob.ErrExists
	case bloberror.ConditionNotMet, bloberror.AppendPositionConditionNotMet, bloberror.MaxBlobSizeConditionNotMet, bloberror.TargetConditionNotMet, bloberror.SourceConditionNotMet:
		return blob.ErrPrecondition
	case featureNotSupportedForAccount, blobTypeNotSupported, bloberror.InvalidBlobType:
		return blob.ErrUnsupported
	case bloberror.MD5Mismatch, bloberror.InvalidMetadata, bloberror.InvalidHeaderValue, bloberror.InvalidRange, bloberror.InvalidQueryParameterValue:
		return blob.ErrInvalidArgument
	}
	switch re.StatusCode {
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

// wrap is driver.WrapError plus redaction of this store's credentials.
func (s *Store) wrap(op, key string, err error, classify func(error) error) error {
	return redact(driver.WrapError(op, key, err, classify), s.secrets)
}

// writeClassifier is driver.ClassifyWrite for a write under c, except that a
// missing container stays NotFound: only a missing object fails a generation
// precondition.
func writeClassifier(c blob.Condition) func(error) error {
	byCondition := driver.ClassifyWrite(classify, c)
	return func(err error) error {
		if bloberror.HasCode(err, bloberror.ContainerNotFound) {
			return classify(err)
		}
		return byCondition(err)
	}
}

// redact hides secrets from err's message (blob.RedactError: raw and
// escaped), keeping err reachable through errors.Is and errors.As.
func redact(err error, secrets []string) error { return blob.RedactError(err, secrets) }
