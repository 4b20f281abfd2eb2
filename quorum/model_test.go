package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/quorum"
)

// The model records every operation with its interval on one logical clock
// (start and end are ticks taken before the call and after it returned) and
// its outcome; a read is then checked against every answer a correct store
// could give at that moment.

type outcome int

const (
	acked     outcome = iota
	refused           // failed and, by the contract, had no effect
	ambiguous         // failed in a way that may have taken effect
	running
)

type op struct {
	write      bool   // a write (value != "") or a delete (value == "")
	value      string // the exact bytes written; every write's are unique
	start, end int64
	out        outcome
}

type model struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   map[string][]*op

	reads, writes, violations, unavailable atomic.Int64
	errs                                   []string
}

func newModel() *model { return &model{ops: map[string][]*op{}} }

func (m *model) begin(key string, write bool, value string) *op {
	o := &op{write: write, value: value, out: running}
	m.mu.Lock()
	o.start = m.clock.Add(1)
	m.ops[key] = append(m.ops[key], o)
	m.mu.Unlock()
	return o
}

// classify maps a write or delete error to what the contract says it means.
func classify(err error) outcome {
	switch {
	case err == nil:
		return acked
	case errors.Is(err, quorum.ErrUncertain):
		return ambiguous
	case errors.Is(err, blob.ErrExists), errors.Is(err, blob.ErrPrecondition):
		return refused
	case errors.Is(err, quorum.ErrNoQuorum):
		return refused
	}
	return ambiguous
}

func (m *model) end(o *op, err error) {
	m.mu.Lock()
	o.end = m.clock.Add(1)
	o.out = classify(err)
	if !o.write && errors.Is(err, quorum.ErrNoQuorum) {
		o.out = ambiguous // a failed delete may have taken effect
	}
	if !o.write && errors.Is(err, blob.ErrNotFound) {
		o.out = acked
	}
	m.mu.Unlock()
}

func (m *model) violation(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violationLocked(format, args...)
}

func (m *model) violationLocked(format string, args ...any) {
	m.violations.Add(1)
	if len(m.errs) < 20 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

// check judges a read of key over [start, end] that returned value (found) or
// NotFound. Allowed: the state left by the last operation acknowledged before
// the read started, by any acknowledged operation concurrent with that one,
// by any operation concurrent with the read, and by any earlier operation
// whose outcome was ambiguous. Never allowed: a refused write's bytes outside
// its own interval, bytes no write wrote.
func (m *model) check(key string, start, end int64, found bool, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last *op
	for _, o := range m.ops[key] {
		if o.out == acked && o.end < start && (last == nil || o.end > last.end) {
			last = o
		}
	}
	allowed := func(o *op) bool {
		overlapsRead := o.start < end && (o.out == running || o.end > start)
		switch {
		case o == last, overlapsRead, o.out == ambiguous && o.start < end:
			return true
		case last != nil && o.out == acked && o.start < last.end && o.end > last.start:
			return true
		}
		return false
	}
	if !found {
		if last == nil {
			return
		}
		for _, o := range m.ops[key] {
			if !o.write && allowed(o) {
				return
			}
		}
		var hist []string
		for _, o := range m.ops[key] {
			hist = append(hist, fmt.Sprintf("{write:%v %d-%d out:%d}", o.write, o.start, o.end, o.out))
		}
		m.violationLocked("%s: NotFound at [%d,%d], but acknowledged write at [%d,%d] stands; history %v", key, start, end, last.start, last.end, hist)
		return
	}
	for _, o := range m.ops[key] {
		if o.write && o.value == value {
			if !allowed(o) {
				m.violationLocked("%s: read at [%d,%d] returned the bytes of write [%d,%d] (outcome %d), last acknowledged is %+v", key, start, end, o.start, o.end, o.out, last)
			}
			return
		}
	}
	m.violationLocked("%s: read returned %d bytes no write wrote", key, len(value))
}

// read reads key through s and checks the answer.
func (m *model) read(ctx context.Context, s blob.Store, key string) {
	m.reads.Add(1)
	start := m.clock.Add(1)
	b, err := blob.ReadAll(ctx, s, key)
	end := m.clock.Add(1)
	switch {
	case err == nil:
		m.check(key, start, end, true, string(b))
	case errors.Is(err, blob.ErrNotFound):
		m.check(key, start, end, false, "")
	default:
		m.unavailable.Add(1)
	}
}

func (m *model) put(ctx context.Context, s blob.Store, key, value string, opts *blob.WriterOptions) error {
	m.writes.Add(1)
	o := m.begin(key, true, value)
	err := blob.Put(ctx, s, key, []byte(value), opts)
	m.end(o, err)
	return err
}

func (m *model) del(ctx context.Context, s blob.Store, key string, opts *blob.DeleteOptions) error {
	m.writes.Add(1)
	o := m.begin(key, false, "")
	err := s.Delete(ctx, key, opts)
	m.end(o, err)
	return err
}

// ackedFinal returns, for keys with a single acknowledged write and no other
// operation, the bytes every replica must end up holding.
func (m *model) ackedFinal() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for k, ops := range m.ops {
		if len(ops) == 1 && ops[0].write && ops[0].out == acked {
			out[k] = ops[0].value
		}
	}
	return out
}

