package quorum_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/internal/testkit"
	"github.com/zonalblob/zonalblob/quorum"
)

// The quorum forwards the optional capabilities it can honour across
// replicas and no others: appends and server-side copies would change each
// replica outside the consensus, and a native ReaderAt could mix versions,
// so blob.Append fails with ErrUnsupported and blob.Copy and
// blob.OpenReaderAt fall back to reads and writes through the quorum.
// Store-chosen names are pooled by pool.NewCreator over Prewarm; blob.Create
// without a pool is an IfNotExist write.
func TestCapabilities(t *testing.T) {
	var s blob.Store = newQuorum(t, testkit.Mems(t, 3), testOptions())
	defer s.Close()
	has := map[string]bool{}
	_, has["Prewarmer"] = s.(blob.Prewarmer)
	_, has["Creator"] = s.(blob.Creator)
	_, has["Finalizer"] = s.(blob.Finalizer)
	_, has["Appender"] = s.(blob.Appender)
	_, has["Copier"] = s.(blob.Copier)
	_, has["ReaderAtOpener"] = s.(blob.ReaderAtOpener)
	_, has["Retirer"] = s.(blob.Retirer)
	want := map[string]bool{"Prewarmer": true, "Finalizer": true, "Retirer": true}
	for name, got := range has {
		if got != want[name] {
			t.Errorf("quorum.Store implements %s: %v, want %v", name, got, want[name])
		}
	}
	ctx := context.Background()
	key, err := blob.CreateBytes(ctx, s, "log/", []byte("record"), nil)
	// Finalize is native only where every replica's is (mem:// has none).
	if c := blob.CapabilitiesOf(s); c != (blob.Capabilities{Prewarm: true, Retire: true}) {
		t.Errorf("reported capabilities %+v, want Prewarm and Retire only", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	if b, err := blob.ReadAll(ctx, s, key); err != nil || string(b) != "record" {
		t.Fatalf("created %s: read %q, %v", key, b, err)
	}
	if _, err := blob.Append(ctx, s, key, nil); !errors.Is(err, blob.ErrUnsupported) {
		t.Errorf("Append: %v, want ErrUnsupported", err)
	}
}

// A tombstone wins over an older copy on a replica that missed the delete,
// and once every replica holds it and TombstoneGrace has passed, repair
// removes it from every replica.
func TestTombstoneCollected(t *testing.T) {
	o := testOptions()
	// Every operation is bounded by StragglerTimeout, so it must leave room
	// for a busy machine; the grace then has to exceed twice it.
	o.StragglerTimeout = time.Second
	o.TombstoneGrace = 2100 * time.Millisecond
	c := newCluster(t, 3, 1, o, 9)
	p := c.procs[0]
	ctx := context.Background()
	if err := blob.Put(ctx, p.q, "k", []byte("old"), nil); err != nil {
		t.Fatal(err)
	}
	waitAll(t, c, "k", "old")
	p.faults[2].SetDown(true)
	if err := p.q.Delete(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	p.faults[2].SetDown(false)
	// Replica 2 still holds the old copy: a majority read hears it and
	// still answers NotFound.
	p.faults[0].SetDown(true)
	if _, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), p.q, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("majority read hearing the stale copy: %v, want ErrNotFound", err)
	}
	p.faults[0].SetDown(false)
	deadline := time.Now().Add(time.Minute) // a hang guard, not a measure
	for {
		p.q.AntiEntropy(ctx)
		gone := 0
		for _, m := range c.mems {
			if ok, _ := blob.Exists(ctx, m, "k"); !ok {
				gone++
			}
		}
		if gone == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tombstone not collected: replicas hold %q; %+v", replicaBytes(c, "k"), p.q.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := p.q.Stats(); st.Collected < 3 {
		t.Errorf("collected %d objects, want the 3 tombstones", st.Collected)
	}
	if _, err := p.q.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat after collection: %v, want ErrNotFound", err)
	}
	if page, err := p.q.List(ctx, nil); err != nil || len(page.Objects) != 0 {
		t.Errorf("List after collection: %+v, %v", page, err)
	}
}
