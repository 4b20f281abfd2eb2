package tiered_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/tiered"
)

var (
	linSeed = flag.Uint64("tiered.linseed", 0, "replay TestLinearizable with this seed (0: a new one)")
	linOps  = flag.Int("tiered.linops", 400, "operations per process of TestLinearizable")
)

// This file checks tiered stores against a per-key register with porcupine,
// in the style of package quorum's checks: every operation is recorded with
// the interval in which it ran (ticks of one logical clock, taken before the
// call and after it returned) and its outcome, and each key's history must
// have a linearization.

type regKind int

const (
	kRead   regKind = iota
	kPut            // unconditional write
	kCAS            // write IfGenerationMatch(generation of expect)
	kCreate         // write IfNotExist
	kDelete         // unconditional delete
)

var kindNames = [...]string{"read", "put", "cas", "create", "delete"}

type regInput struct {
	kind   regKind
	key    string
	value  string // the bytes written (unique per write)
	expect string // the value whose generation a CAS carried
}

type regResult int

const (
	rOK regResult = iota
	rNotFound
	rExists
	rPrecondition
	rUnknown // failed in a way that may have taken effect
)

var resultNames = [...]string{"ok", "notfound", "exists", "precondition", "unknown"}

type regOutput struct {
	res   regResult
	value string // what a read returned
}

// registerModel is one key: its state is the value it holds, "" when absent.
var registerModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Input.(regInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], o)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.kind {
		case kRead:
			if out.res == rNotFound {
				return st == "", st
			}
			return st == out.value, st
		case kPut:
			return true, in.value
		case kCAS:
			switch out.res {
			case rOK:
				return st == in.expect, in.value
			case rPrecondition:
				return st != in.expect, st
			case rUnknown:
				if st == in.expect {
					return true, in.value
				}
				return true, st
			}
		case kCreate:
			switch out.res {
			case rOK:
				return st == "", in.value
			case rExists:
				return st != "", st
			case rUnknown:
				if st == "" {
					return true, in.value
				}
				return true, st
			}
		case kDelete:
			switch out.res {
			case rOK:
				return st != "", ""
			case rNotFound:
				return st == "", st
			case rUnknown:
				return true, ""
			}
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		s := kindNames[in.kind]
		if in.kind == kCAS {
			s += fmt.Sprintf("(if %q)", in.expect)
		}
		if in.value != "" {
			s += fmt.Sprintf(" %q", in.value)
		}
		s += " -> " + resultNames[out.res]
		if out.value != "" {
			s += fmt.Sprintf(" %q", out.value)
		}
		return s
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// never is the return time of an operation whose outcome is unknown.
const never = int64(1) << 62

// history records operations on one logical clock shared by every process.
type history struct {
	clock atomic.Int64
	mu    sync.Mutex
	ops   []porcupine.Operation
	count map[string]int
	errs  []string // errors of operations whose outcome is unknown
}

func (h *history) add(client int, in regInput, call int64, out regOutput, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	if h.count == nil {
		h.count = map[string]int{}
	}
	h.count[kindNames[in.kind]+" "+resultNames[out.res]]++
}

func (h *history) write(client int, in regInput, fn func() error) {
	call := h.clock.Add(1)
	err := fn()
	ret := h.clock.Add(1)
	var res regResult
	switch {
	case err == nil:
		res = rOK
	case errors.Is(err, blob.ErrPrecondition) && in.kind == kCAS:
		res = rPrecondition
	case errors.Is(err, blob.ErrExists) && in.kind == kCreate:
		res = rExists
	case errors.Is(err, blob.ErrNotFound) && in.kind == kDelete:
		res = rNotFound
	default:
		res, ret = rUnknown, never
		h.mu.Lock()
		h.errs = append(h.errs, fmt.Sprintf("p%d %s %s: %v", client, kindNames[in.kind], in.key, err))
		h.mu.Unlock()
	}
	h.add(client, in, call, regOutput{res: res}, ret)
}

// read reads key and records it; it returns what it read and its generation.
func (h *history) read(ctx context.Context, client int, s blob.Store, key string) (value, gen string, ok bool) {
	call := h.clock.Add(1)
	r, err := s.NewRangeReader(ctx, key, 0, -1)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(r)
		gen = r.Attributes().Generation
		r.Close()
	}
	ret := h.clock.Add(1)
	switch {
	case err == nil:
		h.add(client, regInput{kind: kRead, key: key}, call, regOutput{value: string(b)}, ret)
		return string(b), gen, true
	case errors.Is(err, blob.ErrNotFound):
		h.add(client, regInput{kind: kRead, key: key}, call, regOutput{res: rNotFound}, ret)
	}
	return "", "", false
}

// readGen is read, with the generation from Stat where the reader gives
// none (mem:// readers do not): Stats before and after the read that agree
// name the generation of what was read.
func (h *history) readGen(ctx context.Context, client int, s blob.Store, key string) (value, gen string, ok bool) {
	before, err := s.Stat(ctx, key)
	if err != nil {
		return h.read(ctx, client, s, key)
	}
	value, gen, ok = h.read(ctx, client, s, key)
	if !ok || gen != "" {
		return value, gen, ok
	}
	if after, err := s.Stat(ctx, key); err != nil || after.Generation != before.Generation || after.Generation == "" {
		return "", "", false
	}
	return value, before.Generation, true
}

