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

// ClassifyWrite adapts a backend's classify to the commit of a write made
// under c, where backends answer in terms of HTTP conditions: under
// IfNotExist a failed precondition means the object exists (ErrExists), and
// under IfGenerationMatch a missing object means the precondition failed
// (ErrPrecondition).
func ClassifyWrite(classify func(error) error, c blob.Condition) func(error) error {
	return func(err error) error {
		var kind error
		if classify != nil {
			kind = classify(err)
		}
		_, ifGen := c.Generation()
		switch {
		case c.NotExist() && kind == blob.ErrPrecondition:
			return blob.ErrExists
		case ifGen && kind == blob.ErrNotFound:
			return blob.ErrPrecondition
		}
		return kind
	}
}
