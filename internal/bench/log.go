package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gocloud.dev/blob/gcsblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
	"github.com/zonalblob/zonalblob/blob/azpremium/azuritetest"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/latency"
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
	LogMaxAppends  = 20000
	logWarmup      = 2
)

// LogSizes are the record sizes of the rows on a 2-of-3 Rapid quorum, each
// beside the raw append round trip of the same size on one zone.
var LogSizes = []int{100, 4 << 10, 64 << 10}

// LogOpenRate is the offered load of the open-loop row: 4 KiB records at
// 32 MiB/s, started on schedule whatever the log does.
const (
	LogOpenBytes     = 4 << 10
	LogOpenBytesPerS = 32 << 20
)

// rawAppends is how many appends measure the raw round trip of a size (or
// fewer if the row's duration ends first).
const rawAppends = 500

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
	// RawP50 and RawP99, where measured, are one zone's append round trip
	// of a record of the same size in the same run: AppendStream.Append,
	// one at a time, on the stream of one object.
	RawP50 time.Duration `json:"raw_p50_ns,omitempty"`
	RawP99 time.Duration `json:"raw_p99_ns,omitempty"`
	// FloorP50 and FloorP99, where computed (closed-loop rows beside a
	// raw round trip), are the row's floor: what its appends would take
	// on the emulator's model of a stream if the log cost nothing of its
	// own (see floorModel).
	FloorP50 time.Duration `json:"floor_p50_ns,omitempty"`
	FloorP99 time.Duration `json:"floor_p99_ns,omitempty"`
}

// logRow is one commit-log row to measure.
type logRow struct {
	name, profile string
	stores        []blob.Store
	opts          commitlog.Options
	requests      func() int64
	size          int // record bytes (LogRecordBytes if 0)
	// raw is the single-zone round trip the row is compared with, if any.
	raw *rawTrip
	// flush and perMiB are the profile's, for the row's floor (with raw);
	// slow, if set, is added to one zone's flushes.
	flush, perMiB, slow latency.Dist
	// rate, if set, makes the row open loop: appends start at this many a
	// second on schedule, each timed from when it was due.
	rate float64
	// stripes, if set, makes the log a striped log of that many stripes
	// (commitlog.OpenStriped).
	stripes int
}

// LogStripes is the number of stripes of the striped rows: each zone then
// writes that many segment objects, each over a stream of its own.
const LogStripes = 4

// logWriter and logReader are what measureLog needs of a log, striped or
// not.
type logWriter interface {
	Append(ctx context.Context, records ...[]byte) (int64, error)
	Close() error
}

type logReader interface {
	Next(ctx context.Context) (commitlog.Record, error)
	Close() error
}

