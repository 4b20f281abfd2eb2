package fault_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
)

// pipelinedStore is a gcsrapid store with pipelined append streams, wrapped.
func pipelinedStore(t *testing.T) (*fault.Store, blob.Store) {
	t.Helper()
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{})
	if err := srv.CreateBucket("zone", true); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("gcsrapid://zone?endpoint=" + srv.Endpoint())
	s, err := gcsrapid.OpenURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return fault.Wrap(s, fault.Options{Seed: 1}), s
}

// send sends each frame without waiting and returns the errors in the
// order the acknowledgements came, with the frames' indexes.
func send(ctx context.Context, st blob.PipelinedAppendStream, frames [][]byte) (order []int, errs []error, beforeLast int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var refused []received
	for i, f := range frames {
		wg.Add(1)
		if err := st.Send(ctx, f, func(err error) {
			mu.Lock()
			order, errs = append(order, i), append(errs, err)
			mu.Unlock()
			wg.Done()
		}); err != nil {
			// Refused at once (the stream failed before): nothing was
			// sent and done never runs; it counts after the others.
			wg.Done()
			refused = append(refused, received{i, err})
		}
	}
	mu.Lock()
	beforeLast = len(order)
	mu.Unlock()
	wg.Wait()
	for _, r := range refused {
		order, errs = append(order, r.i), append(errs, r.err)
	}
	return order, errs, beforeLast
}

type received struct {
	i   int
	err error
}

// The wrapper keeps a pipelined stream pipelined and faults each Send as a
// commit: a delay holds that Send's acknowledgement and not the Sends
// after it; a failure before fails the stream before the bytes go; a
// FailAfter reports a failure once they are durable; acknowledgements keep
// the order of the Sends, and every Send after a failure fails.
func TestPipelinedStreamFaults(t *testing.T) {
	ctx := context.Background()
	frames := make([][]byte, 6)
	for i := range frames {
		frames[i] = []byte(fmt.Sprintf("f%d|", i))
	}
	for _, c := range []struct {
		name string
		arm  func(f *fault.Store)
		// ok is how many Sends succeed; durable how many frames the
		// object holds after them (-1: ok).
		ok, durable int
	}{
		{"none", func(*fault.Store) {}, 6, -1},
		{"delay", func(f *fault.Store) {
			f.Add(fault.Rule{Op: fault.OpCommit, Skip: 2, Count: 1, Effect: fault.Delay, Latency: latency.Fixed(time.Second)})
		}, 6, -1},
		{"fail before", func(f *fault.Store) { f.FailNth(fault.OpCommit, 4, nil) }, 3, -1},
		{"fail after", func(f *fault.Store) { f.FailNthAfter(fault.OpCommit, 4, nil) }, 3, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, inner := pipelinedStore(t)
			// The create is the first commit.
			as, err := f.CreateAppendStream(ctx, "log", []byte("h|"))
			if err != nil {
				t.Fatal(err)
			}
			st, ok := as.(blob.PipelinedAppendStream)
			if !ok {
				t.Fatalf("%T is not pipelined", as)
			}
			c.arm(f)
			order, errs, beforeLast := send(ctx, st, frames)
			if c.name == "delay" && beforeLast > 2 {
				// Only the two Sends before the delayed one may be
				// acknowledged before the last Send has gone out (both
				// may be, on a loaded machine): had the delay held the
				// Sends after it, the delayed one's would have come too.
				t.Errorf("%d acknowledgements came before the last Send returned: the delay held the Sends after it", beforeLast)
			}
			okN := 0
			for i := range order {
				if order[i] != i {
					t.Fatalf("acknowledgements out of order: %v", order)
				}
				if errs[i] == nil {
					if okN != i {
						t.Fatalf("send %d acknowledged after a failure: %v", i, errs)
					}
					okN++
				} else if !errors.Is(errs[i], fault.ErrInjected) && okN == i {
					t.Errorf("first failure %v is not the injected one", errs[i])
				}
			}
			if okN != c.ok {
				t.Fatalf("%d sends acknowledged, want %d: %v", okN, c.ok, errs)
			}
			got, err := blob.ReadAll(ctx, inner, "log")
			if err != nil {
				t.Fatal(err)
			}
			durable := c.durable
			if durable < 0 {
				durable = c.ok
			}
			// A FailAfter fails the stream once its Send is durable: the
			// Sends already in flight behind it may be durable or not.
			want := append([]byte("h|"), bytes.Join(frames[:durable], nil)...)
			if c.name == "fail after" {
				atLeast := append([]byte("h|"), bytes.Join(frames[:c.ok+1], nil)...)
				if !bytes.HasPrefix(got, atLeast) || !bytes.HasPrefix(want, got) {
					t.Errorf("object holds %q, want at least %q and a prefix of %q", got, atLeast, want)
				}
			} else if !bytes.Equal(got, want) {
				t.Errorf("object holds %q, want %q", got, want)
			}
			if c.ok < len(frames) {
				if err := st.Send(ctx, []byte("x"), func(error) { t.Error("done of a refused Send") }); err == nil {
					t.Error("a failed stream takes more Sends")
				}
			}
		})
	}
}
