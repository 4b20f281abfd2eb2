package quorum_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// readRace is a replica view whose next read of a key opens its reader and
// then waits, and whose Stats of that key wait too, until the test has
// changed the replica: the interleaving in which a Stat made alongside a
// read sees a write that landed after the reader opened.
type readRace struct {
	blob.Store
	mu      sync.Mutex
	armed   bool
	opened  chan struct{}
	proceed chan struct{}
}

func (r *readRace) arm() {
	r.mu.Lock()
	r.armed, r.opened, r.proceed = true, make(chan struct{}), make(chan struct{})
	r.mu.Unlock()
}

func (r *readRace) current() (bool, chan struct{}, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.armed, r.opened, r.proceed
}

func (r *readRace) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	armed, opened, proceed := r.current()
	rd, err := r.Store.NewRangeReader(ctx, key, off, n)
	if armed {
		r.mu.Lock()
		r.armed = false
		r.mu.Unlock()
		close(opened)
		<-proceed
	}
	return rd, err
}

func (r *readRace) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	if armed, _, proceed := r.current(); armed || proceed != nil {
		select {
		case <-proceed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return r.Store.Stat(ctx, key)
}

// Close does not close the shared replica.
func (r *readRace) Close() error { return nil }

// A fastest read serves the bytes of the version whose attributes it
// returns, even when a write lands on the replica between the reader's open
// and the Stat made alongside it: before, the reader's bytes (of the
// version before, or a tombstone's) went out under the new version's
// attributes.
func TestFastestReadServesTheVersionItDescribes(t *testing.T) {
	for _, before := range []string{"value", "tombstone"} {
		t.Run(before, func(t *testing.T) {
			ctx := context.Background()
			mem := testkit.Mems(t, 1)[0]
			t.Cleanup(func() { mem.Close() })
			race := &readRace{Store: mem}
			reader := newQuorum(t, []blob.Store{race}, testOptions())
			writer := newQuorum(t, []blob.Store{&readRace{Store: mem}}, testOptions())
			if err := blob.Put(ctx, writer, "k", []byte("aa"), nil); err != nil {
				t.Fatal(err)
			}
			if before == "tombstone" {
				if err := writer.Delete(ctx, "k", nil); err != nil {
					t.Fatal(err)
				}
			}
			race.arm()
			type got struct {
				b     []byte
				attrs *blob.Attributes
				err   error
			}
			ch := make(chan got, 1)
			go func() {
				rd, err := reader.NewRangeReader(ctx, "k", 0, -1)
				if err != nil {
					ch <- got{err: err}
					return
				}
				defer rd.Close()
				b, err := io.ReadAll(rd)
				ch <- got{b, rd.Attributes(), err}
			}()
			_, opened, proceed := race.current()
			<-opened
			if err := blob.Put(ctx, writer, "k", []byte("xyz"), nil); err != nil {
				t.Fatal(err)
			}
			close(proceed)
			g := <-ch
			if g.err != nil {
				t.Fatal(g.err)
			}
			a, err := writer.Stat(quorum.WithConsistency(ctx, quorum.ReadMajority), "k")
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(g.b)) != g.attrs.Size || string(g.b) != "xyz" || g.attrs.Generation != a.Generation {
				t.Fatalf("read %q with attributes of size %d, generation %s; the key holds %q at %s", g.b, g.attrs.Size, g.attrs.Generation, "xyz", a.Generation)
			}
		})
	}
}

