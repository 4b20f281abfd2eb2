package gcsrapid_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/internal/testkit"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/conformance"
)

func newServer(t *testing.T, profile gcsrapidtest.Profile) *gcsrapidtest.Server {
	t.Helper()
	return gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: profile, Seed: 1})
}

func fmtInt(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return string(digits[i])
	}
	return fmtInt(i/10) + string(digits[i%10])
}

func TestConformance(t *testing.T) {
	srv := newServer(t, gcsrapidtest.Zero())
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 8, MaxItemAge: 0}})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
		OpenMissingBucket: func(ctx context.Context, t *testing.T) (blob.Store, error) {
			return blob.Open(ctx, "gcsrapid://nope?endpoint="+srv.Endpoint())
		},
	})
}

func statsDelta(before, after gcsrapidtest.Stats) gcsrapidtest.Stats {
	return gcsrapidtest.Stats{
		ObjectsCreated:   after.ObjectsCreated - before.ObjectsCreated,
		ObjectsFinalized: after.ObjectsFinalized - before.ObjectsFinalized,
		Flushes:          after.Flushes - before.Flushes,
		ObjectsDeleted:   after.ObjectsDeleted - before.ObjectsDeleted,
	}
}

func TestPutIsOneCreateAndNoFinalize(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{})
	defer s.Close()
	before := srv.Stats()
	if err := blob.Put(ctx, s, "log/0001", []byte("0123456789"), nil); err != nil {
		t.Fatal(err)
	}
	d := statsDelta(before, srv.Stats())
	if d.ObjectsCreated != 1 || d.ObjectsFinalized != 0 {
		t.Errorf("Put made %d creates and %d finalizes, want 1 and 0", d.ObjectsCreated, d.ObjectsFinalized)
	}
	if got, err := blob.ReadAll(ctx, s, "log/0001"); err != nil || string(got) != "0123456789" {
		t.Errorf("read back %q, %v", got, err)
	}
	if err := s.Finalize(ctx, "log/0001"); err != nil {
		t.Fatal(err)
	}
	if d := statsDelta(before, srv.Stats()); d.ObjectsFinalized != 1 {
		t.Errorf("Finalize made %d finalizes, want 1", d.ObjectsFinalized)
	}
	if err := s.Finalize(ctx, "log/0001"); err != nil {
		t.Errorf("second Finalize: %v", err)
	}
	if got, err := blob.ReadAll(ctx, s, "log/0001"); err != nil || string(got) != "0123456789" {
		t.Errorf("read back after finalize %q, %v", got, err)
	}
}

// waitReady waits until the pool for prefix holds n ready writers.
func waitReady(t *testing.T, s *gcsrapid.Store, prefix string, n int) {
	t.Helper()
	waitFor(func() bool {
		p, ok := s.Stats().Pools[prefix]
		return ok && p.Ready >= n
	})
}

// waitFor polls until cond holds. It has no deadline of its own: what a test
// waits for happens however slow the machine, and a wait that never ends is
// a failure that go test's -timeout reports with every goroutine's stack.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPooledCreateMakesNoMetadataOperation(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 8, MinIdle: 4}})
	poolStarted := time.Now()
	// The first Create under a prefix starts its pool.
	if _, err := blob.CreateBytes(ctx, s, "seg/", []byte("first"), nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "seg/", 4)
	check, err := srv.Client(ctx, storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	names := func() map[string]bool {
		out := map[string]bool{}
		it := check.Bucket(s.Bucket()).Objects(ctx, nil)
		for {
			a, err := it.Next()
			if err != nil {
				return out
			}
			out[a.Name] = true
		}
	}
	for i := range 4 {
		existing := names()
		before := srv.Stats()
		key, err := blob.CreateBytes(ctx, s, "seg/", []byte("payload"), nil)
		if err != nil {
			t.Fatal(err)
		}
		d := statsDelta(before, srv.Stats())
		// The pool refills in the background, which creates other objects;
		// the object written must be one that existed before the call, and
		// nothing may be finalized.
		if !existing[key] {
			t.Errorf("create %d: %s was created on the critical path, not taken from the pool", i, key)
		}
		if d.ObjectsFinalized != 0 || d.Flushes < 1 {
			t.Errorf("create %d: %d finalizes and %d flushes, want 0 and at least 1", i, d.ObjectsFinalized, d.Flushes)
		}
		if got, err := blob.ReadAll(ctx, s, key); err != nil || string(got) != "payload" {
			t.Errorf("%s: read %q, %v", key, got, err)
		}
		// Its name was made by a prewarm, after the pool started and before
		// the Create that handed it out returned.
		if ts, ok := blob.NameTime(key); !ok || ts.Before(poolStarted) || ts.After(time.Now()) {
			t.Errorf("pooled key %q does not carry its creation time (pool started %v)", key, poolStarted)
		}
	}
	if st := s.Stats().Pools["seg/"]; st.Hits < 4 {
		t.Errorf("pool hits %d, want the 4 warm creates served from the pool", st.Hits)
	}
	if s.Close() != nil {
		t.Fatal("close failed")
	}
	// Everything the pool still held was deleted at Close: only the 5
	// written objects remain.
	if n := len(names()); n != 5 {
		t.Errorf("%d objects left in the bucket after Close, want the 5 written", n)
	}
}

