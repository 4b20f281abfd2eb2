package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob/gcsblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/regional"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
	"github.com/zonalblob/zonalblob/commitlog"
)

// The commit-log rows append records of LogRecordBytes from the run's
// --concurrency appenders (64 by default), back to back, for the run's
// --duration (2 s by default) or LogMaxAppends appends, whichever comes
// first (--ops lowers the cap), after logWarmup unmeasured appends per
// appender.
const (
	LogRecordBytes = 100
	LogMaxAppends  = 5000
	logWarmup      = 2
)

// LogFigures are what a commit-log row adds to a Result: its latencies are
// those of Append, from the call to its acknowledgement.
type LogFigures struct {
	Appenders   int `json:"appenders"`
	RecordBytes int `json:"record_bytes"`
	// LagP50, LagP90 and LagP99 are the reader lag: from an append's
	// acknowledgement to a reader tailing the log holding the record.
	LagP50 time.Duration `json:"lag_p50_ns"`
	LagP90 time.Duration `json:"lag_p90_ns"`
	LagP99 time.Duration `json:"lag_p99_ns"`
	// Lags are the raw lag samples, sorted: one per acknowledged append the
	// reader returned before the row ended.
	Lags []time.Duration `json:"lags_ns"`
	// RecordsPerFlush is how many records shared one frame (0 for the
	// slot protocol, one object per record).
	RecordsPerFlush float64 `json:"records_per_flush"`
}

// runLog measures the commit log: the bucket-log slot protocol (one object
// per record, created with IfNotExist) on a regional bucket and on a GCS
// Rapid bucket as baselines, then commitlog's segments on one Rapid bucket,
// on a 2-of-3 quorum of Rapid buckets, healthy and with one zone slowed by
// SlowZone, on a 2-of-3 quorum of S3 Express directory buckets and, where
// Azurite runs, on a 2-of-3 quorum of Azure Premium containers.
func runLog(ctx context.Context, env *Env) error {
	// Baselines: the slot protocol.
	g, err := startGCS(ctx, env, "regional", gcsrapidtest.Bucket{Name: "bench"})
	if err != nil {
		return err
	}
	defer g.Close()
	b, err := gcsblob.OpenBucketGRPC(g.client, "bench", nil)
	if err != nil {
		return err
	}
	reg := regional.New(b, regional.Options{})
	defer reg.Close()
	if err := measureLog(ctx, env, "bucketlog-slots-regional", g.profile, []blob.Store{reg}, commitlog.Options{Slots: true}, g.Requests); err != nil {
		return err
	}

	z, err := gcsRapidZones(ctx, env, 3)
	if err != nil {
		return err
	}
	defer z.Close()
	one := []blob.Store{z.stores[0]}
	if err := measureLog(ctx, env, "bucketlog-slots-rapid", z.Profile, one, commitlog.Options{Slots: true}, z.servers[0].Requests); err != nil {
		return err
	}
	if err := measureLog(ctx, env, "commitlog-rapid", z.Profile, one, commitlog.Options{}, z.servers[0].Requests); err != nil {
		return err
	}
	for _, slow := range []bool{false, true} {
		name := "commitlog-rapid-2of3"
		if slow {
			name += "-one-slow-zone"
		}
		if err := measureLog(ctx, env, name, z.ProfileLabel(slow), z.Stores(slow), commitlog.Options{WriteQuorum: 2}, z.Requests); err != nil {
			return err
		}
	}

	if err := logS3Express(ctx, env); err != nil {
		return err
	}
	return logAzure(ctx, env)
}

// logS3Express measures commitlog on three S3 Express directory buckets, one
// emulator each (appends with WriteOffsetBytes).
func logS3Express(ctx context.Context, env *Env) error {
	express, err := s3expresstest.ProfileByName(env.ProfileName("express"))
	if err != nil {
		return err
	}
	var stores []blob.Store
	var servers []*s3expresstest.Server
	defer func() {
		for _, s := range stores {
			s.Close()
		}
		for _, srv := range servers {
			srv.Close()
		}
	}()
	for i := range 3 {
		bucket := fmt.Sprintf("log--use1-az%d--x-s3", i+1)
		srv := s3expresstest.NewServer(s3expresstest.Options{Profile: express, Seed: env.Seed + uint64(i)*7919, Buckets: []string{bucket}})
		servers = append(servers, srv)
		s, err := s3express.New(ctx, srv.NewClient(), bucket, s3express.Options{})
		if err != nil {
			return err
		}
		stores = append(stores, s)
	}
	requests := func() int64 {
		var n int64
		for _, srv := range servers {
			n += srv.Stats().Requests
		}
		return n
	}
	return measureLog(ctx, env, "commitlog-s3express-2of3", express.Name, stores, commitlog.Options{WriteQuorum: 2}, requests)
}

