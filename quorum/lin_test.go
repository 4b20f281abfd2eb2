package quorum_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/internal/register"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// This file checks quorum stores against a per-key register with porcupine:
// every operation is recorded with the interval in which it ran (ticks of one
// logical clock, taken before the call and after it returned) and its
// outcome, and the history of each key must have a linearization.

// history records operations on one logical clock, shared by every store of
// a test (one per simulated process).
type history struct {
	register.Recorder
	// counts
	acked, unknown, refused, reads atomic.Int64
	fastest                        atomic.Int64 // reads checked by fastestCheck
}

// classifyErr maps an error of a write or delete to what the contract says
// about its effect; drop means it certainly had none (the operation is left
// out of the history).
func classifyErr(kind register.Kind, err error) (res register.Result, drop bool) {
	switch {
	case err == nil:
		return register.OK, false
	case errors.Is(err, quorum.ErrUncertain):
		return register.Unknown, false
	case errors.Is(err, blob.ErrPrecondition) && (kind == register.CAS || kind == register.CDelete):
		return register.Precondition, false
	case errors.Is(err, blob.ErrExists) && kind == register.Create:
		return register.Exists, false
	case errors.Is(err, blob.ErrNotFound) && (kind == register.Delete || kind == register.CDelete):
		return register.NotFound, false
	case errors.Is(err, quorum.ErrNoQuorum):
		return 0, true
	}
	return register.Unknown, false
}

// write runs a write or delete and records it. It returns the error.
func (h *history) write(client int, in register.Input, fn func() error) error {
	call := h.Tick()
	err := fn()
	ret := h.Tick()
	res, drop := classifyErr(in.Kind, err)
	switch {
	case drop:
		h.refused.Add(1)
		return err
	case res == register.Unknown:
		h.unknown.Add(1)
		ret = register.Never
	case res == register.OK:
		h.acked.Add(1)
	default:
		h.refused.Add(1)
	}
	h.Add(client, in, call, register.Output{Res: res}, ret)
	return err
}

// read reads key (with its generation) and records it; failed reads are not
// recorded, as they return nothing.
func (h *history) read(ctx context.Context, client int, s blob.Store, key string) (value, gen string, err error) {
	call := h.Tick()
	value, gen, err = readGen(ctx, s, key)
	ret := h.Tick()
	switch {
	case err == nil:
		h.Add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Value: value}, ret)
	case errors.Is(err, blob.ErrNotFound):
		h.Add(client, register.Input{Kind: register.Read, Key: key}, call, register.Output{Res: register.NotFound}, ret)
	default:
		return "", "", err
	}
	h.reads.Add(1)
	return value, gen, err
}

func readGen(ctx context.Context, s blob.Store, key string) (string, string, error) {
	r, err := s.NewRangeReader(ctx, key, 0, -1)
	if err != nil {
		return "", "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return "", "", err
	}
	return string(b), r.Attributes().Generation, nil
}

// put, cas, create, del and cdel are the recorded operations.
func (h *history) put(ctx context.Context, c int, s blob.Store, key, v string) error {
	return h.write(c, register.Input{Kind: register.Put, Key: key, Value: v}, func() error {
		return blob.Put(ctx, s, key, []byte(v), nil)
	})
}

func (h *history) cas(ctx context.Context, c int, s blob.Store, key, expect, gen, v string) error {
	return h.write(c, register.Input{Kind: register.CAS, Key: key, Value: v, Expect: expect}, func() error {
		return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfGenerationMatch(gen)})
	})
}

func (h *history) create(ctx context.Context, c int, s blob.Store, key, v string) error {
	return h.write(c, register.Input{Kind: register.Create, Key: key, Value: v}, func() error {
		return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfNotExist()})
	})
}

func (h *history) del(ctx context.Context, c int, s blob.Store, key string) error {
	return h.write(c, register.Input{Kind: register.Delete, Key: key}, func() error {
		return s.Delete(ctx, key, nil)
	})
}

func (h *history) cdel(ctx context.Context, c int, s blob.Store, key, expect, gen string) error {
	return h.write(c, register.Input{Kind: register.CDelete, Key: key, Expect: expect}, func() error {
		return s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(gen)})
	})
}

// check fails t unless the history is linearizable.

// gate is a test wrapper that holds chosen commits and deletes of one process
// on one replica until the test releases them, to force an interleaving.
type gate struct {
	inner blob.Store
	mu    sync.Mutex
	holds []*hold
}

// hold is one armed gate rule.
type hold struct {
	match   func(op, key string, data []byte) bool
	left    int
	reached chan struct{}
	release chan struct{}
	once    sync.Once
	rOnce   sync.Once
	auto    time.Duration
}

// Release lets the held call (and any later match) through.
func (h *hold) Release() { h.rOnce.Do(func() { close(h.release) }) }

// holdData holds the next n commits on this gate whose bytes are data.
func (g *gate) holdData(data string, n int) *hold {
	return g.holdFunc(n, func(op, key string, b []byte) bool { return op == "commit" && string(b) == data })
}

// holdDelete holds the next n deletes of key.
func (g *gate) holdDelete(key string, n int) *hold {
	return g.holdFunc(n, func(op, k string, _ []byte) bool { return op == "delete" && k == key })
}

