package tiered

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// Scheme is the URL scheme of a tiered store.
const Scheme = "tiered"

func init() { blob.RegisterWithGocloud(Scheme, Open) }

// Open opens a tiered store from a URL of the form
//
//	tiered://?hot=URL&cold=URL&after=5m
//
// hot and cold are URLs of registered schemes, query-escaped. Other
// parameters: interval, concurrency, max_objects_per_second,
// max_bytes_per_second, move_timeout, manual, pack_max_objects (a
// positive bound), pack_max_bytes (a size such as 64MiB), pack_min_live_percent,
// max_clock_skew, lease (the compactor lease's duration), lease_in (hot or
// cold, the default: where the lease lives), shards (1 to 256: the
// compaction shards, each under a lease of its own; keys by HashShard),
// index_cache_bytes (a size) (see Options). All are validated before any I/O.
// Unknown parameters are an error.
func Open(ctx context.Context, u *url.URL) (blob.Store, error) {
	q := driver.NewQuery(u)
	hotURL := q.String("hot", "")
	coldURL := q.String("cold", "")
	opts := Options{
		After:               q.Duration("after", DefaultAfter),
		Interval:            q.Duration("interval", 0),
		Concurrency:         q.Int("concurrency", 0),
		MaxObjectsPerSecond: float64(q.Int("max_objects_per_second", 0)),
		MaxBytesPerSecond:   float64(q.Int("max_bytes_per_second", 0)),
		MoveTimeout:         q.Duration("move_timeout", 0),
		Manual:              q.Bool("manual", false),
		LeaseDuration:       q.Duration("lease", 0),
		PackMaxObjects:      q.Int("pack_max_objects", 0),
		PackMaxBytes:        q.Size("pack_max_bytes", 0),
		MaxClockSkew:        q.Duration("max_clock_skew", 0),
		IndexCacheBytes:     q.Size("index_cache_bytes", 0),
		Shards:              q.Int("shards", 0),
	}
	leaseIn := q.String("lease_in", "cold")
	oo := blob.OpenOptionsFrom(ctx)
	opts.MeterProvider, opts.TracerProvider, opts.Logger = oo.MeterProvider, oo.TracerProvider, oo.Logger
	if pct := q.Int("pack_min_live_percent", 0); pct < 0 || pct > 100 || (pct == 0 && q.Has("pack_min_live_percent")) {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: pack_min_live_percent %d: want 1..100", pct)
	} else if pct > 0 {
		opts.PackMinLive = float64(pct) / 100
	}
	if err := q.Err(); err != nil {
		return nil, err
	}
	if leaseIn != "cold" && leaseIn != "hot" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: lease_in=%q: want hot or cold", leaseIn)
	}
	if q.Has("shards") && (opts.Shards < 1 || opts.Shards > maxShards) {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: shards=%d: want 1..%d", opts.Shards, maxShards)
	}
	if q.Has("pack_max_objects") && opts.PackMaxObjects < 1 {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: pack_max_objects=%d: want a positive bound", opts.PackMaxObjects)
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: the URL takes no host or path, only ?hot=...&cold=...")
	}
	if hotURL == "" || coldURL == "" {
		return nil, blob.Errorf(driver.OpOpen, "", blob.ErrInvalidArgument, "tiered: both hot and cold URLs are required")
	}
	if opts.After == 0 {
		// after=0 asks for immediate moves; zero in Options means the default.
		opts.After = 1
	}
	if err := opts.validate(); err != nil {
		return nil, err // before the tiers are opened: no I/O for a bad URL
	}
	hot, cold, err := openTiers(ctx, hotURL, coldURL)
	if err != nil {
		return nil, err
	}
	if leaseIn == "hot" {
		opts.LeaseStore = hot
	}
	s, err := New(hot, cold, opts)
	if err != nil {
		return nil, errors.Join(err, hot.Close(), cold.Close())
	}
	return s, nil
}

// openTiers opens both tiers at once, so the open costs the slower of the
// two rather than their sum; the first failure ends the other's open, and
// the error names the tier.
func openTiers(ctx context.Context, hotURL, coldURL string) (hot, cold blob.Store, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type opened struct {
		s   blob.Store
		err error
	}
	open := func(tier, u string, out chan<- opened) {
		s, err := blob.Open(ctx, u)
		if err != nil {
			cancel() // the other tier's open is of no use now
			err = fmt.Errorf("tiered: opening the %s tier: %w", tier, err)
		}
		out <- opened{s, err}
	}
	hc, cc := make(chan opened, 1), make(chan opened, 1)
	go open("hot", hotURL, hc)
	go open("cold", coldURL, cc)
	h, c := <-hc, <-cc
	if h.err == nil && c.err == nil {
		return h.s, c.s, nil
	}
	// The tier that failed first is the cause; the other may have failed
	// only because its open was cancelled.
	var errs []error
	for _, o := range []opened{h, c} {
		if o.err != nil && !errors.Is(o.err, context.Canceled) {
			errs = append(errs, o.err)
		}
		if o.s != nil {
			errs = append(errs, o.s.Close())
		}
	}
	if len(errs) == 0 || errors.Join(errs...) == nil {
		errs = append(errs, h.err, c.err)
	}
	return nil, nil, errors.Join(errs...)
}