func TestAgedPoolObjectsAreDeletedNotUsed(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4, MinIdle: 2, MaxItemAge: 150 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, GraceWindow: time.Second}})
	defer s.Close()
	if _, err := blob.CreateBytes(ctx, s, "p/", []byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "p/", 2)
	// With no demand, the spares age out: at least the two ready ones.
	waitFor(func() bool { return s.Stats().Pools["p/"].Discards["aged"] >= 2 })
	asked := time.Now()
	key, err := blob.CreateBytes(ctx, s, "p/", []byte("b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A pooled name is made when its prewarm starts, and a writer is handed
	// out only while it is younger than MaxItemAge: so the name handed out
	// was made less than MaxItemAge before the Create was asked for.
	ts, ok := blob.NameTime(key)
	if !ok || !ts.After(asked.Add(-150*time.Millisecond)) {
		t.Errorf("handed out %s, named %v, more than MaxItemAge before the Create at %v", key, ts, asked)
	}
	// Nothing else deletes here: the emulator's count is the discards'.
	aged := s.Stats().Pools["p/"].Discards["aged"]
	waitFor(func() bool { return srv.Stats().ObjectsDeleted >= aged })
}

func TestWriterSafeguards(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{})
	defer s.Close()
	_, w, err := blob.Create(ctx, s, "w/", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("once"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("again")); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}

	// A pooled writer closed after write_timeout is refused: its object may
	// already be an orphan to the reconciler.
	short := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 2, MinIdle: 1, MaxItemAge: 50 * time.Millisecond, WriteTimeout: 20 * time.Millisecond, GraceWindow: time.Second}})
	defer short.Close()
	blob.CreateBytes(ctx, short, "t/", []byte("warm the pool"), nil)
	waitReady(t, short, "t/", 1)
	key, w2, err := blob.Create(ctx, short, "t/", nil)
	if err != nil {
		t.Fatal(err)
	}
	w2.Write([]byte("late"))
	time.Sleep(40 * time.Millisecond)
	if err := w2.Close(); err == nil {
		t.Errorf("Close after write_timeout succeeded")
	}
	// The refused object is deleted (in the background).
	waitFor(func() bool { return !slices.Contains(rawNames(ctx, t, srv, short.Bucket()), key) })
}

func TestConcurrentUseOfOneWriterFails(t *testing.T) {
	ctx := context.Background()
	// The commit's flush is held by the server until the write is
	// canceled, so the second call lands while Close runs: the emulator
	// counts the delay once it holds the flush.
	p := gcsrapidtest.Zero()
	p.Flush = latency.Fixed(time.Hour)
	srv := newServer(t, p)
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{})
	defer s.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.NewWriter(wctx, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	delays := srv.Stats().Delays
	done := make(chan error)
	go func() { done <- w.Close() }()
	waitFor(func() bool { return srv.Stats().Delays > delays })
	if _, err := w.Write([]byte("y")); err == nil || !strings.Contains(err.Error(), "concurrent use") {
		t.Errorf("Write during Close = %v, want a concurrent-use error", err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "concurrent use") {
		t.Errorf("Close during Close = %v, want a concurrent-use error", err)
	}
	cancel()
	// The refused calls did not disturb the Close they raced with: it
	// ends as the cancellation makes it, and then the writer is closed.
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want the cancellation", err)
	}
	if _, err := w.Write([]byte("z")); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	// A commit canceled mid-flush may or may not have applied; if it did,
	// it holds the bytes written before Close and none of the refused ones.
	if got, err := blob.ReadAll(ctx, s, "c"); err == nil && string(got) != "x" {
		t.Errorf("object = %q, want x", got)
	} else if err != nil && !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadAll = %v", err)
	}
}

