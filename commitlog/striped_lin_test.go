package commitlog

import (
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A linearizability model of a log whose offsets may skip (a striped log's
// fillers), for porcupine. Its state is the records appended so far, a
// persistent list from the newest, so that a step is one allocation.
//
//   - An acknowledged Append of records at first.. is legal only above
//     every offset held: the log's order is the order its Appends take
//     effect in.
//   - An Append whose outcome is unknown takes effect where that is legal
//     and is a no-op elsewhere; it never returns, so the checker may place
//     it after everything (where it did not happen) or where a read needs
//     it.
//   - An Append never skips an offset that an acknowledged Append (or a
//     served record, checked as one) holds: that Append could never take
//     effect after it. The model refuses such a step at once instead of
//     leaving the checker to find the dead end later; with offsets free to
//     skip, histories of a few thousand operations took minutes searching
//     past them.
//   - A read of (off, data) after offset after (the record a reader served
//     before it, or its start less one) is legal only if the log holds data
//     at off and nothing between after and off: a reader serves every
//     record, in order.

// logState is the newest record held; nil is the empty log.
type logState struct {
	prev *logState
	off  int64
	data string
	n    int
	hash uint64
}

func (s *logState) push(off int64, data string) *logState {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%d:%s", s.hashOf(), off, data)
	return &logState{prev: s, off: off, data: data, n: s.len() + 1, hash: h.Sum64()}
}

func (s *logState) hashOf() uint64 {
	if s == nil {
		return 0
	}
	return s.hash
}

func (s *logState) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

func (s *logState) last() int64 {
	if s == nil {
		return -1
	}
	return s.off
}

// at returns the record at off, and whether one is held strictly between
// after and off.
func (s *logState) at(after, off int64) (data string, found, between bool) {
	for n := s; n != nil && n.off > after; n = n.prev {
		switch {
		case n.off == off:
			data, found = n.data, true
		case n.off < off:
			between = true
		}
	}
	return data, found, between
}

// logOp is an operation of the history: an Append (recs at first) or a
// read (data at off, served after after).
type logOp struct {
	read      bool
	recs      []string
	first     int64
	uncertain bool
	// floor is the highest offset below first that an acknowledged
	// Append holds, or -1 (see withFloors).
	floor int64
	after int64
	off   int64
	data  string
}

var logModel = porcupine.Model{
	Init: func() any { return (*logState)(nil) },
	Step: func(state, input, _ any) (bool, any) {
		st, op := state.(*logState), input.(logOp)
		if op.read {
			data, found, between := st.at(op.after, op.off)
			return found && data == op.data && !between, st
		}
		if op.first <= st.last() || op.floor > st.last() {
			return op.uncertain, st
		}
		for j, r := range op.recs {
			st = st.push(op.first+int64(j), r)
		}
		return true, st
	},
	Hash: func(state any) uint64 { return state.(*logState).hashOf() },
	Equal: func(a, b any) bool {
		x, y := a.(*logState), b.(*logState)
		return x.hashOf() == y.hashOf() && x.len() == y.len()
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(logOp)
		if op.read {
			return fmt.Sprintf("read %q at %d after %d", op.data, op.off, op.after)
		}
		return fmt.Sprintf("append %v at %d (uncertain %v)", op.recs, op.first, op.uncertain)
	},
}

// withFloors gives each Append of ops its floor: the highest offset below
// its first that an acknowledged Append holds.
func withFloors(ops []porcupine.Operation) []porcupine.Operation {
	var held []int64
	for _, o := range ops {
		if op := o.Input.(logOp); !op.read && !op.uncertain {
			for j := range op.recs {
				held = append(held, op.first+int64(j))
			}
		}
	}
	slices.Sort(held)
	out := slices.Clone(ops)
	for i, o := range out {
		op := o.Input.(logOp)
		if op.read {
			continue
		}
		op.floor = -1
		if n, _ := slices.BinarySearch(held, op.first); n > 0 {
			op.floor = held[n-1]
		}
		out[i].Input = op
	}
	return out
}

// neverReturns is the return time of an operation whose outcome is unknown.
const neverReturns = int64(1) << 62

// checkLog checks a history against logModel and reports whether it is
// linearizable.
func checkLog(t *testing.T, ops []porcupine.Operation, timeout time.Duration) bool {
	t.Helper()
	ops = withFloors(ops)
	res, info := porcupine.CheckOperationsVerbose(logModel, ops, timeout)
	switch res {
	case porcupine.Ok:
		return true
	case porcupine.Unknown:
		t.Errorf("linearizability check timed out after %v over %d operations", timeout, len(ops))
	default:
		// The longest prefix that linearizes, and the operations it could
		// not place after it.
		var longest []int
		for _, p := range info.PartialLinearizations() {
			for _, l := range p {
				if len(l) > len(longest) {
					longest = l
				}
			}
		}
		t.Errorf("the history of %d operations is not linearizable; %d of them linearize, the last: %s", len(ops), len(longest), describeOps(ops, longest))
	}
	return false
}

func describeOps(ops []porcupine.Operation, idx []int) string {
	var out string
	for _, i := range idx[max(len(idx)-5, 0):] {
		out += "\n  " + logModel.DescribeOperation(ops[i].Input, ops[i].Output)
	}
	return out
}

// TestLogModel: the model accepts a log served in order with a filler's
// offset skipped, and refuses what the guarantee forbids: a record served
// at another offset, a record skipped by a reader, an acknowledged Append
// below a record already held, and an acknowledged record that a reader
// starting before it does not see.
func TestLogModel(t *testing.T) {
	app := func(call, ret int64, first int64, recs ...string) porcupine.Operation {
		return porcupine.Operation{Input: logOp{recs: recs, first: first}, Call: call, Return: ret}
	}
	unsure := func(call int64, first int64, recs ...string) porcupine.Operation {
		return porcupine.Operation{Input: logOp{recs: recs, first: first, uncertain: true}, Call: call, Return: neverReturns}
	}
	read := func(call, ret, after, off int64, data string) porcupine.Operation {
		return porcupine.Operation{Input: logOp{read: true, after: after, off: off, data: data}, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"in order, a filler skipped", []porcupine.Operation{
			app(1, 2, 0, "a", "b"), unsure(3, 2, "lost"), app(4, 5, 3, "c"),
			read(6, 7, -1, 0, "a"), read(8, 9, 0, 1, "b"), read(10, 11, 1, 3, "c")}, true},
		{"an uncertain record served", []porcupine.Operation{
			app(1, 2, 0, "a"), unsure(3, 1, "maybe"), read(4, 5, 0, 1, "maybe"), app(6, 7, 2, "b")}, true},
		{"an uncertain offset taken by another writer", []porcupine.Operation{
			app(1, 2, 0, "a"), unsure(3, 1, "lost"), app(4, 5, 1, "b"), read(6, 7, 0, 1, "b")}, true},
		{"served at another offset", []porcupine.Operation{
			app(1, 2, 0, "a", "b"), read(3, 4, 0, 2, "b")}, false},
		{"a record skipped", []porcupine.Operation{
			app(1, 2, 0, "a", "b", "c"), read(3, 4, -1, 0, "a"), read(5, 6, 0, 2, "c")}, false},
		{"acknowledged below a record held", []porcupine.Operation{
			app(1, 2, 5, "a"), app(3, 4, 4, "b")}, false},
		{"an acknowledged record lost", []porcupine.Operation{
			app(1, 2, 0, "a"), app(3, 4, 1, "b"), app(5, 6, 2, "c"), read(7, 8, 0, 2, "c")}, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(logModel, withFloors(c.ops)); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}
