package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/latency"
)

// Op names one kind of call that rules can target.
type Op int

const (
	OpRead      Op = iota // Store.NewRangeReader
	OpReadData            // each Read of a Reader, each ReadAt of a ReaderAt: mid-stream failures
	OpWrite               // Store.NewWriter
	OpWriteData           // each Write of a Writer
	OpCommit              // Writer.Close, the point where a write becomes visible
	OpStat                // Store.Stat
	OpList                // Store.List (rules match the listing prefix)
	OpDelete              // Store.Delete
	OpPrewarm             // Prewarm
	OpCreate              // Create (rules match the prefix)
	OpAppend              // NewAppender
	OpCopy                // Copy (rules match the destination key)
	OpReaderAt            // OpenReaderAt
	OpFinalize            // Finalize
	numOps
)

var opNames = [numOps]string{
	"read", "read-data", "write", "write-data", "commit", "stat", "list",
	"delete", "prewarm", "create", "append", "copy", "reader-at", "finalize",
}

func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

var (
	// ErrInjected is wrapped by every error this package produces.
	ErrInjected = errors.New("fault: injected failure")
	// ErrDown is wrapped (with ErrInjected) by every call made while the store
	// is down (SetDown).
	ErrDown = errors.New("fault: store is down")
)

// Effect is what a rule does to a call it fires on.
type Effect int

const (
	// FailBefore fails the call without reaching the inner store. At OpCommit
	// the inner writer is aborted, so nothing is committed.
	FailBefore Effect = iota
	// FailAfter lets the call reach the inner store and, if it succeeded there,
	// reports a failure anyway: a commit or delete that happened though the
	// caller was told it did not. A call the inner store failed returns the
	// inner error. Handles it opened (readers, writers) are closed, a writer
	// by aborting it.
	FailAfter
	// Delay sleeps for a sample of Rule.Latency before the call proceeds. If the
	// call's context ends first, the call fails with the context's error.
	Delay
	// Hang blocks the call until its context is done, then fails it with the
	// context's error, as a blackholed replica would.
	Hang
)

// Rule describes one fault. The zero Rule fails every call of OpRead.
type Rule struct {
	Op Op
	// KeyPrefix limits the rule to calls whose key (prefix for List and Create,
	// destination for Copy) starts with it.
	KeyPrefix string
	// Skip lets this many matching calls through before the rule may fire.
	Skip int
	// Count is how many times the rule fires before it is spent; 0 is no limit.
	Count int
	// Probability, when nonzero, is the chance that a matching call past Skip
	// fires: a value below 0 never fires, 1 or more always does. Zero means
	// always, so that a Rule literal fires unless told otherwise.
	Probability float64
	Effect      Effect
	// Err is wrapped, with ErrInjected, in the failure. nil means ErrInjected alone.
	Err error
	// Latency is the delay of a Delay rule.
	Latency latency.Dist
}

// RuleID identifies an added rule, for Remove.
type RuleID uint64

// Options configure Wrap.
type Options struct {
	// Seed seeds the one generator behind every random choice.
	Seed uint64
	// Name, if set, appears in injected errors, to tell replicas apart.
	Name string
}

// OpStats counts what happened to the calls of one Op. Delays and Delayed
// let a test check that a delay was injected without timing the call.
type OpStats struct {
	Calls    int64 // calls made, including failed ones
	Failures int64 // failures injected (down, failure rules, hangs, delays cut short)
	Delays   int64 // calls delayed by Delay rules
	// Delayed is the total of the delays drawn for those calls, a delay cut
	// short by the call's context included in full.
	Delayed time.Duration
}

// Store is a blob.Store that injects faults into the calls it passes to the
// store it wraps. It is safe for concurrent use, and rules may be changed
// while calls are in flight (a call sees the rules present when it starts).
type Store struct {
	inner blob.Store
	name  string
	plain plainStore

	mu     sync.Mutex
	rng    *latency.Sampler
	lastID RuleID
	rules  []*rule // in the order added, which is the order they are evaluated
	down   bool
	stats  [numOps]OpStats
}

var (
	_ blob.Store              = (*Store)(nil)
	_ blob.Prewarmer          = (*Store)(nil)
	_ blob.Creator            = (*Store)(nil)
	_ blob.Appender           = (*Store)(nil)
	_ blob.Copier             = (*Store)(nil)
	_ blob.ReaderAtOpener     = (*Store)(nil)
	_ blob.Finalizer          = (*Store)(nil)
	_ blob.CapabilityReporter = (*Store)(nil)
)

type rule struct {
	Rule
	id    RuleID
	seen  int // matching calls seen
	fired int
}

// Wrap returns s with fault injection and no rules: until a rule is added or
// the store is set down, every call passes through unchanged.
func Wrap(s blob.Store, opts Options) *Store {
	f := &Store{inner: s, name: opts.Name, rng: latency.NewSampler(opts.Seed)}
	f.plain = plainStore{f}
	return f
}

// Unwrap returns the wrapped store, for code that must know which optional
// interfaces the backend really implements.
func (s *Store) Unwrap() blob.Store { return s.inner }

// Add adds r and returns its id. The rule sees only calls that start after Add.
func (s *Store) Add(r Rule) RuleID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastID++
	s.rules = append(s.rules, &rule{Rule: r, id: s.lastID})
	return s.lastID
}

// FailNth fails the nth matching call of op (n = 1 is the next one) before it
// reaches the inner store. err, if not nil, is wrapped in the failure.
func (s *Store) FailNth(op Op, n int, err error) RuleID {
	return s.Add(Rule{Op: op, Skip: max(n-1, 0), Count: 1, Err: err})
}