func TestOpenURLValidation(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"gcsrapid://", "gcsrapid://BUCKET"},
		{"gcsrapid://b/extra/path", "gcsrapid://BUCKET"},
		{"gcsrapid://b?pool_sise=3", "pool_sise"},
		{"gcsrapid://b?max_item_age=5m&grace_window=5m", "must be below grace_window"},
		{"gcsrapid://b?max_item_age=9m&write_timeout=2m", "must be below grace_window"},
		{"gcsrapid://b?pool_size=2&pool_min_idle=3", "pool_min_idle"},
		{"gcsrapid://b?retries=x", "not an integer"},
		{"gcsrapid://b?max_item_age=soon", "not a duration"},
		{"gcsrapid://b?pool_size=64&grpc_conn_pool=2", "grpc_conn_pool=2"},
		{"gcsrapid://b?endpoint=u%3AEPSECRET%40127.0.0.1%3A1", "without a scheme, path or credentials"},
		{"gcsrapid://b?endpoint=http%3A%2F%2F127.0.0.1%3A1", "without a scheme"},
		{"gcsrapid://b?endpoint=127.0.0.1", "HOST:PORT"},
		{"gcsrapid://b?endpoint=127.0.0.1%3A99999", "port must be"},
	} {
		_, err := blob.Open(ctx, c.url)
		if err != nil && strings.Contains(err.Error(), "EPSECRET") {
			t.Errorf("Open: the error shows the endpoint's password: %v", err)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, blob.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want an invalid-argument error mentioning %q", c.url, err, c.want)
		}
	}
	srv := newServer(t, gcsrapidtest.Zero())
	if err := srv.CreateBucket("byurl", true); err != nil {
		t.Fatal(err)
	}
	s, err := blob.Open(ctx, "gcsrapid://byurl?endpoint="+srv.Endpoint()+"&pool_size=4&max_item_age=30s&grpc_conn_pool=3")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := blob.Put(ctx, s, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestReaderAtSharesOneStream(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{})
	defer s.Close()
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := blob.Put(ctx, s, "big", data, nil); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats().Calls["BidiReadObject"]
	ra, err := blob.OpenReaderAt(ctx, s, "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 4096, 500_000, 1<<20 - 10} {
		p := make([]byte, 100)
		n, err := ra.ReadAt(p, off)
		want := min(100, int64(len(data))-off)
		if int64(n) != want || !bytes.Equal(p[:n], data[off:off+want]) || (n < 100 && err != io.EOF) {
			t.Errorf("ReadAt(%d) = %d, %v", off, n, err)
		}
	}
	ra.Close()
	if calls := srv.Stats().Calls["BidiReadObject"] - before; calls != 1 {
		t.Errorf("%d read streams for 4 ReadAt calls, want 1", calls)
	}
}

func TestGocloudDrivertest(t *testing.T) {
	srv := newServer(t, gcsrapidtest.Zero())
	conformance.RunGocloud(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4}})
		},
		Caps: conformance.Caps{NonSlashDelimiters: true},
	})
}

// rawNames lists every object in the bucket as the service holds it,
// hidden or not, with a client of its own.
func rawNames(ctx context.Context, t *testing.T, srv *gcsrapidtest.Server, bucket string) []string {
	t.Helper()
	c, err := srv.Client(ctx, storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []string
	it := c.Bucket(bucket).Objects(ctx, nil)
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a.Name)
	}
}

// Close undoes every object its pools made: spares, a writer handed out and
// never closed, and prewarms still in flight whose object the service has
// created already (flushes are slow here, so they are mid-flush at Close).
func TestCloseLeavesOnlyWrittenObjects(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.Flush = latency.Fixed(time.Second)
	srv := newServer(t, p)
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 8, MinIdle: 2}})
	written, err := blob.CreateBytes(ctx, s, "seg/", []byte("kept"), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "seg/", 2)
	if _, _, err := blob.Create(ctx, s, "seg/", nil); err != nil { // never closed
		t.Fatal(err)
	}
	// Wait until a refill's object exists on the service while its load is
	// still in flight (created, not yet flushed).
	waitFor(func() bool { return srv.Stats().ObjectsCreated > s.Stats().Pools["seg/"].Loads })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rawNames(ctx, t, srv, s.Bucket()); len(got) != 1 || got[0] != written {
		t.Errorf("after Close the bucket holds %q, want only %s", got, written)
	}
}

