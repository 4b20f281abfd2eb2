package gcsrapidtest

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// connTable counts the RPCs in flight per client connection.
type connTable struct {
	mu     sync.Mutex
	active map[string]int
	known  map[string]bool // every connection seen, by its client address
	seen   int
	peak   int
}

// enter counts one more RPC on the connection of ctx, or refuses it past max.
func (t *connTable) enter(ctx context.Context, limit int) (func(), error) {
	key := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		key = p.Addr.String()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.active[key]
	if !t.known[key] {
		if t.known == nil {
			t.known = map[string]bool{}
		}
		t.known[key] = true
		t.seen++
	}
	if limit > 0 && n >= limit {
		return nil, status.Errorf(codes.Unavailable, "gcsrapidtest: %d streams in flight on this connection, the cap is %d", n, limit)
	}
	t.active[key] = n + 1
	t.peak = max(t.peak, n+1)
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.active[key]--; t.active[key] == 0 {
			delete(t.active, key)
		}
	}, nil
}

// transientFaults fails a seeded fraction of the calls of some methods.
type transientFaults struct {
	mu      sync.Mutex
	rng     *rand.Rand
	rate    float64
	methods []string
	n       int
}

func newTransientFaults(seed uint64, rate float64, methods []string) transientFaults {
	return transientFaults{rng: rand.New(rand.NewPCG(seed, 0x7a0b)), rate: rate, methods: methods}
}

func (f *transientFaults) next(method string) error {
	if f.rate == 0 || !slices.Contains(f.methods, method) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.rate {
		return nil
	}
	f.n++
	if f.n%2 == 0 {
		return status.Errorf(codes.ResourceExhausted, "gcsrapidtest: transient fault on %s (the service is busy)", method)
	}
	return status.Errorf(codes.Unavailable, "gcsrapidtest: transient fault on %s", method)
}

// Limits of object names in a bucket with hierarchical namespace, as the
// emulator models them: a name is a path of folders ending in an object, so
// no segment may be empty (no leading "/", no "//"), "." or "..", and a
// folder's name (one segment) is at most MaxFolderNameLen bytes.
const MaxFolderNameLen = 64

// CheckHierarchicalName reports why name is not allowed in a bucket with
// hierarchical namespace, or nil.
func CheckHierarchicalName(name string) error {
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "" && !last:
			return status.Errorf(codes.InvalidArgument, "object name %q has an empty folder name (a leading or double slash), which a bucket with hierarchical namespace does not allow", name)
		case seg == "." || seg == "..":
			return status.Errorf(codes.InvalidArgument, "object name %q has a %q segment, which a bucket with hierarchical namespace does not allow", name, seg)
		case !last && len(seg) > MaxFolderNameLen:
			return status.Errorf(codes.InvalidArgument, "object name %q has a folder name of %d bytes; a bucket with hierarchical namespace allows %d", name, len(seg), MaxFolderNameLen)
		}
	}
	return nil
}
