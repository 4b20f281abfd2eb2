package register

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

func op(client int, in Input, call int64, out Output, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// The model accepts what a register allows and refuses a read of a value
// older than one acknowledged before the read began (a stale read), a
// resurrection after a delete, and a refused create of an absent key.
func TestModel(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"overlapping write and read", []porcupine.Operation{
			op(0, Input{Kind: Put, Key: "k", Value: "v1"}, 1, Output{}, 2),
			op(0, Input{Kind: Put, Key: "k", Value: "v2"}, 3, Output{}, 6),
			op(1, Input{Kind: Read, Key: "k"}, 4, Output{Value: "v1"}, 5),
		}, true},
		{"stale read", []porcupine.Operation{
			op(0, Input{Kind: Put, Key: "k", Value: "v1"}, 1, Output{}, 2),
			op(0, Input{Kind: Put, Key: "k", Value: "v2"}, 3, Output{}, 4),
			op(1, Input{Kind: Read, Key: "k"}, 5, Output{Value: "v1"}, 6),
		}, false},
		{"resurrection", []porcupine.Operation{
			op(0, Input{Kind: Put, Key: "k", Value: "v1"}, 1, Output{}, 2),
			op(0, Input{Kind: Delete, Key: "k"}, 3, Output{}, 4),
			op(1, Input{Kind: Read, Key: "k"}, 5, Output{Value: "v1"}, 6),
		}, false},
		{"unknown write may land late", []porcupine.Operation{
			op(0, Input{Kind: CAS, Key: "k", Value: "v1", Expect: ""}, 1, Output{Res: Unknown}, Never),
			op(1, Input{Kind: Read, Key: "k"}, 2, Output{Res: NotFound}, 3),
			op(1, Input{Kind: Read, Key: "k"}, 4, Output{Value: "v1"}, 5),
		}, true},
		{"create refused on an absent key", []porcupine.Operation{
			op(0, Input{Kind: Create, Key: "k", Value: "v1"}, 1, Output{Res: Exists}, 2),
		}, false},
		{"keys are independent", []porcupine.Operation{
			op(0, Input{Kind: Put, Key: "a", Value: "v1"}, 1, Output{}, 2),
			op(1, Input{Kind: Read, Key: "b"}, 3, Output{Res: NotFound}, 4),
			op(1, Input{Kind: CDelete, Key: "a", Expect: "v1"}, 5, Output{}, 6),
			op(1, Input{Kind: Read, Key: "a"}, 7, Output{Res: NotFound}, 8),
		}, true},
	} {
		if got := porcupine.CheckOperations(Model, c.ops); got != c.ok {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.ok)
		}
		if !c.ok && len(Describe(c.ops)) == 0 {
			t.Errorf("%s: Describe names no failing key", c.name)
		}
	}
}
