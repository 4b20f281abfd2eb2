package driver

import (
	"context"
	"errors"

	"github.com/zonalblob/zonalblob/blob"
)

// WrapError wraps a backend error for op on key. classify maps it to a sentinel
// (or nil). Context errors are kept as the cause with no sentinel. A nil err
// stays nil, and an err that is already an *Error for the same op is returned as is.
func WrapError(op, key string, err error, classify func(error) error) error {
	if err == nil {
		return nil
	}
	var be *blob.Error
	if errors.As(err, &be) && be.Op == op && be.Key == key {
		return err
	}
	var kind error
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && classify != nil {
		kind = classify(err)
	}
	return &blob.Error{Op: op, Key: key, Kind: kind, Err: err}
}

// ClosedError is the error of op on key after the Store, Reader or Writer was
// closed.
func ClosedError(op, key string) error {
	return &blob.Error{Op: op, Key: key, Kind: blob.ErrClosed}
}