// An operation acknowledged by its retry round, which finds that its first
// round's accepts took effect, moves the process's floor like one
// acknowledged by its own accepts: the process's next fastest read is never
// older. The first round's accept lands on replica 1 and lands on replica 0
// but is reported failed; replica 2 takes none of the Delete's writes (its
// first commit is held until the test ends, its second refused), and repair
// cannot reach it afterwards; the read then finds replicas 0 and 1 down.
func TestRetryAcknowledgedWriteMovesTheFloor(t *testing.T) {
	for _, op := range []string{"put", "delete"} {
		t.Run(op, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t, 3, 2, testOptions(), 7)
			p, other := c.procs[0], c.procs[1]
			// Another process writes the value before: a promise of its
			// Put that a replica answers late would otherwise commit
			// through p's fault wrappers after the rules are armed, and
			// take the count meant for the Delete's accept (the Delete's
			// promise on replica 0 then failed, and with replica 2's held
			// it waited out its bound).
			if err := blob.Put(ctx, other.q, "k", []byte("old"), nil); err != nil {
				t.Fatal(err)
			}
			waitUntracked(t, other.q)
			c.stop(other)
			// On each replica a write of a caller-named key commits twice:
			// the promise, then the accept.
			p.faults[0].FailNthAfter(fault.OpCommit, 2, nil)
			p.faults[2].FailNth(fault.OpCommit, 2, nil)
			held := p.gates[2].holdFunc(1000, func(o, key string, _ []byte) bool { return o == "commit" && key == "k" })
			defer held.Release()
			var err error
			if op == "put" {
				err = blob.Put(ctx, p.q, "k", []byte("new"), nil)
			} else {
				err = p.q.Delete(ctx, "k", nil)
			}
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			if st := p.faults[0].Stats()[fault.OpCommit]; st.Failures != 1 {
				t.Fatalf("replica 0 reported %d commits failed, want its accept's", st.Failures)
			}
			p.faults[0].SetDown(true)
			p.faults[1].SetDown(true)
			for range 3 {
				b, err := blob.ReadAll(ctx, p.q, "k")
				if err == nil && string(b) == "old" {
					t.Fatalf("a fastest read after the acknowledged %s returned the value before it", op)
				}
				if a, err := p.q.Stat(ctx, "k"); err == nil && a.Size == 3 && op == "delete" {
					t.Fatalf("a fastest Stat after the acknowledged delete found the value before it")
				}
			}
		})
	}
}

