package tiered_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// shardEffect is a write that only a compaction pass makes, and that
// landed: made by process proc, of a key of shard, sent at tick at.
type shardEffect struct {
	proc, shard int
	at          int64
}

// shardLog records pass effects, in the order they were sent: a write is
// sent once its context has been checked (a client sends none whose
// context ended), and the lease ends a pass's context when it ends.
type shardLog struct {
	ticks atomic.Int64
	mu    sync.Mutex
	eff   []shardEffect
}

// send returns the tick of a write about to be sent, or ctx's error.
func (l *shardLog) send(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.ticks.Add(1), nil
}

func (l *shardLog) add(proc, shard int, at int64) {
	l.mu.Lock()
	l.eff = append(l.eff, shardEffect{proc, shard, at})
	l.mu.Unlock()
}

// switches counts, for each shard, its effects and how often the process
// making them changes: passes of one shard by two processes that
// overlapped in time interleave their effects, and change process more
// often than the shard's lease changed hands.
func (l *shardLog) switches(shards int) (sw, total []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sw, total = make([]int, shards), make([]int, shards)
	last := make([]int, shards)
	for i := range last {
		last[i] = -1
	}
	slices.SortFunc(l.eff, func(a, b shardEffect) int { return cmp.Compare(a.at, b.at) })
	for _, e := range l.eff {
		if last[e.shard] >= 0 && last[e.shard] != e.proc {
			sw[e.shard]++
		}
		last[e.shard] = e.proc
		total[e.shard]++
	}
	return sw, total
}

// recorder is one process's view of a shared tier that records, as they
// land, the writes only a pass makes, by the shard of their keys: in hot,
// the deletes of users' keys (the users of these tests only write); in
// cold, the packs (whose metadata names the range of keys they hold).
type recorder struct {
	blob.Store
	proc, shards int
	cold         bool
	log          *shardLog
}

func (r *recorder) Delete(ctx context.Context, key string, opts *blob.DeleteOptions) error {
	at, err := r.log.send(ctx)
	if err != nil {
		return err
	}
	err = r.Store.Delete(ctx, key, opts)
	if err == nil && !r.cold && !strings.HasPrefix(key, markerPrefix) {
		r.log.add(r.proc, tiered.HashShard(key, r.shards), at)
	}
	return err
}

func (r *recorder) NewWriter(ctx context.Context, key string, opts *blob.WriterOptions) (blob.Writer, error) {
	w, err := r.Store.NewWriter(ctx, key, opts)
	if err != nil || !r.cold || !strings.HasPrefix(key, markerPrefix+"log/") || !strings.Contains(key, "-p-") {
		return w, err
	}
	lo, _, _ := strings.Cut(opts.Metadata["zonalblob-tiered-range"], ".")
	first, err := base64.RawURLEncoding.DecodeString(lo)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("pack %s: range %q: %v", key, opts.Metadata["zonalblob-tiered-range"], err)
	}
	shard := tiered.HashShard(string(first), r.shards)
	return &recordedWriter{Writer: w, ctx: ctx, log: r.log, done: func(at int64) { r.log.add(r.proc, shard, at) }}, nil
}

func (r *recorder) Close() error { return nil }

type recordedWriter struct {
	blob.Writer
	ctx  context.Context
	log  *shardLog
	done func(at int64)
}

// Close is where a write is sent.
func (w *recordedWriter) Close() error {
	at, err := w.log.send(w.ctx)
	if err != nil {
		w.Writer.Close()
		return err
	}
	if err := w.Writer.Close(); err != nil {
		return err
	}
	w.done(at)
	return nil
}