// logAzure measures commitlog on three Azure Premium containers of one
// Azurite, each behind its own latency proxy (appends are staged blocks
// committed under the blob's ETag). Without Azurite the row is left out and
// the report says why, as the azure scenario does.
func logAzure(ctx context.Context, env *Env) error {
	srv, err := azuritetest.NewServer()
	if err != nil {
		env.note(fmt.Sprintf("log: commitlog-azpremium-2of3 not run: Azurite unavailable (%v); `make tools` installs it into tools/node_modules", err))
		return nil
	}
	defer srv.Close()
	profile := azuritetest.None
	if !env.Zero {
		profile = azuritetest.Premium
	}
	var stores []blob.Store
	var counters []func() int64
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	for i := range 3 {
		ep, reqs, closeEP, err := azureEndpoint(srv, profile, env.Seed+uint64(i)*7919)
		if err != nil {
			return err
		}
		defer closeEP()
		counters = append(counters, reqs)
		// No warm-up connection at New: the container does not exist yet.
		opts := azpremium.Options{Account: srv.Account, Endpoint: ep, AccountKey: azpremium.Secret(srv.Key), WarmConns: -1}
		s, err := azpremium.New(ctx, fmt.Sprintf("log%d", i+1), opts)
		if err != nil {
			return err
		}
		stores = append(stores, s)
		if _, err := s.Client().Create(ctx, nil); err != nil {
			return fmt.Errorf("create container: %w", err)
		}
	}
	requests := func() int64 {
		var n int64
		for _, c := range counters {
			n += c()
		}
		return n
	}
	return measureLog(ctx, env, "commitlog-azpremium-2of3", env.ProfileName(profile.Name), stores, commitlog.Options{WriteQuorum: 2}, requests)
}

// measureLog opens a log named after the row on stores, warms it up, then
// runs the row's appenders while a reader tails the log, and records the
// row: append latencies, appends per second, reader lag and requests per
// append (the reader's polling included). A row whose appends fail is
// recorded with its errors; only a log that cannot be opened or read ends
// the scenario.
func measureLog(ctx context.Context, env *Env, name, profile string, stores []blob.Store, opts commitlog.Options, requests func() int64) error {
	label := name + " " + SizeString(LogRecordBytes)
	if env.Progress != nil {
		env.Progress(Step{Done: env.done, Total: max(env.total, env.done+1), Row: label, Expected: env.Load.Duration})
	}
	l, err := commitlog.Open(ctx, stores, name, &opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer l.Close()
	workers := env.Load.Concurrency
	record := make([]byte, LogRecordBytes)
	for i := range record {
		record[i] = byte(i)
	}
	appendOne := func() (int64, error) {
		c, cancel := context.WithTimeout(ctx, env.Load.OpTimeout)
		defer cancel()
		return l.Append(c, record)
	}

	// Warm-up: connections, the segment's streams.
	var from atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range logWarmup {
				if off, err := appendOne(); err == nil {
					for {
						cur := from.Load()
						if off+1 <= cur || from.CompareAndSwap(cur, off+1) {
							break
						}
					}
				}
			}
		})
	}
	wg.Wait()
	first := from.Load()
	r, err := l.NewReader(first)
	if err != nil {
		return fmt.Errorf("%s: reader: %w", name, err)
	}
	defer r.Close()

	n := LogMaxAppends
	if env.Load.MaxOps > 0 {
		n = min(n, env.Load.MaxOps)
	}
	// acks[i] is when offset first+i was acknowledged (unix ns), 0 if not
	// (yet). Offsets beyond n are not tracked.
	acks := make([]atomic.Int64, n)
	var lastAck atomic.Int64
	lastAck.Store(first - 1)
	var lags []time.Duration
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	var readErr atomic.Value // error
	var readTo atomic.Int64  // the offset after the last record read
	readTo.Store(first)
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for {
			rec, err := r.Next(rctx)
			if err != nil {
				if rctx.Err() == nil {
					readErr.Store(err)
				}
				return
			}
			now := time.Now().UnixNano()
			readTo.Store(rec.Offset + 1)
			i := rec.Offset - first
			if i < 0 || i >= int64(n) {
				continue
			}
			// The reader may hold a record before its Append has returned:
			// wait for the acknowledgement to measure from it.
			for acks[i].Load() == 0 && rctx.Err() == nil {
				time.Sleep(50 * time.Microsecond)
			}
			if at := acks[i].Load(); at != 0 {
				lags = append(lags, time.Duration(max(now-at, 0)))
			}
		}
	})

	before := requests()
	lat := make([][]time.Duration, workers)
	var started atomic.Int64
	var errs atomic.Int64
	var firstErr atomic.Value
	deadline := time.Now().Add(env.Load.Duration)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for started.Add(1) <= int64(n) && ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				off, err := appendOne()
				t1 := time.Now()
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[w] = append(lat[w], t1.Sub(t0))
				if i := off - first; i >= 0 && i < int64(n) {
					acks[i].Store(t1.UnixNano())
				}
				for {
					cur := lastAck.Load()
					if off <= cur || lastAck.CompareAndSwap(cur, off) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Let the reader catch up with the last acknowledged record.
	catchUp := time.Now().Add(env.Load.OpTimeout)
	for readTo.Load() <= lastAck.Load() && readErr.Load() == nil && time.Now().Before(catchUp) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	reqs := requests() - before
	stopReader()
	rwg.Wait()
	if err, ok := readErr.Load().(error); ok {
		return fmt.Errorf("%s: reading: %w", name, err)
	}

	res := Result{
		Scenario: name, Group: env.scenario, Profile: profile, Size: LogRecordBytes, Mode: ModeClosed,
		Errors: int(errs.Load()), Workers: workers, Elapsed: elapsed,
	}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	Summarize(&res, slices.Concat(lat...))
	if res.Ops+res.Errors > 0 {
		res.RequestsPerOp = float64(reqs) / float64(res.Ops+res.Errors)
	}
	slices.Sort(lags)
	lf := &LogFigures{Appenders: workers, RecordBytes: LogRecordBytes, Lags: lags,
		LagP50: Quantile(lags, 0.5), LagP90: Quantile(lags, 0.9), LagP99: Quantile(lags, 0.99)}
	if !opts.Slots {
		st := l.Stats()
		lf.RecordsPerFlush = float64(st.Records) / float64(max(st.Frames, 1))
	}
	res.Log = lf
	env.results = append(env.results, res)
	env.done++
	return nil
}
