package regional

import (
	"errors"
	"syscall"

	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob"
)

// classify maps a gocloud error to our sentinels by its gcerrors code.
func classify(err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		// file://: a path through an object ("a/b" when "a" is an object)
		// names no object. Writes name the conflict before this.
		return blob.ErrNotFound
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return blob.ErrNotFound
	case gcerrors.FailedPrecondition:
		return blob.ErrPrecondition
	case gcerrors.InvalidArgument:
		return blob.ErrInvalidArgument
	case gcerrors.Unimplemented:
		return blob.ErrUnsupported
	case gcerrors.PermissionDenied:
		return blob.ErrPermission
	}
	return nil
}