// packShards reads every pack in cold and returns, by shard, how many
// packs hold its keys; it fails t for a pack that holds keys of two.
func packShards(t *testing.T, cold blob.Store, shards int) []int {
	t.Helper()
	ctx := ctxT(t)
	out := make([]int, shards)
	for o, err := range blob.All(ctx, cold, &blob.ListOptions{Prefix: markerPrefix + "log/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(o.Key, "-p-") {
			continue
		}
		b, err := blob.ReadAll(ctx, cold, o.Key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // rewritten meanwhile
		} else if err != nil {
			t.Fatal(err)
		}
		// The header: magic, the index's length, its CRC (see encodePack).
		n, err := strconv.Atoi(string(b[8:19]))
		if err != nil {
			t.Fatalf("pack %s: header %q", o.Key, b[:29])
		}
		var idx struct {
			Entries []struct {
				K string `json:"k"`
			} `json:"entries"`
		}
		if err := json.Unmarshal(b[29:29+n], &idx); err != nil {
			t.Fatalf("pack %s: %v", o.Key, err)
		}
		seen := map[int][]string{}
		for _, e := range idx.Entries {
			sh := tiered.HashShard(e.K, shards)
			seen[sh] = append(seen[sh], e.K)
		}
		if len(seen) > 1 {
			t.Errorf("pack %s holds keys of shards %v", o.Key, seen)
		}
		for sh := range seen {
			out[sh]++
		}
	}
	return out
}

// epochWatch records, from the Stats of several processes, which process
// reported holding each epoch of each shard's lease: never two.
type epochWatch struct {
	t      *testing.T
	mu     sync.Mutex
	owners map[[2]uint64]int
}

func (w *epochWatch) look(stores []*tiered.Store, closed []atomic.Bool) (held [][]int) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners == nil {
		w.owners = map[[2]uint64]int{}
	}
	for p, s := range stores {
		var mine []int
		if !closed[p].Load() {
			for _, l := range s.Stats().Lease.Shards {
				if !l.Held {
					continue
				}
				mine = append(mine, l.Shard)
				k := [2]uint64{uint64(l.Shard), l.Epoch}
				if q, ok := w.owners[k]; ok && q != p {
					w.t.Errorf("processes %d and %d both held epoch %d of shard %d", q, p, l.Epoch, l.Shard)
				}
				w.owners[k] = p
			}
		}
		held = append(held, mine)
	}
	return held
}

// shardEpochs sums, by shard, the epochs of its lease the stores began.
func shardEpochs(stores []*tiered.Store, shards int) []int64 {
	out := make([]int64, shards)
	for _, s := range stores {
		for _, l := range s.Stats().Lease.Shards {
			out[l.Shard] += l.Acquired
		}
	}
	return out
}