// FailNthAfter lets the nth matching call of op reach the inner store and then
// reports a failure if it succeeded (see FailAfter): at OpCommit the object is
// committed, at OpDelete it is deleted, yet the caller gets an error.
func (s *Store) FailNthAfter(op Op, n int, err error) RuleID {
	return s.Add(Rule{Op: op, Skip: max(n-1, 0), Count: 1, Effect: FailAfter, Err: err})
}

// FailFrom fails k matching calls of op starting with the nth, or every call
// from the nth on when k <= 0.
func (s *Store) FailFrom(op Op, n, k int, err error) RuleID {
	return s.Add(Rule{Op: op, Skip: max(n-1, 0), Count: max(k, 0), Err: err})
}

// FailRandom fails each call of op with probability p.
func (s *Store) FailRandom(op Op, p float64, err error) RuleID {
	if p <= 0 {
		p = -1 // zero would mean "always" in a Rule
	}
	return s.Add(Rule{Op: op, Probability: p, Err: err})
}

// AddLatency delays every call of op by a sample of d.
func (s *Store) AddLatency(op Op, d latency.Dist) RuleID {
	return s.Add(Rule{Op: op, Effect: Delay, Latency: d})
}

// AddLatencyToAll delays every read, commit, Stat, delete and listing by a
// sample of d: a store that stands for a remote one in a benchmark.
func (s *Store) AddLatencyToAll(d latency.Dist) {
	for _, op := range []Op{OpRead, OpCommit, OpStat, OpDelete, OpList} {
		s.AddLatency(op, d)
	}
}

// Hang makes every call of op block until its context is done.
func (s *Store) Hang(op Op) RuleID {
	return s.Add(Rule{Op: op, Effect: Hang})
}

// Remove removes a rule, reporting whether it was present.
func (s *Store) Remove(id RuleID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.rules {
		if r.id == id {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
			return true
		}
	}
	return false
}

// Reset removes every rule and brings the store up. Stats are kept.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
	s.down = false
}

// SetDown takes the store down (every call, including Reads, Writes and
// commits of readers and writers already open, fails at once with an error
// wrapping ErrDown, and writers are aborted) or brings it back up. Calls made
// while down are not seen by rules.
func (s *Store) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Stats returns the counters of every Op that has been called.
func (s *Store) Stats() map[Op]OpStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[Op]OpStats)
	for op, st := range s.stats {
		if st != (OpStats{}) {
			m[Op(op)] = st
		}
	}
	return m
}

// decision is what the rules decided for one call.
type decision struct {
	down  bool
	delay time.Duration
	hang  bool
	fail  bool // some failure rule fired
	after bool // ... and the first one to fire was FailAfter
	err   error
}

// decide counts a call and evaluates every rule against it. Every matching rule
// sees every call, whatever earlier rules decided, so that a rule's firing
// depends only on its own call count and the seeded draws.
func (s *Store) decide(op Op, key string) decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.stats[op]
	st.Calls++
	if s.down {
		return decision{down: true}
	}
	var d decision
	for _, r := range s.rules {
		if r.Op != op || !strings.HasPrefix(key, r.KeyPrefix) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || (r.Count > 0 && r.fired >= r.Count) {
			continue
		}
		if p := r.Probability; p < 0 || (p > 0 && p < 1 && s.rng.Float64() >= p) {
			continue
		}
		r.fired++
		switch r.Effect {
		case Delay:
			d.delay += s.rng.Sample(r.Latency)
		case Hang:
			d.hang = true
		default:
			if !d.fail {
				d.fail, d.after, d.err = true, r.Effect == FailAfter, r.Err
			}
		}
	}
	if d.delay > 0 {
		st.Delays++
		st.Delayed += d.delay
	}
	return d
}

func (s *Store) failed(op Op) {
	s.mu.Lock()
	s.stats[op].Failures++
	s.mu.Unlock()
}

// injected builds the error for a failure of op on key caused by cause, and
// counts it.
func (s *Store) injected(op Op, key string, cause error) error {
	s.failed(op)
	err := ErrInjected
	if cause != nil && cause != ErrInjected {
		err = fmt.Errorf("%w: %w", ErrInjected, cause)
	}
	if s.name != "" {
		err = fmt.Errorf("%s: %w", s.name, err)
	}
	return &blob.Error{Op: op.String(), Key: key, Err: err}
}

// enter applies the rules to one call. A non-nil err means the call fails
// without reaching the inner store. A non-nil after is the failure to report
// if the inner call succeeds (report it with reportAfter).
func (s *Store) enter(ctx context.Context, op Op, key string) (after *pending, err error) {
	d := s.decide(op, key)
	if d.down {
		return nil, s.injected(op, key, ErrDown)
	}
	if d.delay > 0 {
		if err := latency.Sleep(ctx, d.delay); err != nil {
			return nil, s.injected(op, key, err)
		}
	}
	if d.hang {
		<-ctx.Done()
		return nil, s.injected(op, key, ctx.Err())
	}
	switch {
	case !d.fail:
		return nil, nil
	case d.after:
		return &pending{s: s, op: op, key: key, cause: d.err}, nil
	}
	return nil, s.injected(op, key, d.err)
}

// pending is a FailAfter failure waiting for the inner call to succeed. It is
// only counted once reported, because a call the inner store failed is not an
// injected failure.
type pending struct {
	s     *Store
	op    Op
	key   string
	cause error
}

func (p *pending) report() error { return p.s.injected(p.op, p.key, p.cause) }
