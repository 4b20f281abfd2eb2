package gcsrapid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	gax "github.com/googleapis/gax-go/v2"
)

// backoff is the pause between the retries of an idempotent call: gax draws
// each pause at random below its bound (full jitter), so that clients that
// failed together do not retry together.
func backoff() gax.Backoff {
	return gax.Backoff{Initial: 5 * time.Millisecond, Max: time.Second, Multiplier: 2}
}

// errStatusLost stands for the status of a read stream that the service
// ended before the request was sent.
//
// The service may fail a stream without reading it (a front end shedding
// load answers UNAVAILABLE or RESOURCE_EXHAUSTED at once). If that answer
// arrives before the client has sent the request, gRPC's SendMsg returns
// io.EOF and keeps the status for RecvMsg; the storage client's opening of
// a read (NewRangeReader, NewMultiRangeDownloader) returns that io.EOF as
// it is, without calling RecvMsg, so the status, which its retry policy
// would have retried, is lost. An io.EOF from opening a read is never an
// answer: not the end of an object (a read at or past the end opens, or
// fails OUT_OF_RANGE), nor an object's absence (NOT_FOUND comes after the
// request, which has then been sent).
var errStatusLost = errors.New("gcsrapid: the service ended the read stream before its request was sent; its status was lost")

// openRead calls open, which opens a read stream, until it returns
// something other than a lost status, at most 1+Retries times, with the
// pauses of the client's retries between calls. After the last, the lost
// status is reported as errStatusLost: never as io.EOF, which callers take
// for the end of the data. Each call has the client's own retries of the
// statuses it does see, so a read meets at most (1+Retries)² failures
// before it fails.
func openRead[T any](ctx context.Context, s *Store, open func() (T, error)) (T, error) {
	bo := backoff()
	for retries := 0; ; retries++ {
		v, err := open()
		if !errors.Is(err, io.EOF) {
			return v, err
		}
		if retries >= s.opts.Retries {
			var zero T
			return zero, fmt.Errorf("%w (%v)", errStatusLost, err)
		}
		if err := gax.Sleep(ctx, bo.Pause()); err != nil {
			var zero T
			return zero, err
		}
	}
}