// openLog opens the row's log and returns it with a way to open a reader
// and its records per frame so far.
func openLog(ctx context.Context, row logRow, name string, opts *commitlog.Options) (logWriter, func(int64) (logReader, error), func() float64, error) {
	perFrame := func(sts ...commitlog.Stats) float64 {
		var recs, frames int64
		for _, st := range sts {
			recs, frames = recs+st.Records, frames+st.Frames
		}
		return float64(recs) / float64(max(frames, 1))
	}
	if row.stripes > 0 {
		s, err := commitlog.OpenStriped(ctx, row.stores, name, row.stripes, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		return s, func(from int64) (logReader, error) { return s.NewReader(from) },
			func() float64 { return perFrame(s.Stats().Stripes...) }, nil
	}
	l, err := commitlog.Open(ctx, row.stores, name, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return l, func(from int64) (logReader, error) { return l.NewReader(from) },
		func() float64 { return perFrame(l.Stats()) }, nil
}

// rawTrip is a single-zone append round trip.
type rawTrip struct{ p50, p99 time.Duration }

// measureRaw times one zone's AppendStream.Append of size bytes, one at a
// time, on one object.
func measureRaw(ctx context.Context, env *Env, s blob.Store, size int) (*rawTrip, error) {
	as, ok := s.(blob.AppendStreamer)
	if !ok {
		return nil, fmt.Errorf("raw appends: %T has no append streams", s)
	}
	st, err := as.CreateAppendStream(ctx, fmt.Sprintf("raw/%d-%d", size, time.Now().UnixNano()), []byte("raw"))
	if err != nil {
		return nil, fmt.Errorf("raw appends: %w", err)
	}
	defer st.Close()
	p := make([]byte, size)
	var lat []time.Duration
	deadline := time.Now().Add(env.Load.Duration)
	for i := 0; i < rawAppends+logWarmup && time.Now().Before(deadline); i++ {
		c, cancel := context.WithTimeout(ctx, env.Load.OpTimeout)
		t0 := time.Now()
		err := st.Append(c, p)
		d := time.Since(t0)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("raw appends of %d bytes: %w", size, err)
		}
		if i >= logWarmup {
			lat = append(lat, d)
		}
	}
	slices.Sort(lat)
	return &rawTrip{Quantile(lat, 0.5), Quantile(lat, 0.99)}, nil
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
	if err := measureLog(ctx, env, logRow{name: "bucketlog-slots-regional", profile: g.profile, stores: []blob.Store{reg}, opts: commitlog.Options{Slots: true}, requests: g.Requests}); err != nil {
		return err
	}

	z, err := gcsRapidZones(ctx, env, 3)
	if err != nil {
		return err
	}
	defer z.Close()
	one := []blob.Store{z.stores[0]}
	if err := measureLog(ctx, env, logRow{name: "bucketlog-slots-rapid", profile: z.Profile, stores: one, opts: commitlog.Options{Slots: true}, requests: z.servers[0].Requests}); err != nil {
		return err
	}
	if err := measureLog(ctx, env, logRow{name: "commitlog-rapid", profile: z.Profile, stores: one, requests: z.servers[0].Requests}); err != nil {
		return err
	}
	// A 2-of-3 quorum at each size, each beside one zone's raw round trip
	// of the same size; one zone slowed; one append at a time per zone
	// (MaxInFlight 1, no pipelining) at 4 KiB; and an open-loop row.
	profile, err := gcsrapidtest.ProfileByName(env.ProfileName("rapid"))
	if err != nil {
		return err
	}
	for _, size := range LogSizes {
		raw, err := measureRaw(ctx, env, z.stores[1], size)
		if err != nil {
			return err
		}
		rows := []logRow{{name: "commitlog-rapid-2of3"}, {name: "commitlog-rapid-2of3-one-slow-zone"}}
		if size == LogOpenBytes {
			rows = append(rows, logRow{name: "commitlog-rapid-2of3-unpipelined", opts: commitlog.Options{MaxInFlight: 1}},
				logRow{name: "commitlog-rapid-2of3-open", rate: LogOpenBytesPerS / LogOpenBytes})
		}
		if size >= LogOpenBytes {
			// Striped: one stream's bandwidth per zone bounds these sizes.
			striped := fmt.Sprintf("commitlog-rapid-2of3-%dstripes", LogStripes)
			rows = append(rows, logRow{name: striped, stripes: LogStripes}, logRow{name: striped + "-one-slow-zone", stripes: LogStripes})
			if size == LogOpenBytes {
				rows = append(rows, logRow{name: striped + "-open", stripes: LogStripes, rate: LogOpenBytesPerS / LogOpenBytes})
			}
		}
		for _, row := range rows {
			slow := strings.HasSuffix(row.name, "slow-zone")
			row.profile, row.stores, row.requests = z.ProfileLabel(slow), z.Stores(slow), z.Requests
			row.opts.WriteQuorum, row.size, row.raw = 2, size, raw
			row.flush, row.perMiB = profile.Flush, profile.WritePerMiB
			if slow {
				row.slow = SlowZone
			}
			if err := measureLog(ctx, env, row); err != nil {
				return err
			}
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
		srv, err := s3expresstest.NewServer(s3expresstest.Options{Profile: express, Seed: env.Seed + uint64(i)*7919, Buckets: []string{bucket}})
		if err != nil {
			return err
		}
		servers = append(servers, srv)
		s, err := s3express.New(ctx, srv.Client(), bucket, s3express.Options{})
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
	return measureLog(ctx, env, logRow{name: "commitlog-s3express-2of3", profile: express.Name, stores: stores, opts: commitlog.Options{WriteQuorum: 2}, requests: requests})
}

// logAzure measures commitlog on three Azure Premium containers of one
// Azurite, each behind its own latency proxy (appends are staged blocks
// committed under the blob's ETag). Without Azurite the row is left out and
// the report says why, as the azure scenario does.
func logAzure(ctx context.Context, env *Env) error {
	srv, err := azuritetest.NewServer(azuritetest.Options{})
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
	return measureLog(ctx, env, logRow{name: "commitlog-azpremium-2of3", profile: env.ProfileName(profile.Name), stores: stores, opts: commitlog.Options{WriteQuorum: 2}, requests: requests})
}

// dropLog deletes every object of log name from stores, as far as it can.
func dropLog(ctx context.Context, stores []blob.Store, name string) {
	for _, st := range stores {
		for o, err := range blob.All(ctx, st, &blob.ListOptions{Prefix: name + "/"}) {
			if err != nil {
				break
			}
			st.Delete(ctx, o.Key, nil)
		}
	}
}

// measureLog opens a log named after the row on stores, warms it up, then
// runs the row's appenders while a reader tails the log, and records the
// row: append latencies, appends per second, reader lag and requests per
// append (the reader's polling included). A row whose appends fail is
// recorded with its errors; only a log that cannot be opened or read ends
// the scenario.
func measureLog(ctx context.Context, env *Env, row logRow) error {
	name, opts, requests := row.name, row.opts, row.requests
	size := row.size
	if size == 0 {
		size = LogRecordBytes
	}
	label := name + " " + SizeString(size)
	if env.Progress != nil {
		env.Progress(Step{Done: env.done, Total: max(env.total, env.done+1), Row: label, Expected: env.Load.Duration})
	}
	l, newReader, perFrame, err := openLog(ctx, row, name, &opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Once the row is done (its writer and reader closed), its objects go:
	// the emulators run in this process, and holding every row's records
	// would make each row pay for the heap of the rows before it.
	defer dropLog(ctx, row.stores, name)
	defer l.Close()
	workers := env.Load.Concurrency
	record := make([]byte, size)
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
	r, err := newReader(first)
	if err != nil {
		return fmt.Errorf("%s: reader: %w", name, err)
	}
	defer r.Close()

	n := LogMaxAppends
	if row.rate > 0 {
		n = max(n, int(row.rate*env.Load.Duration.Seconds()))
	}
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
	var latMu sync.Mutex
	// one appends and records the latency from t0, when it was due.
	one := func(w int, t0 time.Time) {
		off, err := appendOne()
		t1 := time.Now()
		if err != nil {
			errs.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		latMu.Lock()
		lat[w] = append(lat[w], t1.Sub(t0))
		latMu.Unlock()
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
	if row.rate > 0 {
		// Open loop: the k-th append is due at start + k/rate and starts
		// then (timers are coarse, so each wakeup starts every append due
		// by then), however many are still in flight.
		workers = 0
		for k := 0; k < n && ctx.Err() == nil; {
			now := time.Now()
			if !now.Before(deadline) {
				break
			}
			for ; k < n; k++ {
				due := start.Add(time.Duration(float64(k) / row.rate * float64(time.Second)))
				if due.After(now) {
					break
				}
				w := k % len(lat)
				wg.Go(func() { one(w, due) })
			}
			time.Sleep(200 * time.Microsecond)
		}
	} else {
		for w := range workers {
			wg.Go(func() {
				for started.Add(1) <= int64(n) && ctx.Err() == nil && time.Now().Before(deadline) {
					one(w, time.Now())
				}
			})
		}
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
		Scenario: name, Group: env.scenario, Profile: row.profile, Size: size, Mode: ModeClosed,
		Errors: int(errs.Load()), Workers: workers, Elapsed: elapsed,
	}
	if row.rate > 0 {
		res.Mode, res.Rate = ModeOpen, row.rate
	}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	Summarize(&res, slices.Concat(lat...))
	if res.Ops+res.Errors > 0 {
		res.RequestsPerOp = float64(reqs) / float64(res.Ops+res.Errors)
	}
	slices.Sort(lags)
	lf := &LogFigures{Appenders: workers, RecordBytes: size, Lags: lags,
		LagP50: Quantile(lags, 0.5), LagP90: Quantile(lags, 0.9), LagP99: Quantile(lags, 0.99)}
	if row.raw != nil {
		lf.RawP50, lf.RawP99 = row.raw.p50, row.raw.p99
		if row.rate == 0 {
			m := floorModel{flush: row.flush, perMiB: row.perMiB, slow: row.slow,
				appenders: workers, size: size, zones: len(row.stores), quorum: opts.WriteQuorum,
				inFlight: cmp.Or(opts.MaxInFlight, commitlog.DefaultMaxInFlight), stripes: row.stripes,
				appends: max(res.Ops, 1000), seed: env.Seed}
			m.overhead = max(row.raw.p50-rawModel(row.flush, row.perMiB, size, env.Seed), 0)
			lf.FloorP50, lf.FloorP99 = m.floor()
		}
	}
	if !opts.Slots {
		lf.RecordsPerFlush = perFrame()
	}
	res.Log = lf
	env.results = append(env.results, res)
	env.done++
	return nil
}