// TestShardedCompaction runs four processes over the same tiers with four
// shards, each with its compactor on, packing: the shards spread one to a
// process, every shard is compacted, no pack holds keys of two shards, no
// epoch of a shard is held by two processes, and the passes of one shard
// never overlap (its effects change process no more often than its lease
// changed hands). A process that closes hands its shard to another. Every
// object written reads back.
func TestShardedCompaction(t *testing.T) {
	const shards, procs = 4, 4
	// A skew wide enough for a busy machine's scheduling: a write checked
	// against the lease just before it ends is sent, and lands, within it.
	const lease, skew = time.Second, 100 * time.Millisecond
	hot, cold := memPair(t)
	log := &shardLog{}
	var stores []*tiered.Store
	closed := make([]atomic.Bool, procs)
	for p := range procs {
		s, err := tiered.New(&recorder{Store: hot, proc: p, shards: shards, log: log}, &recorder{Store: cold, proc: p, shards: shards, cold: true, log: log}, tiered.Options{
			After: time.Nanosecond, Interval: 5 * time.Millisecond, MaxClockSkew: skew,
			LeaseDuration: lease, PackMaxObjects: 8, Shards: shards, Owner: fmt.Sprint("process-", p),
		})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	defer func() {
		for p, s := range stores {
			if !closed[p].Load() {
				s.Close()
			}
		}
	}()
	watch := &epochWatch{t: t}
	// waitSpread waits until the shards are held by the open processes, at
	// most one shard more by one than by another; polls counted (40
	// leases' worth at 2 ms each on an idle clock).
	waitSpread := func() [][]int {
		for range 40 * int(lease/(2*time.Millisecond)) {
			held := watch.look(stores, closed)
			lo, hi, sum := shards, 0, 0
			for p, h := range held {
				if closed[p].Load() {
					continue
				}
				lo, hi, sum = min(lo, len(h)), max(hi, len(h)), sum+len(h)
			}
			if sum == shards && hi-lo <= 1 {
				return held
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("the shards did not spread over the processes: %v", watch.look(stores, closed))
		return nil
	}
	held := waitSpread()
	for p, h := range held {
		if len(h) != 1 {
			t.Fatalf("four processes, four shards: process %d holds %v (all: %v)", p, h, held)
		}
	}
	t.Logf("shards spread: %v", held)

	ctx := ctxT(t)
	var model sync.Map
	write := func(u, n int) {
		for i := range n {
			p := rand.IntN(procs)
			for closed[p].Load() {
				p = (p + 1) % procs
			}
			k, v := fmt.Sprintf("u%d/k%03d", u, i%97), fmt.Sprint(i)
			if err := blob.Put(ctx, stores[p], k, []byte(v), nil); err != nil {
				t.Errorf("put %s: %v", k, err)
				return
			}
			model.Store(k, v)
			watch.look(stores, closed)
		}
	}
	var users sync.WaitGroup
	for u := range 4 {
		users.Go(func() { write(u, 150) })
	}
	users.Wait()

	// A process that closes releases its shard, which another takes.
	closed[procs-1].Store(true)
	if err := stores[procs-1].Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("after process %d closed: %v", procs-1, waitSpread())
	for u := range 4 {
		users.Go(func() { write(u, 150) })
	}
	users.Wait()

	// Everything moves: hot keeps no user object.
	drained := false
	for range 40 * int(lease/(2*time.Millisecond)) {
		watch.look(stores, closed)
		left := 0
		for o, err := range blob.All(ctx, hot, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(o.Key, markerPrefix) {
				left++
			}
		}
		if drained = left == 0; drained {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if !drained {
		t.Fatal("objects stayed in hot")
	}

	sw, total := log.switches(shards)
	epochs := shardEpochs(stores, shards)
	t.Logf("by shard: %v pass effects, %v changes of process, %v epochs", total, sw, epochs)
	for sh := range shards {
		if total[sh] == 0 {
			t.Errorf("shard %d: no pass effect", sh)
		}
		if int64(sw[sh]) > epochs[sh]-1 {
			t.Errorf("shard %d: pass effects changed process %d times over %d epochs: passes of two processes overlapped", sh, sw[sh], epochs[sh])
		}
	}
	packs := packShards(t, cold, shards)
	t.Logf("packs by shard: %v", packs)
	for sh, n := range packs {
		if n == 0 {
			t.Errorf("shard %d: no pack", sh)
		}
	}
	model.Range(func(k, v any) bool {
		got, err := blob.ReadAll(ctx, stores[0], k.(string))
		if err != nil || string(got) != v.(string) {
			t.Errorf("%s: read %q, %v; want %q", k, got, err, v)
		}
		return true
	})
	for p, s := range stores {
		if st := s.Stats(); st.Errors != 0 {
			// A lease renewal late on a busy machine counts too.
			t.Logf("process %d: %d failures, last %s", p, st.Errors, st.LastError)
		}
	}
}

// Two processes, two shards, one each. The holder of one is paused past
// its lease (its calls stopped where they were): the other takes that
// shard over, and, resumed, the paused one's pass makes no effect on it:
// the shard's effects change process no more often than its lease changed
// hands, and the paused process counts the lease lost. The other shard's
// holder is not disturbed meanwhile.
func TestShardHolderPaused(t *testing.T) {
	const shards, procs = 2, 2
	const lease, skew = time.Second, 100 * time.Millisecond
	hot, cold := memPair(t)
	log := &shardLog{}
	var gates []*paused
	var stores []*tiered.Store
	for p := range procs {
		h := newPaused(&recorder{Store: hot, proc: p, shards: shards, log: log}, p, false, nil)
		c := newPaused(&recorder{Store: cold, proc: p, shards: shards, cold: true, log: log}, p, true, nil)
		s, err := tiered.New(h, c, tiered.Options{
			After: time.Nanosecond, Interval: 5 * time.Millisecond, MaxClockSkew: skew,
			LeaseDuration: lease, PackMaxObjects: 8, Shards: shards, Owner: fmt.Sprint("process-", p),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		gates, stores = append(gates, h, c), append(stores, s)
	}
	closed := make([]atomic.Bool, procs)
	watch := &epochWatch{t: t}
	polls := 40 * int(lease/(2*time.Millisecond))
	waitHeld := func(want func(held [][]int) bool) [][]int {
		for range polls {
			if held := watch.look(stores, closed); want(held) {
				return held
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("the leases never came to the state awaited: %v", watch.look(stores, closed))
		return nil
	}
	held := waitHeld(func(h [][]int) bool { return len(h[0]) == 1 && len(h[1]) == 1 })
	victim := 0
	shard := held[victim][0]
	before := stores[victim].Stats().Lease.Shards[shard]

	// Users write all along, through the process not paused.
	ctx := ctxT(t)
	var model sync.Map
	var pausedNow atomic.Bool
	var stop atomic.Bool
	var users sync.WaitGroup
	users.Go(func() {
		for n := 0; !stop.Load(); n++ {
			p := n % procs
			if pausedNow.Load() {
				p = 1 - victim
			}
			k, v := fmt.Sprintf("k%03d", n%200), fmt.Sprint(n)
			if err := blob.Put(ctx, stores[p], k, []byte(v), nil); err != nil {
				if p == victim && pausedNow.Load() {
					continue // paused as the write began: not acknowledged
				}
				t.Errorf("put %s: %v", k, err)
				return
			}
			model.Store(k, v)
			time.Sleep(200 * time.Microsecond)
		}
	})
	time.Sleep(lease)

	pausedNow.Store(true)
	for _, g := range gates[2*victim : 2*victim+2] {
		g.pause()
	}
	// The other process takes the paused one's shard over, and keeps its own.
	waitHeld(func(h [][]int) bool { return len(h[1-victim]) == 2 })
	time.Sleep(lease)
	for _, g := range gates[2*victim : 2*victim+2] {
		g.resume()
	}
	pausedNow.Store(false)
	// Resumed, it asks for a shard back and gets one.
	waitHeld(func(h [][]int) bool { return len(h[0]) == 1 && len(h[1]) == 1 })
	time.Sleep(lease)
	stop.Store(true)
	users.Wait()

	after := stores[victim].Stats().Lease.Shards[shard]
	if after.Lost <= before.Lost {
		t.Errorf("the paused holder of shard %d does not count its lease lost: before %+v, after %+v", shard, before, after)
	}
	sw, total := log.switches(shards)
	epochs := shardEpochs(stores, shards)
	t.Logf("shard %d's holder paused; by shard: %v pass effects, %v changes of process, %v epochs", shard, total, sw, epochs)
	for sh := range shards {
		if int64(sw[sh]) > epochs[sh]-1 {
			t.Errorf("shard %d: pass effects changed process %d times over %d epochs: a paused holder's pass made effects after its lease was taken over", sh, sw[sh], epochs[sh])
		}
	}
	if total[shard] == 0 {
		t.Errorf("shard %d: no pass effect", shard)
	}
	model.Range(func(k, v any) bool {
		got, err := blob.ReadAll(ctx, stores[1-victim], k.(string))
		if err != nil || string(got) != v.(string) {
			t.Errorf("%s: read %q, %v; want %q", k, got, err, v)
		}
		return true
	})
}

// A process whose Shards differs from those of the processes compacting
// the same tiers runs no pass, and says why, whether it would take the
// leases for a pass (manual) or keep them (background); once none of
// their leases has been held for a lease's time, it takes over with its
// own number, and the others are refused in turn. A process of one shard
// (as every process was before shards) and one of several also refuse
// each other.
func TestShardsDiffer(t *testing.T) {
	const lease = 300 * time.Millisecond
	hot, cold := memPair(t)
	ctx := ctxT(t)
	opts := func(shards int, owner string) tiered.Options {
		return tiered.Options{Shards: shards, Owner: owner, MaxClockSkew: 10 * time.Millisecond, LeaseDuration: lease, LeaseStore: cold}
	}
	refused := func(what string, res tiered.PassResult) {
		t.Helper()
		if res.Err == nil || !strings.Contains(res.Err.Error(), "different Shards") || res.Moved != 0 {
			t.Errorf("%s: %+v", what, res)
		}
	}
	four := opts(4, "four")
	four.After, four.Interval = time.Nanosecond, 5*time.Millisecond
	bg, err := tiered.New(nopClose{hot}, nopClose{cold}, four)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000 && bg.Stats().Lease.Held == false; i++ {
		time.Sleep(time.Millisecond)
	}
	two := manualWith(t, hot, cold, opts(2, "two"))
	one := manualWith(t, hot, cold, opts(1, "one"))
	refused("two shards beside four", two.CompactOnce(ctx))
	refused("one shard beside four", one.CompactOnce(ctx))
	if st := two.Stats().Lease; st.Held || len(st.Shards) != 2 || st.Acquired != 0 {
		t.Errorf("the refused process's leases: %+v", st)
	}
	// A background process reports it as a failure.
	twoBG := opts(2, "two-bg")
	twoBG.After, twoBG.Interval = time.Nanosecond, 5*time.Millisecond
	bg2, err := tiered.New(nopClose{hot}, nopClose{cold}, twoBG)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5000 && !strings.Contains(bg2.Stats().LastError, "different Shards"); i++ {
		time.Sleep(time.Millisecond)
	}
	if st := bg2.Stats(); !strings.Contains(st.LastError, "different Shards") || st.Passes != 0 {
		t.Errorf("a background process with two shards beside four: %d passes, last error %q", st.Passes, st.LastError)
	}
	bg2.Close()

	// The process of four closes, releasing its leases; a lease's time
	// later, the process of two takes over.
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, two, "k", "v")
	var res tiered.PassResult
	for i := 0; i < 1000; i++ {
		if res = two.CompactOnce(ctx); res.Err != nil && strings.Contains(res.Err.Error(), "different Shards") {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	if res.Err != nil || res.Moved != 1 {
		t.Fatalf("two shards, alone: %+v", res)
	}
	if st := two.Stats().Lease; st.Acquired != 2 || st.Holder != "two" {
		t.Errorf("two shards, alone: leases %+v", st)
	}
	// Two's leases were released just now: not a lease's time of theirs
	// (of these, a minute: whatever the machine's speed) ago.
	late := opts(1, "one")
	late.LeaseDuration = time.Minute
	one = manualWith(t, hot, cold, late)
	refused("one shard after two", one.CompactOnce(ctx))
	four = opts(4, "four")
	four.LeaseDuration = time.Minute
	refused("four shards after two", manualWith(t, hot, cold, four).CompactOnce(ctx))
	checkModel(t, one, map[string]string{"k": "v"}, nil)
}

// ShardOf chooses the shards: here by the key's first byte. A pass of a
// manual Store runs every shard's, each under its own lease, and each pack
// holds one shard's keys.
func TestShardOf(t *testing.T) {
	hot, cold := memPair(t)
	s := manualWith(t, hot, cold, tiered.Options{Shards: 3, PackMaxObjects: 100, ShardOf: func(key string) int { return int(key[0] - 'a') }})
	model := map[string]string{}
	for i := range 30 {
		k := fmt.Sprintf("%c/%02d", 'a'+i%3, i)
		model[k] = fmt.Sprint(i)
		mustPut(t, s, k, model[k])
	}
	res := s.CompactOnce(ctxT(t))
	if res.Err != nil || res.Moved != 30 {
		t.Fatalf("pass: %+v", res)
	}
	st := s.Stats()
	if st.Packs != 3 || st.Passes != 3 {
		t.Errorf("%d packs in %d passes, want one pack in each shard's pass", st.Packs, st.Passes)
	}
	for _, l := range st.Lease.Shards {
		if l.Acquired != 1 || l.Held || l.Holder != "test-compactor" {
			t.Errorf("shard %d's lease: %+v", l.Shard, l)
		}
	}
	checkModel(t, s, model, nil)
}

// shards is checked with the other parameters, before any I/O: the hot
// URL here names no registered scheme.
func TestShardsURL(t *testing.T) {
	ctx := ctxT(t)
	s, err := blob.Open(ctx, "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&manual=true&shards=4")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.(*tiered.Store).Stats().Lease.Shards); n != 4 {
		t.Errorf("shards=4: %d shards", n)
	}
	s.Close()
	// Kept in hot, the shards' leases are passed over with the markers.
	s, err = blob.Open(ctx, "tiered://?hot=mem%3A%2F%2F&cold=mem%3A%2F%2F&manual=true&after=0&lease_in=hot&max_clock_skew=10ms&shards=3")
	if err != nil {
		t.Fatal(err)
	}
	ts := s.(*tiered.Store)
	for i := range 2 {
		for k := range 6 {
			mustPut(t, ts, fmt.Sprint(i, "/", k), "v")
		}
		if res := ts.CompactOnce(ctx); res.Err != nil || res.Moved != 6 {
			t.Fatalf("pass %d: %+v", i, res)
		}
	}
	if st := ts.Stats(); st.Errors != 0 || st.Lease.Acquired != 6 {
		t.Fatalf("stats %+v", st)
	}
	if keys := listKeys(t, ts); len(keys) != 12 {
		t.Errorf("listed %q", keys)
	}
	s.Close()
	for _, v := range []string{"0", "-1", "257", "four", ""} {
		_, err := blob.Open(ctx, "tiered://?hot=nosuch%3A%2F%2F&cold=mem%3A%2F%2F&shards="+v)
		if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "shards") {
			t.Errorf("shards=%q: %v", v, err)
		}
	}
	hot, cold := memPair(t)
	if _, err := tiered.New(hot, cold, tiered.Options{Shards: -1}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("Shards -1: %v", err)
	}
}

// The lease's metrics have a data point per shard, with the holder for
// the epoch and its age.
func TestShardMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	hot, cold := memPair(t)
	s := manualWith(t, hot, cold, tiered.Options{Shards: 2, MeterProvider: mp, Owner: "pod-a"})
	mustPut(t, s, "k", "v")
	if res := s.CompactOnce(ctxT(t)); res.Err != nil || res.Moved != 1 {
		t.Fatalf("pass: %+v", res)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	points := map[string][]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			}
			for _, set := range sets {
				shard, _ := set.Value("zonalblob.tiered.shard")
				holder, _ := set.Value("zonalblob.tiered.lease.holder")
				points[m.Name] = append(points[m.Name], fmt.Sprintf("%d/%s", shard.AsInt64(), holder.AsString()))
			}
		}
	}
	for name, want := range map[string]string{
		"zonalblob.tiered.lease.acquired": "0/ 1/",
		"zonalblob.tiered.lease.held":     "0/ 1/",
		"zonalblob.tiered.lease.epoch":    "0/pod-a 1/pod-a",
		"zonalblob.tiered.lease.age":      "0/pod-a 1/pod-a",
	} {
		got := points[name]
		slices.Sort(got)
		if strings.Join(got, " ") != want {
			t.Errorf("%s: data points %v, want %s", name, got, want)
		}
	}
}
