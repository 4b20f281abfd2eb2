package regional

import (
	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob"
)

// classify maps a gocloud error to our sentinels by its gcerrors code.
func classify(err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return blob.ErrNotFound
	case gcerrors.FailedPrecondition:
		return blob.ErrPrecondition
	case gcerrors.InvalidArgument:
		return blob.ErrInvalidArgument
	case gcerrors.Unimplemented:
		return blob.ErrUnsupported
	}
	return nil
}
