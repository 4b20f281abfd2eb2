// Package register is the model the linearizability checks of the
// replicated stores share: each key is a register, its state the value it
// holds ("" when absent), and every operation on it is a porcupine
// operation with the interval in which it ran and its outcome. Writes carry
// unique values, so a read names the write it saw.
package register

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation did.
type Kind int

const (
	Read    Kind = iota
	Put          // unconditional write
	CAS          // write IfGenerationMatch(generation of Expect)
	Create       // write IfNotExist
	Delete       // unconditional delete
	CDelete      // delete IfGenerationMatch(generation of Expect)
)

var kindNames = [...]string{"read", "put", "cas", "create", "delete", "cdelete"}

func (k Kind) String() string { return kindNames[k] }

// Input is one operation's call.
type Input struct {
	Kind   Kind
	Key    string
	Value  string // the bytes written (unique per write)
	Expect string // the value whose generation a conditional operation carried
}

// Result is how an operation ended.
type Result int

const (
	OK Result = iota
	NotFound
	Exists
	Precondition
	Unknown // failed in a way that may have taken effect
)

var resultNames = [...]string{"ok", "notfound", "exists", "precondition", "unknown"}

func (r Result) String() string { return resultNames[r] }

// Output is one operation's outcome.
type Output struct {
	Res   Result
	Value string // what a read returned
}

// Never is the return time of an operation whose outcome is unknown: it may
// take effect at any point after its call.
const Never = int64(1) << 62

// Model checks each key's history on its own.
var Model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Input.(Input).Key
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
		st, in, out := state.(string), input.(Input), output.(Output)
		switch in.Kind {
		case Read:
			if out.Res == NotFound {
				return st == "", st
			}
			return st == out.Value, st
		case Put:
			return true, in.Value
		case CAS:
			switch out.Res {
			case OK:
				return st == in.Expect, in.Value
			case Precondition:
				return st != in.Expect, st
			case Unknown:
				if st == in.Expect {
					return true, in.Value
				}
				return true, st
			}
		case Create:
			switch out.Res {
			case OK:
				return st == "", in.Value
			case Exists:
				return st != "", st
			case Unknown:
				if st == "" {
					return true, in.Value
				}
				return true, st
			}
		case Delete:
			switch out.Res {
			case OK:
				return st != "", ""
			case NotFound:
				return st == "", st
			case Unknown:
				return true, ""
			}
		case CDelete:
			switch out.Res {
			case OK:
				return st == in.Expect, ""
			case Precondition:
				return st != in.Expect, st
			case NotFound:
				return st == "", st
			case Unknown:
				if st == in.Expect {
					return true, ""
				}
				return true, st
			}
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		s := in.Kind.String()
		if in.Kind == CAS || in.Kind == CDelete {
			s += fmt.Sprintf("(if %q)", in.Expect)
		}
		if in.Value != "" {
			s += fmt.Sprintf(" %q", in.Value)
		}
		s += " -> " + out.Res.String()
		if out.Value != "" {
			s += fmt.Sprintf(" %q", out.Value)
		}
		return s
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// Check fails t unless ops is linearizable, writing a visualization of the
// history next to the test's temporary files and logging, for each failing
// key, the operations that lead to the first one the history cannot explain.
func Check(t testing.TB, ops []porcupine.Operation, timeout time.Duration) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		t.Fatalf("linearizability check timed out after %v over %d operations", timeout, len(ops))
	}
	path := filepath.Join(t.TempDir(), "history.html")
	if f, err := os.Create(path); err == nil {
		porcupine.Visualize(Model, info, f)
		f.Close()
	}
	t.Errorf("history is not linearizable (%d operations); visualization: %s", len(ops), path)
	for _, line := range Describe(ops) {
		t.Log(line)
	}
}

// Describe lists, for each key whose history fails, the last 40 operations
// by call up to the first one the history cannot explain.
func Describe(ops []porcupine.Operation) []string {
	var bad []string
	for _, part := range Model.Partition(ops) {
		if porcupine.CheckOperations(Model, part) {
			continue
		}
		sort.Slice(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		key := part[0].Input.(Input).Key
		// The shortest failing prefix (by call order) ends at the operation
		// the history cannot explain.
		lo, hi := 1, len(part)
		for lo < hi {
			mid := (lo + hi) / 2
			if porcupine.CheckOperations(Model, part[:mid]) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		// A prefix can also fail because a read in it returns a value whose
		// write was called after it: the ten operations called next are
		// shown too.
		bad = append(bad, fmt.Sprintf("key %q: the first %d operations by call are not linearizable; the last 40 of them, then the next 10:", key, lo))
		for i, o := range part[max(0, lo-40):min(len(part), lo+10)] {
			if max(0, lo-40)+i == lo {
				bad = append(bad, "  (called after the failing prefix:)")
			}
			ret := fmt.Sprint(o.Return)
			if o.Return == Never {
				ret = "never"
			}
			bad = append(bad, fmt.Sprintf("  [%d, %s] client %d: %s", o.Call, ret, o.ClientId, Model.DescribeOperation(o.Input, o.Output)))
		}
	}
	return bad
}
