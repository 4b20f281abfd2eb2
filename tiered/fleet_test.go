//go:build unix

package tiered_test

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/tiered"
)

// fleetChildEnv makes the test binary a process of TestFleet: it opens
// the tiered URL the variable holds and writes until it is killed.
const fleetChildEnv = "ZONALBLOB_TIERED_FLEET_CHILD"

// The fleet's lease and clock skew: short, so that the run is, and the
// skew wide enough for a busy machine's scheduling.
const (
	fleetLease = 1500 * time.Millisecond
	fleetSkew  = 200 * time.Millisecond
)

// TestFleet runs three OS processes that open the same tiered:// URL over
// the gcsrapid emulator (both tiers zonal buckets of it), each with its
// compactor on by default and nothing set to keep them apart, writing all
// along. The holder of the compactor lease is stopped with SIGSTOP past its
// lease, and another takes over; resumed with SIGCONT, it holds nothing.
// Then the holder is killed with SIGKILL, and another takes over. Each
// process reports its view of the lease: no process reports holding an
// epoch once another has reported holding a later one, and no two report
// one epoch. Every write a process acknowledged reads back at the end.
func TestFleet(t *testing.T) {
	srv := gcsrapidtest.Start(t, gcsrapidtest.Options{
		Buckets: []gcsrapidtest.Bucket{{Name: "hot", Zonal: true}, {Name: "cold", Zonal: true}},
		Profile: gcsrapidtest.Zero(),
	})
	tierURL := "tiered://?" + url.Values{
		"hot":              {"gcsrapid://hot?endpoint=" + srv.Endpoint()},
		"cold":             {"gcsrapid://cold?endpoint=" + srv.Endpoint()},
		"after":            {"0"},
		"interval":         {"20ms"},
		"pack_max_objects": {"8"},
		"lease":            {fleetLease.String()},
		"max_clock_skew":   {fleetSkew.String()},
	}.Encode()

	type report struct {
		proc  int
		at    time.Time
		held  bool
		epoch uint64
		lost  int64
	}
	var (
		mu      sync.Mutex
		reports []report
		acked   = map[string]string{}
	)
	type child struct {
		cmd  *exec.Cmd
		done chan struct{}
	}
	var children []*child
	start := func(id int) *child {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), fleetChildEnv+"="+tierURL, "ZONALBLOB_TIERED_FLEET_ID="+strconv.Itoa(id))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{cmd: cmd, done: make(chan struct{})}
		go func() {
			defer close(c.done)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 3 && f[0] == "ack":
					mu.Lock()
					acked[f[1]] = f[2]
					mu.Unlock()
				case len(f) == 5 && f[0] == "lease":
					ns, _ := strconv.ParseInt(f[1], 10, 64)
					epoch, _ := strconv.ParseUint(f[3], 10, 64)
					lost, _ := strconv.ParseInt(f[4], 10, 64)
					mu.Lock()
					reports = append(reports, report{proc: id, at: time.Unix(0, ns), held: f[2] == "true", epoch: epoch, lost: lost})
					mu.Unlock()
				}
			}
			cmd.Wait()
		}()
		return c
	}
	for i := range 3 {
		children = append(children, start(i))
	}
	defer func() {
		for _, c := range children {
			c.cmd.Process.Signal(syscall.SIGCONT)
			c.cmd.Process.Kill()
			<-c.done
		}
	}()

	// holderSince waits for a process other than not to report holding
	// an epoch above after, and returns it and its epoch.
	holderSince := func(not int, after uint64, within time.Duration) (int, uint64) {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			mu.Lock()
			for i := len(reports) - 1; i >= 0; i-- {
				r := reports[i]
				if r.held && r.proc != not && r.epoch > after {
					mu.Unlock()
					return r.proc, r.epoch
				}
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no process but %d held an epoch above %d within %v", not, after, within)
		return 0, 0
	}
	// Bounds generous for a busy machine: a takeover is due within a
	// lease, the skew and a third of a lease.
	takeover := 6 * fleetLease
	first, e1 := holderSince(-1, 0, 30*time.Second)
	time.Sleep(fleetLease)

	stopped := time.Now()
	children[first].cmd.Process.Signal(syscall.SIGSTOP)
	second, e2 := holderSince(first, e1, takeover)
	t.Logf("process %d (epoch %d) stopped; process %d took epoch %d after %v", first, e1, second, e2, time.Since(stopped).Round(time.Millisecond))
	time.Sleep(fleetLease)
	children[first].cmd.Process.Signal(syscall.SIGCONT)
	resumed := time.Now()
	time.Sleep(2 * fleetLease)

	killed := time.Now()
	holder, eh := holderSince(-1, e2-1, takeover)
	children[holder].cmd.Process.Kill()
	next, en := holderSince(holder, eh, takeover)
	t.Logf("process %d (epoch %d) killed; process %d took epoch %d after %v", holder, eh, next, en, time.Since(killed).Round(time.Millisecond))
	time.Sleep(fleetLease)
	for _, c := range children {
		c.cmd.Process.Kill()
		<-c.done
	}

	mu.Lock()
	defer mu.Unlock()
	// Safety: holding is ordered by epoch in time, and one epoch is one
	// process's.
	owner := map[uint64]int{}
	var latest uint64
	var latestAt time.Time
	byTime := slices.Clone(reports)
	slices.SortStableFunc(byTime, func(a, b report) int { return a.at.Compare(b.at) })
	for _, r := range byTime {
		if !r.held {
			continue
		}
		if p, ok := owner[r.epoch]; ok && p != r.proc {
			t.Errorf("processes %d and %d both reported holding epoch %d", p, r.proc, r.epoch)
		}
		owner[r.epoch] = r.proc
		if r.epoch < latest {
			t.Errorf("process %d reported holding epoch %d at %v, after epoch %d was held at %v", r.proc, r.epoch, r.at, latest, latestAt)
		}
		if r.epoch > latest {
			latest, latestAt = r.epoch, r.at
		}
	}
	// The process stopped past its lease knows, once resumed, that it
	// lost it.
	lostSeen := false
	for _, r := range reports {
		if r.proc == first && r.at.After(resumed) {
			if r.held && r.epoch == e1 {
				t.Errorf("process %d still held epoch %d at %v, resumed at %v", first, e1, r.at, resumed)
			}
			lostSeen = lostSeen || r.lost > 0
		}
	}
	if !lostSeen {
		t.Errorf("process %d, resumed past its lease, never reported the lease lost", first)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged")
	}

	// Every acknowledged write reads back, through a new process's view.
	u, _ := url.Parse(tierURL)
	q := u.Query()
	q.Set("manual", "true")
	u.RawQuery = q.Encode()
	s, err := blob.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	missing := 0
	for k, v := range acked {
		got, err := blob.ReadAll(ctx, s, k)
		if err != nil || string(got) != v {
			missing++
			if missing <= 5 {
				t.Errorf("%s: read %q, %v; acknowledged %q", k, got, err, v)
			}
		}
	}
	// The holders compacted: packs are in cold.
	cold, err := blob.Open(ctx, "gcsrapid://cold?endpoint="+srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	packs := 0
	for o, err := range blob.All(ctx, cold, &blob.ListOptions{Prefix: markerPrefix + "log/"}) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(o.Key, "-p-") {
			packs++
		}
	}
	if packs == 0 {
		t.Error("no pack was written: no process compacted")
	}
	t.Logf("%d writes acknowledged, %d not read back; %d packs in cold; %d lease reports, last epoch %d", len(acked), missing, packs, len(reports), latest)
}