// refusedOnly returns keys whose only operations were refused writes: no
// replica may hold them once repair has run.
func (m *model) refusedOnly() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, ops := range m.ops {
		all := true
		for _, o := range ops {
			all = all && o.write && o.out == refused
		}
		if all {
			out = append(out, k)
		}
	}
	return out
}

// client runs n random operations: write-once log segments (IfNotExist, most
// of the traffic, as a commit log does), and overwrites, conditional updates,
// deletes and creation races on a few shared keys; half the reads are majority
// reads.
func (m *model) client(ctx context.Context, s blob.Store, id int, seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, uint64(id)))
	var mine []string
	for i := range n {
		value := fmt.Sprintf("client %d op %d seed %d %s", id, i, seed, make([]byte, r.IntN(64)))
		shared := fmt.Sprintf("shared/%d", r.IntN(6))
		rctx := ctx
		if r.IntN(2) == 0 {
			rctx = quorum.WithConsistency(ctx, quorum.ReadMajority)
		}
		switch p := r.IntN(100); {
		case p < 30:
			key := fmt.Sprintf("log/%d/%06d", id, i)
			if m.put(ctx, s, key, value, &blob.WriterOptions{If: blob.IfNotExist()}) == nil {
				mine = append(mine, key)
			}
		case p < 55 && len(mine) > 0:
			m.read(rctx, s, mine[r.IntN(len(mine))])
		case p < 65:
			m.put(ctx, s, shared, value, nil)
		case p < 72:
			if a, err := s.Stat(ctx, shared); err == nil {
				m.put(ctx, s, shared, value, &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)})
			}
		case p < 76:
			m.put(ctx, s, shared, value, &blob.WriterOptions{If: blob.IfNotExist()})
		case p < 80:
			m.del(ctx, s, shared, nil)
		default:
			m.read(rctx, s, shared)
		}
	}
}

func (m *model) report(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.errs {
		t.Error(e)
	}
}

// settle heals every replica, lets repair finish and then checks what must
// hold on every replica: each acknowledged write-once object is there with
// its bytes (no acknowledged write lost), and no refused write is anywhere.
func settle(t *testing.T, m *model, q *quorum.Store, fs []*fault.Store) {
	t.Helper()
	for _, f := range fs {
		f.Reset()
		f.SetDown(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := q.AntiEntropy(ctx); err == nil {
			st := q.Stats()
			if st.RepairPending == 0 && st.TrackedKeys == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("repair did not settle: %+v", q.Stats())
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	final := m.ackedFinal()
	for i, f := range fs {
		inner := f.Unwrap()
		for k, v := range final {
			b, err := blob.ReadAll(ctx, inner, k)
			if err != nil || string(b) != v {
				m.violation("replica %d: acknowledged %s: %q, %v", i, k, shorten(b), err)
			}
		}
		for _, k := range m.refusedOnly() {
			if ok, _ := blob.Exists(ctx, inner, k); ok {
				m.violation("replica %d still holds refused write %s", i, k)
			}
		}
	}
	for k, v := range final {
		b, err := blob.ReadAll(ctx, q, k)
		if err != nil || string(b) != v {
			m.violation("quorum read of acknowledged %s after repair: %q, %v", k, shorten(b), err)
		}
	}
}

func shorten(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
