package gcsrapid

import (
	"errors"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zonalblob/zonalblob/blob"
)

// classify maps a storage client error to our sentinels, by type and status
// code, never by text.
func classify(err error) error {
	if errors.Is(err, storage.ErrBucketNotExist) {
		return blob.ErrBucketNotFound
	}
	if errors.Is(err, storage.ErrObjectNotExist) {
		return blob.ErrNotFound
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch ge.Code {
		case http.StatusNotFound:
			return blob.ErrNotFound
		case http.StatusPreconditionFailed:
			return blob.ErrPrecondition
		case http.StatusBadRequest:
			return blob.ErrInvalidArgument
		case http.StatusUnauthorized, http.StatusForbidden:
			return blob.ErrPermission
		}
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.NotFound:
			return blob.ErrNotFound
		case codes.FailedPrecondition:
			return blob.ErrPrecondition
		case codes.AlreadyExists:
			return blob.ErrExists
		case codes.InvalidArgument, codes.OutOfRange:
			return blob.ErrInvalidArgument
		case codes.Unimplemented:
			return blob.ErrUnsupported
		case codes.PermissionDenied, codes.Unauthenticated:
			return blob.ErrPermission
		}
	}
	return nil
}

func isOutOfRange(err error) bool {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
		return true
	}
	return status.Code(err) == codes.OutOfRange
}
