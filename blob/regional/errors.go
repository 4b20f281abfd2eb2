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

// classifyCommit is classify for the commit of a write made under c: the
// backend reports a lost IfNotExist as a failed precondition, which for the
// caller means the object exists.
func classifyCommit(c blob.Condition) func(error) error {
	return func(err error) error {
		kind := classify(err)
		if kind == blob.ErrPrecondition && c.NotExist() {
			return blob.ErrExists
		}
		return kind
	}
}
