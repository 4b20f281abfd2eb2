package quorum_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// testOptions keep background work fast enough for tests to observe.
func testOptions() quorum.Options {
	return quorum.Options{
		ProbeInterval:       20 * time.Millisecond,
		AntiEntropyInterval: -1,
		RepairGrace:         time.Millisecond,
		RepairRetry:         10 * time.Millisecond,
		// Every operation ends after this long without progress: the
		// bound is for a replica that never answers, which the tests that
		// need one hold until they release it, not for a slow machine.
		StragglerTimeout: 15 * time.Second,
		CloseTimeout:     5 * time.Second,
	}
}

// faulted wraps n mem:// stores with fault injection, one seed per replica.
func faulted(t testing.TB, n int, seed uint64) ([]blob.Store, []*fault.Store) {
	t.Helper()
	var rs []blob.Store
	var fs []*fault.Store
	for i, m := range testkit.Mems(t, n) {
		f := fault.Wrap(m, fault.Options{Seed: seed + uint64(i), Name: fmt.Sprintf("zone-%c", 'a'+i)})
		rs = append(rs, f)
		fs = append(fs, f)
	}
	return rs, fs
}

func newQuorum(t testing.TB, reps []blob.Store, opts quorum.Options) *quorum.Store {
	t.Helper()
	q, err := quorum.New(reps, opts)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestConformanceMem(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newQuorum(t, testkit.Mems(t, 3), testOptions())
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestConformanceThroughFault(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			reps, _ := faulted(t, 3, 1)
			return newQuorum(t, reps, testOptions())
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestConformanceMajorityReads(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			o := testOptions()
			o.Consistency = quorum.ReadMajority
			return newQuorum(t, testkit.Mems(t, 3), o)
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
}

func TestGocloudDrivertest(t *testing.T) {
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return newQuorum(t, testkit.Mems(t, 3), testOptions())
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}