// TestMain makes the test binary a process of TestFleet when its
// environment says so: it then runs fleetChild and never the tests.
func TestMain(m *testing.M) {
	if raw := os.Getenv(fleetChildEnv); raw != "" {
		fleetChild(raw)
	}
	os.Exit(m.Run())
}

// fleetChild is one process of TestFleet: it writes keys of its own,
// printing each acknowledged one, and reports its view of the compactor
// lease every 50 ms, until killed.
func fleetChild(raw string) {
	id := os.Getenv("ZONALBLOB_TIERED_FLEET_ID")
	ctx := context.Background()
	s, err := blob.Open(ctx, raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet child:", err)
		os.Exit(2)
	}
	ts := s.(*tiered.Store)
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", args...)
		outMu.Unlock()
	}
	go func() {
		for {
			// The time first: a lease held when Stats looks was held
			// then too, even if the process is stopped in between.
			at := time.Now()
			l := ts.Stats().Lease
			say("lease %d %v %d %d", at.UnixNano(), l.Held, l.Epoch, l.Lost)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for n := 0; ; n++ {
		k, v := fmt.Sprintf("p%s/k%06d", id, n), fmt.Sprintf("v%s-%d", id, n)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := blob.Put(wctx, s, k, []byte(v), nil)
		cancel()
		if err == nil {
			say("ack %s %s", k, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