func (g *gate) holdFunc(n int, match func(op, key string, data []byte) bool) *hold {
	h := &hold{match: match, left: n, reached: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	g.holds = append(g.holds, h)
	g.mu.Unlock()
	return h
}

func (g *gate) wait(ctx context.Context, op, key string, data []byte) {
	g.mu.Lock()
	var h *hold
	for _, x := range g.holds {
		if x.left > 0 && x.match(op, key, data) {
			x.left--
			h = x
			break
		}
	}
	g.mu.Unlock()
	if h == nil {
		return
	}
	h.once.Do(func() { close(h.reached) })
	var auto <-chan time.Time
	if h.auto > 0 {
		t := time.NewTimer(h.auto)
		defer t.Stop()
		auto = t.C
	}
	select {
	case <-h.release:
	case <-auto:
	case <-ctx.Done():
	}
}

func (g *gate) NewRangeReader(ctx context.Context, key string, off, n int64) (blob.Reader, error) {
	return g.inner.NewRangeReader(ctx, key, off, n)
}

func (g *gate) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	w, err := g.inner.NewWriter(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return &gateWriter{g: g, ctx: ctx, key: key, w: w}, nil
}

func (g *gate) Stat(ctx context.Context, key string) (*blob.Attributes, error) {
	return g.inner.Stat(ctx, key)
}

func (g *gate) List(ctx context.Context, o *blob.ListOptions) (*blob.ListPage, error) {
	return g.inner.List(ctx, o)
}

func (g *gate) Delete(ctx context.Context, key string, o *blob.DeleteOptions) error {
	g.wait(ctx, "delete", key, nil)
	return g.inner.Delete(ctx, key, o)
}

// Close does not close the shared replica.
func (g *gate) Close() error { return nil }

type gateWriter struct {
	g   *gate
	ctx context.Context
	key string
	w   blob.Writer
	buf bytes.Buffer
}

func (w *gateWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.w.Write(p)
}

func (w *gateWriter) Close() error {
	w.g.wait(w.ctx, "commit", w.key, w.buf.Bytes())
	return w.w.Close()
}

// cluster is N shared replicas and several quorum stores over them, each
// store a process with its own view of every replica: fault(gate(replica)).
type cluster struct {
	t     testing.TB
	n     int
	mems  []blob.Store
	opts  quorum.Options
	procs []*proc
	seed  uint64
}

type proc struct {
	q      *quorum.Store
	faults []*fault.Store
	gates  []*gate
}

func newCluster(t testing.TB, n, procs int, opts quorum.Options, seed uint64) *cluster {
	t.Helper()
	c := &cluster{t: t, n: n, opts: opts, seed: seed, mems: testkit.Mems(t, n)}
	t.Cleanup(func() {
		for _, p := range c.procs {
			if p.q != nil {
				p.q.Close()
			}
		}
		for _, m := range c.mems {
			m.Close()
		}
	})
	for range procs {
		c.start()
	}
	return c
}

// start adds a process (a new Store over the shared replicas).
func (c *cluster) start() *proc {
	c.t.Helper()
	p := &proc{}
	var reps []blob.Store
	for i, m := range c.mems {
		g := &gate{inner: m}
		f := fault.Wrap(g, fault.Options{Seed: c.seed*1000 + uint64(len(c.procs))*10 + uint64(i), Name: fmt.Sprintf("p%d-zone-%c", len(c.procs), 'a'+i)})
		p.gates = append(p.gates, g)
		p.faults = append(p.faults, f)
		reps = append(reps, f)
	}
	p.q = newQuorum(c.t, reps, c.opts)
	c.procs = append(c.procs, p)
	return p
}

// stop closes a process's store (waiting for its stragglers and repairs).
func (c *cluster) stop(p *proc) {
	if p.q != nil {
		p.q.Close()
		p.q = nil
	}
}

// majority returns ctx asking for majority reads.
func majority(ctx context.Context) context.Context {
	return quorum.WithConsistency(ctx, quorum.ReadMajority)
}

// finalReads reads every key from every live process with majority reads and
// records the answers, which the checker holds to the acknowledged history.
func (c *cluster) finalReads(h *history, keys ...string) {
	c.t.Helper()
	ctx := majority(context.Background())
	for i, p := range c.procs {
		if p.q == nil {
			continue
		}
		for _, k := range keys {
			for range 2 {
				if _, _, err := h.read(ctx, 100+i, p.q, k); err != nil && !errors.Is(err, blob.ErrNotFound) {
					c.t.Errorf("final read of %q from process %d: %v", k, i, err)
				}
			}
		}
	}
}

// waitReached waits until h holds a call, or done is closed (the operation
// finished without reaching it), and says which.
func waitReached(t testing.TB, h *hold, done <-chan struct{}) bool {
	t.Helper()
	select {
	case <-h.reached:
		return true
	case <-done:
		return false
	case <-time.After(20 * time.Second):
		t.Fatal("the operation neither reached the held call nor finished")
	}
	return false
}

func goOp(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return done
}

func waitDone(t testing.TB, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("operation did not finish")
	}
}

// replicasAgree waits until every replica holds the same bytes for key (or
// none of them has it visible), as the repairer leaves them.
func replicaBytes(c *cluster, key string) []string {
	var out []string
	for _, m := range c.mems {
		b, err := blob.ReadAll(context.Background(), m, key)
		if err != nil {
			out = append(out, "<"+strings.SplitN(err.Error(), ":", 2)[0]+">")
			continue
		}
		out = append(out, string(b))
	}
	return out
}