// waitUntracked waits until the store no longer sends reads of keys it
// wrote to a majority: every replica took its writes.
func waitUntracked(t testing.TB, q *quorum.Store) {
	t.Helper()
	for i := 0; q.Stats().TrackedKeys > 0; i++ {
		if i > 2000 {
			t.Fatalf("the store's writes never reached every replica: %+v", q.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A write's bound grows with its size: an object whose replica commits take
// longer than StragglerTimeout (but less than the allowance for its size at
// MinRate) is written, where a bound of StragglerTimeout alone failed it.
func TestLargeWriteBoundFollowsItsSize(t *testing.T) {
	ctx := context.Background()
	reps, fs := faulted(t, 3, 11)
	opts := testOptions()
	opts.StragglerTimeout = 200 * time.Millisecond
	opts.TombstoneGrace = time.Second
	q := newQuorum(t, reps, opts)
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16) // 3 MiB: an allowance of 3.2 s
	for _, f := range fs {
		f.AddLatency(fault.OpCommit, latency.Fixed(600*time.Millisecond))
	}
	if err := blob.Put(ctx, q, "big", data, nil); err != nil {
		t.Fatalf("a 3 MiB write whose commits take 600 ms each: %v", err)
	}
	for _, f := range fs {
		if st := f.Stats()[fault.OpCommit]; st.Delayed == 0 {
			t.Fatalf("no commit was delayed: %+v", st)
		}
	}
	got, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

// An operation that our bound ends, while its caller's context is live,
// fails with ErrNoQuorum (and ErrUncertain when its accepts may have
// landed), never as a context error the caller did not ask for.
func TestBoundEndsWithNoQuorum(t *testing.T) {
	ctx := context.Background()
	reps, fs := faulted(t, 3, 12)
	opts := testOptions()
	opts.StragglerTimeout = 100 * time.Millisecond
	opts.TombstoneGrace = time.Second
	q := newQuorum(t, reps, opts)
	if err := blob.Put(ctx, q, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range fs[1:] {
		f.Hang(fault.OpCommit)
		f.Hang(fault.OpStat)
		f.Hang(fault.OpRead)
	}
	ops := map[string]func() error{
		"put":           func() error { return blob.Put(ctx, q, "k", []byte("w"), nil) },
		"put-if-absent": func() error { return blob.Put(ctx, q, "k2", []byte("w"), &blob.WriterOptions{If: blob.IfNotExist()}) },
		"delete":        func() error { return q.Delete(ctx, "k", nil) },
		"majority-read": func() error {
			_, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "k")
			return err
		},
		"majority-stat":  func() error { _, err := q.Stat(quorum.WithConsistency(ctx, quorum.ReadMajority), "k"); return err },
		"pooled-create":  func() error { _, err := blob.CreateBytes(ctx, q, "c/", []byte("w"), nil); return err },
		"resolve":        func() error { return q.Resolve(ctx, "k") },
		"put-large-body": func() error { return blob.Put(ctx, q, "big", make([]byte, 9<<20), nil) },
	}
	for name, op := range ops {
		err := op()
		switch {
		case err == nil:
			t.Errorf("%s succeeded with two replicas hanging", name)
		case !errors.Is(err, quorum.ErrNoQuorum):
			t.Errorf("%s: %v, not ErrNoQuorum", name, err)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			t.Errorf("%s: %v wraps a context error though the caller's context is live", name, err)
		case blob.GocloudErrorCode(err) == gcerrors.DeadlineExceeded || blob.GocloudErrorCode(err) == gcerrors.Canceled:
			t.Errorf("%s: gocloud code %v", name, blob.GocloudErrorCode(err))
		}
	}
}

// A write larger than what the quorum keeps in memory goes through a
// temporary file and reads back whole, by majority and fastest reads, and
// an overwrite promises over it (its bytes read and rewritten) the same way.
func TestLargeObjectRoundTrip(t *testing.T) {
	ctx := context.Background()
	reps, _ := faulted(t, 3, 13)
	q := newQuorum(t, reps, testOptions())
	big := make([]byte, 20<<20)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	for i, data := range [][]byte{big, append(big[:len(big):len(big)], "more"...)} {
		if err := blob.Put(ctx, q, "big", data, nil); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		for _, c := range []quorum.Consistency{quorum.ReadFastest, quorum.ReadMajority} {
			got, err := blob.ReadAll(quorum.WithConsistency(ctx, c), q, "big")
			if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
				t.Fatalf("write %d, %v read: %d bytes, %v", i, c, len(got), err)
			}
			rg, err := blob.ReadRange(quorum.WithConsistency(ctx, c), q, "big", 10<<20, 5)
			if err != nil || !bytes.Equal(rg, data[10<<20:10<<20+5]) {
				t.Fatalf("write %d, %v range read: %x, %v", i, c, rg, err)
			}
		}
	}
}

// A large write whose first round's accepts take longer than
// StragglerTimeout, and fail short of a quorum, retries: its rounds may
// begin within its allowance of its first accept (at most
// maxRetryWindow), where StragglerTimeout alone refused every retry once
// its accepts had taken that long.
func TestLargeWriteRetriesPastStragglerTimeout(t *testing.T) {
	ctx := context.Background()
	reps, fs := faulted(t, 3, 14)
	opts := testOptions()
	// Wide enough for the race detector on a busy machine, where a 3 MiB
	// round's promise alone took most of an 800 ms window, and with three
	// test runs sharing two cores the retry's promise took more than 2.5 s.
	opts.StragglerTimeout = 2 * time.Second
	opts.TombstoneGrace = 20 * time.Second // a retry window of at most 8 s
	q := newQuorum(t, reps, opts)
	data := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16) // 6 MiB: an allowance of 8 s
	for _, f := range fs {
		f.AddLatency(fault.OpCommit, latency.Fixed(2500*time.Millisecond))
	}
	for _, f := range fs[1:] {
		f.FailNthAfter(fault.OpCommit, 2, errors.New("injected: connection reset"))
	}
	if err := blob.Put(ctx, q, "big", data, nil); err != nil {
		t.Fatalf("a 6 MiB write whose first accepts took 2.5 s and were reported failed on two replicas: %v", err)
	}
	for _, f := range fs[1:] {
		if st := f.Stats()[fault.OpCommit]; st.Failures == 0 {
			t.Fatalf("no commit failed: %+v", st)
		}
	}
	if st := q.Stats(); st.Rounds < 2 {
		t.Fatalf("%d rounds: the write did not retry", st.Rounds)
	}
	got, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "big")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}
