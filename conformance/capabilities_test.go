package conformance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
	"github.com/zonalblob/zonalblob/tiered"
)

// zones starts one gcsrapid emulator per zone, each with one zonal bucket,
// and returns the servers and a fresh Store on each.
func zones(ctx context.Context, t *testing.T, n int) ([]*gcsrapidtest.Server, []blob.Store) {
	t.Helper()
	var srvs []*gcsrapidtest.Server
	var stores []blob.Store
	for i := range n {
		srv := gcsrapidtest.Start(t, gcsrapidtest.Options{Profile: gcsrapidtest.Zero(), Seed: uint64(i + 1)})
		srvs = append(srvs, srv)
		stores = append(stores, testkit.GCSRapid(t, srv, gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}}))
	}
	return srvs, stores
}

// TestCapabilitiesSurviveWrappers walks every wrapper and composite over the
// stores they are used with and checks which optional capabilities each
// serves natively, and that it still implements every optional interface so
// that the blob helpers reach the native one.
func TestCapabilitiesSurviveWrappers(t *testing.T) {
	ctx := context.Background()
	newQuorum := func(t *testing.T) blob.Store {
		_, zs := zones(ctx, t, 3)
		q, err := quorum.New(zs, quorum.Options{W: 2, AntiEntropyInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	newCreator := func(t *testing.T, s blob.Store) blob.Store {
		c, err := pool.NewCreator(s, pool.CreatorOptions{Capacity: 2, MinIdle: 1, LoadConcurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	newTiered := func(t *testing.T, hot blob.Store) blob.Store {
		s, err := tiered.New(hot, testkit.Mem(t), tiered.Options{Manual: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	gcs := func(t *testing.T) blob.Store { _, zs := zones(ctx, t, 1); return zs[0] }
	nativeGCS := blob.Capabilities{Prewarm: true, Create: true, ReaderAt: true, Finalize: true}
	for _, c := range []struct {
		name  string
		store func(t *testing.T) blob.Store
		want  blob.Capabilities
	}{
		{"gcsrapid", gcs, nativeGCS},
		{"fault(gcsrapid)", func(t *testing.T) blob.Store { return fault.Wrap(gcs(t), fault.Options{}) }, nativeGCS},
		{"fault(mem)", func(t *testing.T) blob.Store { return fault.Wrap(testkit.Mem(t), fault.Options{}) }, blob.CapabilitiesOf(testkit.Mem(t))},
		{"pool.Creator(mem)", func(t *testing.T) blob.Store { return newCreator(t, testkit.Mem(t)) },
			func() blob.Capabilities { c := blob.CapabilitiesOf(testkit.Mem(t)); c.Create = true; return c }()},
		{"pool.Creator(gcsrapid)", func(t *testing.T) blob.Store { return newCreator(t, gcs(t)) }, nativeGCS},
		{"quorum(3 x gcsrapid)", newQuorum, blob.Capabilities{Prewarm: true, Finalize: true, Retire: true}},
		{"traced(quorum(3 x gcsrapid))", func(t *testing.T) blob.Store { return blob.NewTracedStore(newQuorum(t), blob.TracingOptions{}) },
			blob.Capabilities{Prewarm: true, Finalize: true, Retire: true}},
		{"pool.Creator(quorum(3 x gcsrapid))", func(t *testing.T) blob.Store { return newCreator(t, newQuorum(t)) },
			blob.Capabilities{Prewarm: true, Create: true, Finalize: true}},
		{"tiered(pool.Creator(quorum(3 x gcsrapid)), mem)", func(t *testing.T) blob.Store { return newTiered(t, newCreator(t, newQuorum(t))) },
			blob.Capabilities{Create: true, Finalize: true}},
		{"tiered(mem, mem)", func(t *testing.T) blob.Store { return newTiered(t, testkit.Mem(t)) }, blob.Capabilities{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.store(t)
			defer s.Close()
			if got := blob.CapabilitiesOf(s); got != c.want {
				t.Errorf("capabilities\n got %+v\nwant %+v", got, c.want)
			}
			// Through the gocloud bridge the Store, and so its capabilities,
			// come back with As.
			var back blob.Store
			if !blob.Bucket(s).As(&back) || blob.CapabilitiesOf(back) != c.want {
				t.Errorf("gocloud bridge lost the store's capabilities")
			}
			checkOptionalWorks(ctx, t, s)
		})
	}
}

// checkOptionalWorks calls each optional capability through the blob helpers
// and checks the result, native or fallback.
func checkOptionalWorks(ctx context.Context, t *testing.T, s blob.Store) {
	t.Helper()
	key, err := blob.CreateBytes(ctx, s, "caps/", []byte("hello"), nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := blob.Finalize(ctx, s, key); err != nil {
		t.Errorf("Finalize: %v", err)
	}
	if err := blob.Finalize(ctx, s, "caps/missing"); err == nil {
		t.Errorf("Finalize of a missing key succeeded")
	}
	ra, err := blob.OpenReaderAt(ctx, s, key)
	if err != nil {
		t.Fatalf("OpenReaderAt: %v", err)
	}
	buf := make([]byte, 3)
	if n, err := ra.ReadAt(buf, 2); n != 3 || string(buf) != "llo" {
		t.Errorf("ReadAt = %q, %v", buf[:n], err)
	}
	ra.Close()
	if err := blob.Copy(ctx, s, "caps/copy", key, nil); err != nil {
		t.Errorf("Copy: %v", err)
	} else if b, err := blob.ReadAll(ctx, s, "caps/copy"); err != nil || string(b) != "hello" {
		t.Errorf("copy reads %q, %v", b, err)
	}
	w, err := blob.Prewarm(ctx, s, "caps/warm", nil)
	if err != nil {
		t.Fatalf("Prewarm: %v", err)
	}
	fmt.Fprint(w, "warm")
	if err := w.Close(); err != nil {
		t.Errorf("prewarmed write: %v", err)
	} else if b, err := blob.ReadAll(ctx, s, "caps/warm"); err != nil || string(b) != "warm" {
		t.Errorf("prewarmed object reads %q, %v", b, err)
	}
}

// TestTieredOverQuorumOfGCSRapidFinalizesWhatItMoves is the README's main
// layout: the compactor must finalize each hot object on every zone before
// it copies it, which the zones' emulators count.
func TestTieredOverQuorumOfGCSRapidFinalizesWhatItMoves(t *testing.T) {
	ctx := context.Background()
	srvs, zs := zones(ctx, t, 3)
	q, err := quorum.New(zs, quorum.Options{W: 2, AntiEntropyInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Pooled creates, as the README's layout has them: the pool's unwritten
	// spares are invisible, so the compactor neither moves nor seals them.
	hot, err := pool.NewCreator(q, pool.CreatorOptions{Capacity: 2, MinIdle: 1, LoadConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Manual: nothing moves until the pass below, which finds every record
	// (and every spare the pool holds) older than After.
	s, err := tiered.New(hot, testkit.Mem(t), tiered.Options{Manual: true, After: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 4
	for i := range n {
		if _, err := blob.CreateBytes(ctx, s, "log/", []byte(fmt.Sprint("record ", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var before []int64
	for _, srv := range srvs {
		before = append(before, srv.Stats().ObjectsFinalized)
	}
	res := s.CompactOnce(ctx)
	if res.Err != nil || res.Moved != n {
		t.Fatalf("CompactOnce = %+v, want %d moved", res, n)
	}
	// Every zone that acknowledged a record holds it, and W=2 of 3 means at
	// least two zones finalize each one.
	var total int64
	for i, srv := range srvs {
		d := srv.Stats().ObjectsFinalized - before[i]
		total += d
		t.Logf("zone %d finalized %d objects", i, d)
	}
	if total < 2*n {
		t.Errorf("zones finalized %d objects in all, want at least %d (every moved record on at least W zones)", total, 2*n)
	}
	for obj, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "log/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if b, err := blob.ReadAll(ctx, s, obj.Key); err != nil || len(b) == 0 {
			t.Errorf("%s after the move reads %q, %v", obj.Key, b, err)
		}
	}
}
