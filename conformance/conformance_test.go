package conformance_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/conformance"
)

// brokenEnv selects, in a child test process, which broken store to run the
// suite against.
const brokenEnv = "ZONALBLOB_CONFORMANCE_BROKEN"

// broken wraps a correct store and breaks one promise of the contract.
type broken struct {
	blob.Store
	kind string
}

func (b broken) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	var o blob.WriterOptions
	if opts != nil {
		o = *opts
	}
	switch b.kind {
	case "ignores-ifnotexist":
		o.If = blob.Condition{}
	case "ignores-generation":
		o.If = blob.Condition{}
	case "commits-canceled":
		ctx = context.WithoutCancel(ctx)
	case "empty-generation-unconditional":
		if gen, ok := o.If.Generation(); ok && gen == "" {
			o.If = blob.Condition{}
		}
	}
	w, err := b.Store.NewWriter(ctx, key, &o)
	if err == nil && b.kind == "misreports-generation" {
		w = misreporting{w}
	}
	return w, err
}

// misreporting is a writer that claims a generation it never wrote.
type misreporting struct{ blob.Writer }

func (misreporting) WrittenGeneration() (string, bool) { return "42", true }

func (b broken) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	switch {
	case b.kind == "ignores-generation":
		opts = nil
	case b.kind == "deletes-refused" && opts != nil:
		// What a store that read every condition it could not check as
		// none would do.
		if gen, ok := opts.If.Generation(); opts.If.NotExist() || (ok && gen == "") {
			opts = nil
		}
	}
	return b.Store.Delete(ctx, key, opts)
}

// Copy streams through the broken store, as blob.Copy would, but for
// "copy-ignores-generation", which drops an IfGenerationMatch on the
// destination.
func (b broken) Copy(ctx context.Context, dstKey, srcKey string, opts *blob.CopyOptions) error {
	if b.kind == "copy-ignores-generation" && opts != nil {
		if _, ok := opts.If.Generation(); ok {
			opts = nil
		}
	}
	return blob.CopyBetween(ctx, b, dstKey, b, srcKey, opts)
}

func (b broken) List(ctx context.Context, opts *blob.ListOptions) (*blob.ListPage, error) {
	var o blob.ListOptions
	if opts != nil {
		o = *opts
	}
	if b.kind == "ignores-startafter" {
		o.StartAfter = ""
	}
	p, err := b.Store.List(ctx, &o)
	if err == nil && b.kind == "unordered-list" {
		slices.Reverse(p.Objects)
	}
	return p, err
}

func memHarness(wrap func(blob.Store) blob.Store) conformance.Harness {
	return conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			s, err := blob.Open(ctx, "mem://")
			if err != nil {
				t.Fatal(err)
			}
			return wrap(s)
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	}
}

// TestSuiteCatchesBrokenStores runs the suite, in a child process, against
// stores that each break one promise, and checks that the suite fails exactly
// where it should. In the child it is the suite run itself.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	if kind := os.Getenv(brokenEnv); kind != "" {
		conformance.Run(t, memHarness(func(s blob.Store) blob.Store { return broken{s, kind} }))
		return
	}
	if testing.Short() {
		t.Skip("spawns test processes; skipped with -short")
	}
	cases := []struct {
		kind     string
		mustFail []string
	}{
		{"unordered-list", []string{"ListOrder", "ListPaging", "WeirdKeys"}},
		{"ignores-ifnotexist", []string{"IfNotExist", "IfNotExistRace"}},
		{"commits-canceled", []string{"CanceledWrite"}},
		{"ignores-generation", []string{"GenerationPreconditions"}},
		{"ignores-startafter", []string{"ListStartAfter"}},
		{"empty-generation-unconditional", []string{"EmptyGenerationRefused"}},
		{"misreports-generation", []string{"WrittenGeneration"}},
		{"deletes-refused", []string{"DeleteConditions"}},
		{"copy-ignores-generation", []string{"CopyConditions"}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesBrokenStores$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+c.kind)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that %s:\n%s", c.kind, out)
			}
			for _, name := range c.mustFail {
				if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenStores/"+name+" ") {
					t.Errorf("suite did not fail %s for a store that %s", name, c.kind)
				}
			}
			// A broken store must not fail everything: that would mean the
			// suite fails for reasons unrelated to the defect.
			if !strings.Contains(string(out), "--- PASS: TestSuiteCatchesBrokenStores/RoundTrip ") &&
				strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenStores/RoundTrip ") {
				t.Errorf("RoundTrip failed for a store that only %s:\n%s", c.kind, out)
			}
		})
	}
}

// TestSuitePassesCorrectStore is the control for the test above.
func TestSuitePassesCorrectStore(t *testing.T) {
	conformance.Run(t, memHarness(func(s blob.Store) blob.Store { return s }))
}
