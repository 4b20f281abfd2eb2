package gcsrapid_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/gcsrapid"
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
)

// writerURLEnv, when set in the environment of this test binary, makes it a
// writer process instead of running tests: it opens the URL and creates
// records under log/ until killed, printing "ACK key record" for each
// acknowledged one.
const writerURLEnv = "GCSRAPID_TAIL_WRITER_URL"

func TestMain(m *testing.M) {
	if u := os.Getenv(writerURLEnv); u != "" {
		os.Exit(writerProcess(u))
	}
	os.Exit(m.Run())
}

func writerProcess(url string) int {
	ctx := context.Background()
	s, err := blob.Open(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		record := fmt.Sprintf("process %d record %d", os.Getpid(), i)
		key, err := blob.CreateBytes(ctx, s, "log/", []byte(record), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			continue
		}
		fmt.Fprintf(out, "ACK %s %s\n", key, record)
		out.Flush()
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTailingConsumerWithAKilledWriter runs writers on the pool, one of them
// a separate process killed with SIGKILL mid-run (leaving its spares and
// whatever it had in flight), and a consumer that follows the documented
// reading rule for Create names: list the prefix, read what it has not seen,
// never trust name order. Every acknowledged record must reach the consumer
// intact, no empty record may be served, and once the surviving stores have
// swept after the window and closed, nothing but written records may be left
// in the bucket.
func TestTailingConsumerWithAKilledWriter(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, gcsrapidtest.Zero())
	const bucket = "tail"
	if err := srv.CreateBucket(bucket, true); err != nil {
		t.Fatal(err)
	}
	opts := gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: 16, MinIdle: 4, MaxItemAge: 2 * time.Second, WriteTimeout: 2 * time.Second, GraceWindow: 10 * time.Second, ClockSkew: 200 * time.Millisecond}, SweepInterval: 50 * time.Millisecond, SweepRate: 1000}
	open := func(o gcsrapid.Options) *gcsrapid.Store {
		c, err := srv.Client(ctx, storage.WithDisabledClientMetrics())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := gcsrapid.New(ctx, c, bucket, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	var (
		mu    sync.Mutex
		acked = map[string]string{}
	)
	ack := func(key, record string) {
		mu.Lock()
		acked[key] = record
		mu.Unlock()
	}

	// The consumer.
	consumer := open(gcsrapid.Options{CreatorOptions: pool.CreatorOptions{Capacity: -1}})
	defer consumer.Close()
	seen := map[string]string{}
	var empty []string
	poll := func() {
		for o, err := range blob.All(ctx, consumer, &blob.ListOptions{Prefix: "log/"}) {
			if err != nil {
				t.Error(err)
				return
			}
			if _, ok := seen[o.Key]; ok {
				continue
			}
			data, err := blob.ReadAll(ctx, consumer, o.Key)
			if err != nil {
				t.Errorf("read %s: %v", o.Key, err)
				continue
			}
			if len(data) == 0 {
				empty = append(empty, o.Key)
			}
			seen[o.Key] = string(data)
		}
	}
	stop, consumed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(consumed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			poll()
		}
	}()

	// The writer process, killed after 100 acknowledged records.
	url := fmt.Sprintf("gcsrapid://%s?endpoint=%s&pool_size=%d&pool_min_idle=%d&max_item_age=%v&write_timeout=%v&clock_skew=%v&grace_window=%v",
		bucket, srv.Endpoint(), opts.Capacity, 16, opts.MaxItemAge, opts.WriteTimeout, opts.ClockSkew, opts.GraceWindow)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), writerURLEnv+"="+url)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed, ended := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 3)
			if len(f) != 3 || f[0] != "ACK" {
				continue
			}
			ack(f[1], f[2])
			if n++; n == 100 {
				cmd.Process.Signal(syscall.SIGKILL)
				killed <- struct{}{}
			}
		}
	}()

	// The surviving writers, in this process.
	const survivors, perWriter = 3, 150
	stores := make([]*gcsrapid.Store, survivors)
	for w := range stores {
		stores[w] = open(opts)
	}
	var wg sync.WaitGroup
	for w, s := range stores {
		wg.Go(func() {
			for i := range perWriter {
				record := fmt.Sprintf("writer %d record %d", w, i)
				key, err := blob.CreateBytes(ctx, s, "log/", []byte(record), nil)
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				ack(key, record)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	case <-ended:
		select {
		case <-killed:
		default:
			cmd.Wait()
			t.Fatalf("the writer process ended before it acknowledged 100 records: %s", stderr.String())
		}
	}
	cmd.Wait()
	dead := time.Now()

	// Every name the killed process made is older than dead. Wait until
	// each such object left on the service is one the consumer sees (a
	// written record): the survivors have swept the killed writer's
	// unwritten ones once they were past the window, and their own pools
	// have discarded their aged spares.
	waitFor(func() bool {
		visible := map[string]bool{}
		for o, err := range blob.All(ctx, consumer, &blob.ListOptions{Prefix: "log/"}) {
			if err != nil {
				return false
			}
			visible[o.Key] = true
		}
		for _, k := range rawNames(ctx, t, srv, bucket) {
			if ts, ok := blob.NameTime(k); ok && ts.Before(dead) && !visible[k] {
				return false
			}
		}
		return true
	})
	var swept int64
	for _, s := range stores {
		swept += s.Stats().Swept
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-consumed
	poll()

	var lost []string
	for k, rec := range acked {
		if seen[k] != rec {
			lost = append(lost, k)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d acknowledged records lost or altered: %q", len(lost), len(acked), lost)
	}
	if len(empty) > 0 {
		t.Errorf("%d empty records served: %q", len(empty), empty)
	}
	var residue []string
	for _, k := range rawNames(ctx, t, srv, bucket) {
		if _, ok := seen[k]; !ok {
			residue = append(residue, k)
		}
	}
	t.Logf("%d records acknowledged, %d seen, %d unwritten objects of the killed writer swept", len(acked), len(seen), swept)
	if len(residue) > 0 {
		t.Errorf("%d unwritten objects left after the window: %q", len(residue), residue)
	}
	if swept == 0 {
		t.Errorf("nothing swept: the killed writer left no spares, so the test proves nothing")
	}
}
