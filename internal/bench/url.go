package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/cost"
	"github.com/zonalblob/zonalblob/internal/parallel"
)

// LiveProfile names the rows of a run against a real bucket: no emulator,
// no latency profile, whatever the network and the service do.
const LiveProfile = "live"

// cleanupTimeout bounds the deletion of what a URL run wrote.
const cleanupTimeout = 2 * time.Minute

// URLScenario measures zonalblob's two write paths, Put and Create, on the
// store that blob.Open returns for rawURL: a user's own bucket, from their
// own zone. Every call to the store is bounded by the load's OpTimeout, even
// one that ignores its context, so an unreachable URL fails instead of
// hanging. What the run wrote, under zonalblob-bench/TIME/, is deleted at
// the end.
func URLScenario(rawURL string) Scenario {
	name := blob.Redact(rawURL)
	return Scenario{
		Name: name, Paths: 2,
		Summary: "zonalblob Put and Create on " + name,
		Run:     func(ctx context.Context, env *Env) error { return runURL(ctx, env, rawURL) },
		Costs:   urlCosts(rawURL),
	}
}

// urlCosts are the cost rows of a store URL: one bucket of the class its
// scheme opens. A quorum, a tiered store, a local or an in-memory one has
// none of its own.
func urlCosts(rawURL string) []CostRow {
	scheme, _, _ := strings.Cut(rawURL, ":")
	row, ok := map[string]CostRow{
		"gcsrapid":  {"GCS", cost.OneZonal},
		"gs":        {"GCS", cost.RegionalOnly},
		"s3express": {"S3", cost.OneZonal},
		"s3":        {"S3", cost.RegionalOnly},
		"azpremium": {"Azure", cost.OneZonal},
		"azblob":    {"Azure", cost.RegionalOnly},
	}[strings.ToLower(scheme)]
	if !ok {
		return nil
	}
	return []CostRow{row}
}

func runURL(ctx context.Context, env *Env, rawURL string) error {
	name := blob.Redact(rawURL)
	timeout := env.Load.OpTimeout
	var store blob.Store
	err := bounded(ctx, timeout, func(ctx context.Context) error {
		s, err := blob.Open(ctx, rawURL)
		store = s
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", name, err)
	}
	defer bounded(context.Background(), timeout, func(context.Context) error { return store.Close() })

	prefix := fmt.Sprintf("zonalblob-bench/%s/", time.Now().UTC().Format("20060102T150405.000Z"))
	var mu sync.Mutex
	var written []string
	wrote := func(key string) {
		mu.Lock()
		written = append(written, key)
		mu.Unlock()
	}
	defer func() { env.note(cleanup(store, name, written, timeout)) }()

	// One write first, so that a bucket that does not exist or refuses us
	// ends the run with the reason instead of a table of errors.
	probe := prefix + "probe"
	if err := bounded(ctx, timeout, func(ctx context.Context) error { return blob.Put(ctx, store, probe, []byte("zonalblob bench"), nil) }); err != nil {
		return fmt.Errorf("cannot write to %s: %w", name, err)
	}
	wrote(probe)
	env.Measure(ctx,
		Path{Name: name + " Put", Profile: LiveProfile,
			Write: func(ctx context.Context, n int, data []byte) error {
				key := fmt.Sprintf("%sput/%07d", prefix, n)
				err := bounded(ctx, timeout, func(ctx context.Context) error { return blob.Put(ctx, store, key, data, nil) })
				if err == nil {
					wrote(key)
				}
				return err
			}},
		Path{Name: name + " Create", Profile: LiveProfile,
			Write: func(ctx context.Context, _ int, data []byte) error {
				var key string
				err := bounded(ctx, timeout, func(ctx context.Context) error {
					var err error
					key, err = blob.CreateBytes(ctx, store, prefix+"create/", data, nil)
					return err
				})
				if err == nil {
					wrote(key)
				}
				return err
			}},
	)
	return nil
}

// bounded runs f with a deadline of timeout and returns when f does or when
// the deadline passes, whichever is first: a driver that ignores its context
// costs a goroutine, not the run.
func bounded(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %v: %w", timeout, ctx.Err())
	}
}

// cleanup deletes keys from store, a few at a time, and says what it could
// not delete.
func cleanup(store blob.Store, name string, keys []string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var mu sync.Mutex
	var failed int
	var first error
	parallel.Do(len(keys), 16, func(i int) {
		err := bounded(ctx, timeout, func(ctx context.Context) error { return store.Delete(ctx, keys[i], nil) })
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			mu.Lock()
			failed++
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	if failed > 0 {
		return fmt.Sprintf("%s: could not delete %d of the %d objects this run wrote under zonalblob-bench/ (first error: %v)", name, failed, len(keys), first)
	}
	return ""
}
