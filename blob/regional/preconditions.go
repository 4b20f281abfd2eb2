package regional

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// generationKey is the metadata key holding the generation token on buckets
// with local preconditions.
const generationKey = "zonalblob-generation"

// generationSeed makes generations unique across processes sharing a
// directory; the counter makes them unique within one, without a random draw
// per write.
var (
	generationSeed = func() string {
		var b [8]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	generationCounter atomic.Uint64
)

func newGeneration() string {
	return generationSeed + strconv.FormatUint(generationCounter.Add(1), 36)
}

// generation returns key's current generation, or "" when it does not exist.
func (s *Store) generation(ctx context.Context, op, key string) (string, error) {
	a, err := s.b.Attributes(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return "", nil
	}
	if err != nil {
		return "", driver.WrapError(op, key, err, classify)
	}
	return s.attrs(key, a).Generation, nil
}

// checkPrecondition fails op on key unless key's current state meets c. On
// buckets with local preconditions the caller holds key's lock, so the check
// and the commit it guards are atomic within the process.
func (s *Store) checkPrecondition(ctx context.Context, op, key string, c blob.Condition) error {
	if c.IsZero() {
		return nil
	}
	gen, err := s.generation(ctx, op, key)
	if err != nil {
		return err
	}
	if c.NotExist() {
		if gen != "" {
			return &blob.Error{Op: op, Key: key, Kind: blob.ErrExists}
		}
		return nil
	}
	want, _ := c.Generation()
	switch {
	case gen == "":
		return blob.Errorf(op, key, blob.ErrPrecondition, "object does not exist")
	case gen != want:
		return blob.Errorf(op, key, blob.ErrPrecondition, "generation is %s, not %s", gen, want)
	}
	return nil
}