func (h *history) check(t *testing.T, timeout time.Duration) {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	switch porcupine.CheckOperationsTimeout(registerModel, ops, timeout) {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Fatalf("linearizability check timed out after %v over %d operations", timeout, len(ops))
	}
	t.Errorf("history is not linearizable (%d operations)", len(ops))
	for _, part := range registerModel.Partition(ops) {
		if porcupine.CheckOperations(registerModel, part) {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		// The shortest failing prefix (by call order) ends at the operation
		// the history cannot explain; show what leads to it.
		lo, hi := 1, len(part)
		for lo < hi {
			mid := (lo + hi) / 2
			if porcupine.CheckOperations(registerModel, part[:mid]) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		for _, o := range part[max(0, lo-20):min(len(part), lo+8)] {
			ret := fmt.Sprint(o.Return)
			if o.Return == never {
				ret = "?"
			}
			t.Logf("  [%d,%s] p%d %s", o.Call, ret, o.ClientId, registerModel.DescribeOperation(o.Input, o.Output))
		}
		break
	}
}

// TestLinearizable runs several processes (tiered stores over the same
// tiers, each with its own quorum client of the same three hot replicas)
// against a few keys while the first one compacts continuously, with every
// hot read slowed by a random delay so that reads overlap moves. Process 0
// also deletes and writes conditionally: the design makes those linearizable
// against its own compactor (the key's lock), while a delete in another
// process may be read from a move's copy until the move ends (package doc),
// so the other processes put and read only. Each key's history must be
// linearizable. The run is on synctest's clock, so delays cost no time.
func TestLinearizable(t *testing.T) {
	seed := *linSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./tiered -run TestLinearizable -tiered.linseed=%d)", seed, seed)
	for _, hotKind := range []string{"mem", "quorum"} {
		for _, packs := range []int{-1, 3} {
			name := hotKind + "/objects"
			if packs > 0 {
				name = hotKind + "/packs"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { runLinearizable(t, seed, hotKind, packs) })
			})
		}
	}
}

func runLinearizable(t *testing.T, seed uint64, hotKind string, packObjects int) {
	const processes = 3
	slowRead := latency.Dist{P50: time.Millisecond, P99: 6 * time.Millisecond}
	var replicas []*fault.Store
	nReplicas := 1
	if hotKind == "quorum" {
		nReplicas = 3
	}
	for i := range nReplicas {
		m, _ := memPair(t)
		f := fault.Wrap(m, fault.Options{Seed: seed + uint64(i), Name: fmt.Sprintf("hot%d", i)})
		f.AddLatency(fault.OpRead, slowRead)
		f.AddLatency(fault.OpStat, slowRead)
		replicas = append(replicas, f)
	}
	_, coldMem := memPair(t)
	cold := fault.Wrap(coldMem, fault.Options{Seed: seed + 10, Name: "cold"})
	cold.AddLatency(fault.OpRead, latency.Dist{P50: 2 * time.Millisecond, P99: 8 * time.Millisecond})
	cold.AddLatency(fault.OpCommit, latency.Dist{P50: 2 * time.Millisecond, P99: 8 * time.Millisecond})
	hotFor := func() blob.Store {
		if hotKind == "mem" {
			return nopClose{replicas[0]}
		}
		var rs []blob.Store
		for _, r := range replicas {
			rs = append(rs, nopClose{r})
		}
		return newQuorum(t, rs)
	}
	var stores []*tiered.Store
	for range processes {
		stores = append(stores, manualWith(t, hotFor(), cold, tiered.Options{PackMaxObjects: packObjects, MoveTimeout: 50 * time.Millisecond, MaxClockSkew: time.Millisecond}))
	}
	h := &history{}
	keys := []string{"a", "b", "c"}
	ctx := ctxT(t)
	var moved atomic.Int64
	stop := make(chan struct{})
	var compactor sync.WaitGroup
	compactor.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			moved.Add(int64(stores[0].CompactOnce(ctx).Moved))
			time.Sleep(500 * time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	for p := range processes {
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		s := stores[p]
		wg.Go(func() {
			for i := range *linOps {
				key := keys[rng.IntN(len(keys))]
				v := fmt.Sprintf("p%d-%d", p, i)
				r := rng.IntN(100)
				switch {
				case r < 45:
					h.read(ctx, p, s, key)
				case r < 75 || p != 0:
					h.write(p, regInput{kind: kPut, key: key, value: v}, func() error {
						return blob.Put(ctx, s, key, []byte(v), nil)
					})
				case r < 85:
					h.write(p, regInput{kind: kDelete, key: key}, func() error { return s.Delete(ctx, key, nil) })
				case r < 92:
					h.write(p, regInput{kind: kCreate, key: key, value: v}, func() error {
						return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfNotExist()})
					})
				default:
					if old, gen, ok := h.readGen(ctx, p, s, key); ok {
						h.write(p, regInput{kind: kCAS, key: key, value: v, expect: old}, func() error {
							return blob.Put(ctx, s, key, []byte(v), &blob.WriterOptions{If: blob.IfGenerationMatch(gen)})
						})
					}
				}
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	close(stop)
	compactor.Wait()
	var delayed int64
	for _, r := range replicas {
		delayed += r.Stats()[fault.OpRead].Delays
	}
	t.Logf("%d operations %v; %d objects moved, %d packs; %d hot reads slowed", len(h.ops), h.count, moved.Load(), stores[0].Stats().Packs, delayed)
	for _, e := range h.errs {
		t.Logf("outcome unknown: %s", e)
	}
	if moved.Load() == 0 || delayed == 0 {
		t.Fatalf("moved %d, slowed %d: the run did not overlap reads with moves", moved.Load(), delayed)
	}
	h.check(t, time.Minute)
}
