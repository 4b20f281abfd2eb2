package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
)

// The zones helper is what the quorum and tiered scenarios will stand on:
// three working zonal stores, the first slowed on request. Which zone is slow
// is read from the delay counters (the fault wrapper's and the emulators'),
// not from the clock, which a busy machine makes slow everywhere.
func TestGCSRapidZones(t *testing.T) {
	ctx := context.Background()
	z, err := gcsRapidZones(ctx, testEnv(10), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, slow := range []bool{false, true} {
		stores := z.Stores(slow)
		if len(stores) != 3 {
			t.Fatalf("%d stores", len(stores))
		}
		before := z.Requests()
		for i, s := range stores {
			f, wrapped := s.(*fault.Store)
			if wrapped != (slow && i == 0) {
				t.Fatalf("slow=%v: zone %d wrapped=%v", slow, i, wrapped)
			}
			if _, err := blob.CreateBytes(ctx, s, fmt.Sprintf("zone%d/", i), []byte("x"), nil); err != nil {
				t.Fatalf("zone %d: %v", i, err)
			}
			if !wrapped {
				continue
			}
			// The create's commit waited for one draw of SlowZone.
			if st := f.Stats()[fault.OpCommit]; st.Delays != 1 || st.Delayed <= 0 || st.Failures != 0 {
				t.Errorf("slow zone: commit stats %+v, want one delay and no failure", st)
			}
		}
		if z.Requests() <= before {
			t.Errorf("no requests counted")
		}
	}
	// Nothing but the wrapper slows a zone: the emulators run the zero
	// profile and waited for nothing.
	for i, g := range z.servers {
		if st := g.srv.Stats(); st.Delays != 0 || st.Delayed != 0 {
			t.Errorf("zone %d: the emulator delayed %d requests by %v under the zero profile", i, st.Delays, st.Delayed)
		}
	}
	if z.ProfileLabel(true) == z.ProfileLabel(false) {
		t.Errorf("a slow zone does not show in the profile label")
	}
}

// The emulators' delay counter, which TestGCSRapidZones reads as "nothing
// was delayed", does count the delays of a profile that has them.
func TestGCSRapidZoneDelaysAreCounted(t *testing.T) {
	ctx := context.Background()
	env := testEnv(10)
	env.Zero = false // the rapid profile
	z, err := gcsRapidZones(ctx, env, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	before := z.servers[0].srv.Stats()
	if _, err := blob.CreateBytes(ctx, z.Stores(false)[0], "zone0/", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if after := z.servers[0].srv.Stats(); after.Delays <= before.Delays || after.Delayed <= before.Delayed {
		t.Errorf("a create under the %s profile: delays %d -> %d, total %v -> %v; want both to grow",
			z.Profile, before.Delays, after.Delays, before.Delayed, after.Delayed)
	}
}