// An object made by Create does not exist for anyone until its writer's Close
// returns: the pool's spares (empty objects on the service) are invisible to
// List, Stat and reads, through this Store, another Store on the bucket and
// the gocloud bridge; a pooled write of zero bytes becomes visible.
func TestUnwrittenPooledObjectsAreInvisible(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 8, MinIdle: 4}})
	defer s.Close()
	written, err := blob.CreateBytes(ctx, s, "log/", []byte("record"), nil)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := blob.CreateBytes(ctx, s, "log/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "log/", 4)
	raw := rawNames(ctx, t, srv, s.Bucket())
	var spares []string
	for _, k := range raw {
		if k != written && k != empty {
			spares = append(spares, k)
		}
	}
	if len(spares) < 4 {
		t.Fatalf("the service holds %q: want at least 4 spares besides the 2 written", raw)
	}
	oc, err := srv.Client(ctx, storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	other, err := gcsrapid.New(ctx, oc, s.Bucket(), gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for name, st := range map[string]blob.Store{"same store": s, "another store": other} {
		var listed []string
		for o, err := range blob.All(ctx, st, &blob.ListOptions{Prefix: "log/"}) {
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, o.Key)
		}
		want := []string{written, empty}
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("%s lists %q, want only the written %q", name, listed, want)
		}
		for _, k := range spares {
			if _, err := st.Stat(ctx, k); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: Stat(spare %s) = %v, want ErrNotFound", name, k, err)
			}
			if _, err := blob.ReadAll(ctx, st, k); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: ReadAll(spare %s) = %v, want ErrNotFound", name, k, err)
			}
			if _, err := blob.ReadRange(ctx, st, k, 5, 10); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: ReadRange(spare %s, 5) = %v, want ErrNotFound", name, k, err)
			}
			if _, err := blob.OpenReaderAt(ctx, st, k); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: OpenReaderAt(spare %s) = %v, want ErrNotFound", name, k, err)
			}
			if err := blob.Finalize(ctx, st, k); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("%s: Finalize(spare %s) = %v, want ErrNotFound", name, k, err)
			}
		}
		a, err := st.Stat(ctx, empty)
		if err != nil || a.Size != 0 {
			t.Errorf("%s: the empty pooled write: Stat = %+v, %v; want it visible with size 0", name, a, err)
		}
		if got, err := blob.ReadAll(ctx, st, empty); err != nil || len(got) != 0 {
			t.Errorf("%s: ReadAll(empty pooled write) = %q, %v", name, got, err)
		}
		if a, err := st.Stat(ctx, written); err != nil || len(a.Metadata) != 0 {
			t.Errorf("%s: Stat(written) = %+v, %v; want no metadata of the driver's own", name, a, err)
		}
	}

	b := blob.Bucket(other)
	it := b.List(&gcblob.ListOptions{Prefix: "log/"})
	var listed []string
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, o.Key)
	}
	if len(listed) != 2 {
		t.Errorf("through gocloud: listed %q, want the 2 written", listed)
	}
	for _, k := range spares {
		if ok, err := b.Exists(ctx, k); ok || err != nil {
			t.Errorf("through gocloud: Exists(spare %s) = %v, %v", k, ok, err)
		}
		if _, err := b.ReadAll(ctx, k); gcerrors.Code(err) != gcerrors.NotFound {
			t.Errorf("through gocloud: ReadAll(spare %s) = %v, want NotFound", k, err)
		}
	}
	if got, err := b.ReadAll(ctx, written); err != nil || string(got) != "record" {
		t.Errorf("through gocloud: ReadAll(written) = %q, %v", got, err)
	}
}

