package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/tiered"
)

// lyingReads serves, from the nth read of key on, bytes other than the
// object's under the same attributes: what a hot store that changed an
// object without a new generation, or damaged it in flight, would give.
type lyingReads struct {
	blob.Store
	key   string
	nth   int64
	reads atomic.Int64
}

func (l *lyingReads) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	r, err := l.Store.NewRangeReader(ctx, key, off, n)
	if err != nil || key != l.key || l.reads.Add(1) < l.nth {
		return r, err
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return nil, err
	}
	b = bytes.ToUpper(b)
	return &bytesReader{Reader: bytes.NewReader(b), attrs: r.Attributes()}, nil
}

type bytesReader struct {
	*bytes.Reader
	attrs *blob.Attributes
}

func (r *bytesReader) Close() error                 { return nil }
func (r *bytesReader) Attributes() *blob.Attributes { return r.attrs }

// A pack of one is written from a second read of the object, after the
// first was checked against the Stat and summed for the index. If the
// second read's bytes differ (same generation, other bytes), the pack's
// write is cancelled: nothing is committed, the object stays in hot, and
// the next pass moves it.
func TestPackOfOneChecksItsSecondRead(t *testing.T) {
	hot, cold := memPair(t)
	val := strings.Repeat("streamed bytes ", 1000)
	mustPut(t, hot, "k", val)
	lying := &lyingReads{Store: hot, key: "k", nth: 2}
	s := manualWith(t, lying, cold, aloneOpts)
	res := s.CompactOnce(ctxT(t))
	if res.Moved != 0 || res.Conflicts != 1 || res.Failed != 0 {
		t.Fatalf("pass %+v: want the move ended as a conflict", res)
	}
	if got := lying.reads.Load(); got != 2 {
		t.Fatalf("the move read k %d times, want 2 (a check, then the copy)", got)
	}
	if n := s.Stats().Packs; n != 0 {
		t.Errorf("%d packs written from bytes that did not sum as checked", n)
	}
	for _, k := range listKeys(t, cold) {
		if strings.HasPrefix(k, logPrefix) || strings.HasPrefix(k, batchPrefix) {
			t.Errorf("cold holds %q after the cancelled move", k)
		}
	}
	lying.nth = 1 << 62 // honest reads from here on
	checkModel(t, s, map[string]string{"k": val}, nil)

	// The next pass moves k.
	if res := s.CompactOnce(ctxT(t)); res.Moved != 1 {
		t.Fatalf("second pass %+v", res)
	}
	if left := listKeys(t, hot); len(left) != 0 {
		t.Errorf("hot holds %q", left)
	}
	checkModel(t, s, map[string]string{"k": val}, nil)
}

// What a read of an object in a pack of its own costs a process whose
// catalog has not seen the pack: besides the refresh any first read makes
// (a listing of the pack log and its inventory), the pack's index (one
// ranged read of its first MiB, which holds the header, the index and the
// start of the data) and the entry's range: two reads of the pack, as for
// any pack. The move itself reads the object from hot twice.
func TestPackOfOneReadCost(t *testing.T) {
	hot, cold := memPair(t)
	hotF := fault.Wrap(hot, fault.Options{Name: "hot"})
	val := strings.Repeat("x", 3<<20) // larger than the first read of a pack
	mustPut(t, hot, "big", val)
	opts := tiered.Options{PackMaxBytes: 1 << 20, MoveTimeout: aloneOpts.MoveTimeout, MaxClockSkew: aloneOpts.MaxClockSkew}
	mover := manualWith(t, hotF, cold, opts)
	if res := mover.CompactOnce(ctxT(t)); res.Moved != 1 || mover.Stats().Packs != 1 {
		t.Fatalf("pass %+v, stats %+v", res, mover.Stats())
	}
	if got := hotF.Stats()[fault.OpRead].Calls; got != 2 {
		t.Errorf("the move read hot %d times, want 2", got)
	}
	var packCalls []string
	coldH := &hooked{Store: cold, name: "cold", at: func(step, key string) {
		if strings.HasPrefix(key, logPrefix) {
			packCalls = append(packCalls, step)
		}
	}}
	reader := manualWith(t, hot, coldH, opts)
	b, err := blob.ReadAll(ctxT(t), reader, "big")
	if err != nil || string(b) != val {
		t.Fatalf("read %d bytes, %v", len(b), err)
	}
	if !slices.Equal(packCalls, []string{"cold:read", "cold:read"}) {
		t.Errorf("a first read of a pack of one called %q on the pack, want its index and its entry read", packCalls)
	}
}

// Every move is a pack move: a negative pack bound, which once turned packs
// off, is refused before any I/O.
func TestNoPacksRefused(t *testing.T) {
	hot, cold := memPair(t)
	if _, err := tiered.New(keepOpen(hot), nopClose{cold}, tiered.Options{PackMaxObjects: -1}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("PackMaxObjects -1: %v, want ErrInvalidArgument", err)
	}
}