// The service may report an out of date size for an unfinalized object; here
// it reports the size of the first flush for an hour. A pooled write
// (created empty, written by a later flush) must still be visible at once,
// and every read must go to the true end.
func TestStaleSizesAreNotTrusted(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := newServer(t, p)
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4, MinIdle: 2}})
	defer s.Close()
	if _, err := blob.CreateBytes(ctx, s, "log/", []byte("warm"), nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "log/", 2)
	key, err := blob.CreateBytes(ctx, s, "log/", []byte("0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Pools["log/"]; st.Hits == 0 {
		t.Fatalf("the write was not pooled: %+v", st)
	}
	rc, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if ra, err := rc.Bucket(s.Bucket()).Object(key).Attrs(ctx); err != nil || ra.Size != 0 {
		t.Fatalf("the service reports size %d, %v: its sizes are not stale, the test proves nothing", ra.Size, err)
	}
	if a, err := s.Stat(ctx, key); err != nil || a.Size != 10 {
		t.Errorf("Stat of a committed pooled write = %+v, %v; want it visible with its true size 10", a, err)
	}
	if r, err := s.NewRangeReader(ctx, key, 0, -1); err != nil || r.Attributes().Size != 10 {
		t.Errorf("a reader's Attributes().Size = %v, %v; want 10", r, err)
	} else {
		r.Close()
	}
	if got, err := blob.ReadAll(ctx, s, key); err != nil || string(got) != "0123456789" {
		t.Errorf("ReadAll = %q, %v", got, err)
	}
	if got, err := blob.ReadRange(ctx, s, key, 4, -1); err != nil || string(got) != "456789" {
		t.Errorf("ReadRange(4, -1) = %q, %v", got, err)
	}
	if got, err := blob.ReadRange(ctx, s, key, 2, 3); err != nil || string(got) != "234" {
		t.Errorf("ReadRange(2, 3) = %q, %v", got, err)
	}
	ra, err := blob.OpenReaderAt(ctx, s, key)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	buf := make([]byte, 20)
	if n, err := ra.ReadAt(buf, 3); n != 7 || err != io.EOF || string(buf[:n]) != "3456789" {
		t.Errorf("ReadAt(3) = %d %q, %v", n, buf[:n], err)
	}
	if ra.Size() != 10 {
		t.Errorf("ReaderAt.Size after reading to the end = %d, want 10", ra.Size())
	}
	listed := false
	for o, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "log/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Key == key {
			listed = true
			if o.Size != 10 {
				t.Errorf("listed with size %d, want 10", o.Size)
			}
		}
	}
	if !listed {
		t.Errorf("the committed pooled write %s is not listed", key)
	}
}

// Pooled writers hold their streams open, and the front end caps streams per
// connection (the emulator's default of 100): a Store opened by URL spreads
// them over enough connections to fill its pools, and says at open whether
// its connections are direct.
func TestPoolsFitUnderTheStreamCap(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	if err := srv.CreateBucket("capped", true); err != nil {
		t.Fatal(err)
	}
	u := "gcsrapid://capped?endpoint=" + srv.Endpoint() + "&pool_size=128&pool_min_idle=128&max_pools=2&load_concurrency=64"
	st, err := blob.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	s := st.(*gcsrapid.Store)
	defer s.Close()
	for _, prefix := range []string{"a/", "b/"} {
		if _, err := blob.CreateBytes(ctx, s, prefix, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, s, "a/", 128)
	waitReady(t, s, "b/", 128)
	sst := srv.Stats()
	if sst.StreamsRefused != 0 || sst.PeakStreamsPerConn > gcsrapidtest.DefaultMaxStreamsPerConn {
		t.Errorf("server: %d streams refused, peak %d per connection", sst.StreamsRefused, sst.PeakStreamsPerConn)
	}
	if want := gcsrapid.Connections(gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 128, MaxPools: 2}}); sst.Connections < 3 || want < 3 {
		t.Errorf("%d connections seen (%d wanted by the driver) for 256 open writers", sst.Connections, want)
	}
	if c := s.Stats().Connectivity; c != gcsrapid.ConnectivityIndirect {
		t.Errorf("Connectivity = %q, want %q for a plaintext emulator", c, gcsrapid.ConnectivityIndirect)
	}
}

// With hierarchical namespace rules on, keys they forbid fail before any I/O.
func TestHierarchicalNamesCheckedBeforeIO(t *testing.T) {
	ctx := context.Background()
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: gcsrapidtest.Zero(), Hierarchical: true,
		Buckets: []gcsrapidtest.Bucket{{Name: "hns", Zonal: true}}})
	client, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The emulator refuses them itself.
	w := client.Bucket("hns").Object("a//b").NewWriter(ctx)
	w.Append = true
	w.Write([]byte("x"))
	if err := w.Close(); status.Code(err) != codes.InvalidArgument && !strings.Contains(fmt.Sprint(err), "hierarchical") {
		t.Errorf("emulator accepted a//b: %v", err)
	}
	s, err := gcsrapid.New(ctx, client, "hns", gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}, Hierarchical: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := srv.Stats().Calls
	for _, k := range []string{"a//b", "/lead", "x/./y", "x/../y", strings.Repeat("f", gcsrapid.MaxFolderNameLen+1) + "/obj"} {
		if err := blob.Put(ctx, s, k, []byte("x"), nil); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Stat(ctx, k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if after := srv.Stats().Calls; fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("invalid keys reached the service: calls %v, then %v", before, after)
	}
	if err := blob.Put(ctx, s, strings.Repeat("f", gcsrapid.MaxFolderNameLen)+"/ok/obj", []byte("x"), nil); err != nil {
		t.Errorf("a valid hierarchical name: %v", err)
	}
}

// The strict emulator: stale sizes for unfinalized objects, the stream cap,
// and transient UNAVAILABLE / RESOURCE_EXHAUSTED on idempotent calls, which
// the driver retries with backoff.
func TestConformanceStrict(t *testing.T) {
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: p, Seed: 7, TransientFaults: 0.02})
	conformance.Run(t, conformance.Harness{
		NewStore: func(ctx context.Context, t *testing.T) blob.Store {
			return testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 8}, Retries: 5})
		},
		Caps: conformance.Caps{GenerationPreconditions: true, NonSlashDelimiters: true},
	})
	t.Run("gocloud", func(t *testing.T) {
		conformance.RunGocloud(t, conformance.Harness{
			NewStore: func(ctx context.Context, t *testing.T) blob.Store {
				return testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4}, Retries: 5})
			},
			Caps: conformance.Caps{NonSlashDelimiters: true},
		})
	})
	if st := srv.Stats(); st.TransientFaults == 0 || st.StreamsRefused != 0 {
		t.Errorf("transient faults %d (want some), streams refused %d (want none)", st.TransientFaults, st.StreamsRefused)
	}
}

// The sweep deletes a prewarmed object left unwritten (by a process that
// died) once it is older than the window, and nothing written: not a pooled
// write whose size still reads zero (stale), nor a pooled write of zero bytes.
func TestSweepTakesOnlyUnwrittenResidue(t *testing.T) {
	ctx := context.Background()
	p := gcsrapidtest.Zero()
	p.StaleSize = time.Hour
	srv := newServer(t, p)
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4, MinIdle: 2, MaxItemAge: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, GraceWindow: time.Second, ClockSkew: 50 * time.Millisecond}, SweepInterval: 20 * time.Millisecond})
	defer s.Close()
	written, err := blob.CreateBytes(ctx, s, "log/", []byte("record"), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "log/", 2)
	empty, err := blob.CreateBytes(ctx, s, "log/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	written2, err := blob.CreateBytes(ctx, s, "log/", []byte("pooled"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Pools["log/"]; st.Hits < 2 {
		t.Fatalf("the writes were not pooled: %+v", st)
	}
	// What a dead process leaves: a prewarmed object, marked, never written.
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	residue := blob.NewName("log/")
	w := c.Bucket(s.Bucket()).Object(residue).NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, false
	w.Metadata = map[string]string{"zonalblob-prewarmed": "1"}
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := s.Stat(ctx, residue); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("the residue is visible: %v", err)
	}
	// The residue goes once it is past the window; the written objects,
	// older still, are past it too by then: two more full passes give the
	// sweep every chance to take them wrongly.
	waitFor(func() bool { return s.Stats().Swept >= 1 })
	p0 := s.Stats().SweepPasses
	waitFor(func() bool { return s.Stats().SweepPasses >= p0+2 })
	raw := rawNames(ctx, t, srv, s.Bucket())
	if slices.Contains(raw, residue) {
		t.Errorf("the residue %s was not swept after the window", residue)
	}
	for _, k := range []string{written, written2, empty} {
		if !slices.Contains(raw, k) {
			t.Errorf("the sweep deleted the written %s", k)
		}
	}
	if got, err := blob.ReadAll(ctx, s, written2); err != nil || string(got) != "pooled" {
		t.Errorf("ReadAll(%s) = %q, %v", written2, got, err)
	}
	if n := s.Stats().Swept; n != 1 {
		t.Errorf("swept %d objects, want the 1 residue", n)
	}
}

// Transient UNAVAILABLE / RESOURCE_EXHAUSTED on write streams: writes that
// cannot apply twice (conditional Puts, the pool's prewarms) are retried with
// backoff and succeed; an unconditional Put is not retried and fails.
func TestTransientWriteFaultsRetriedWhereSafe(t *testing.T) {
	ctx := context.Background()
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: gcsrapidtest.Zero(), Seed: 3,
		TransientFaults: 0.2, TransientFaultMethods: []string{"BidiWriteObject"}})
	s := testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 4}, Retries: 9})
	defer s.Close()
	unconditional := 0
	for i := range 50 {
		if err := blob.Put(ctx, s, fmt.Sprintf("c/%d", i), []byte("x"), &blob.WriterOptions{If: blob.IfNotExist()}); err != nil {
			t.Errorf("conditional Put %d: %v", i, err)
		}
		if _, err := blob.CreateBytes(ctx, s, "p/", []byte("x"), nil); err != nil {
			t.Errorf("Create %d: %v", i, err)
		}
		if err := blob.Put(ctx, s, fmt.Sprintf("u/%d", i), []byte("x"), nil); err != nil {
			if c := status.Code(errors.Unwrap(err)); c != codes.Unavailable && c != codes.ResourceExhausted && !strings.Contains(err.Error(), "transient fault") {
				t.Errorf("unconditional Put %d failed otherwise: %v", i, err)
			}
			unconditional++
		}
	}
	if unconditional == 0 || srv.Stats().TransientFaults == 0 {
		t.Errorf("%d unconditional Puts failed of 50, %d faults injected: the faults did not reach the writes", unconditional, srv.Stats().TransientFaults)
	}
	if st := s.Stats().Pools["p/"]; st.LoadErrors != 0 {
		t.Errorf("%d pool loads failed: prewarms were not retried", st.LoadErrors)
	}
}

// Retries counts the retries of an idempotent call after its first attempt,
// as in every driver: in Options 0 is the default and negative is none, in a
// URL retries=0 is none.
func TestRetriesCountAfterTheFirstAttempt(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	srv.InjectFault(gcsrapidtest.Fault{Method: "GetObject", Code: codes.Unavailable})
	attempts := func(s blob.Store) int64 {
		t.Helper()
		defer s.Close()
		before := srv.Stats().Calls["GetObject"]
		if _, err := s.Stat(ctx, "k"); err == nil || !strings.Contains(err.Error(), "injected fault") {
			t.Fatalf("Stat under a fault on every call = %v, want the fault", err)
		}
		return srv.Stats().Calls["GetObject"] - before
	}
	noPool := pool.CreatorOptions{Capacity: -1}
	for _, c := range []struct {
		name string
		opts gcsrapid.Options
		want int64
	}{
		{"default", gcsrapid.Options{CreatorOptions: noPool}, 1 + gcsrapid.DefaultRetries},
		{"one", gcsrapid.Options{CreatorOptions: noPool, Retries: 1}, 2},
		{"none", gcsrapid.Options{CreatorOptions: noPool, Retries: -1}, 1},
	} {
		if got := attempts(testkit.GCSRapid(t, srv, c.opts)); got != c.want {
			t.Errorf("%s: %d attempts, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		query string
		want  int64
	}{{"retries=0", 1}, {"retries=3", 4}, {"max_buffer=64KiB", 1 + gcsrapid.DefaultRetries}} {
		if err := srv.CreateBucket("retries-"+fmtInt(int(c.want))+"-"+fmtInt(len(c.query)), true); err != nil {
			t.Fatal(err)
		}
		s, err := blob.Open(ctx, "gcsrapid://retries-"+fmtInt(int(c.want))+"-"+fmtInt(len(c.query))+"?endpoint="+srv.Endpoint()+"&pool_size=0&"+c.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := attempts(s); got != c.want {
			t.Errorf("%s: %d attempts, want %d", c.query, got, c.want)
		}
	}
}
