package gcsrapidtest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob/latency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestProfiles(t *testing.T) {
	for _, name := range ProfileNames() {
		p, err := ProfileByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name {
			t.Errorf("ProfileByName(%q).Name = %q", name, p.Name)
		}
		dists := map[string]latency.Dist{
			"CreateAppendable": p.CreateAppendable, "Flush": p.Flush, "Finalize": p.Finalize, "Write": p.Write,
			"UploadStart": p.UploadStart, "WritePerMiB": p.WritePerMiB, "FirstByte": p.FirstByte, "ReadPerMiB": p.ReadPerMiB,
			"Stat": p.Stat, "StatMissing": p.StatMissing, "List": p.List, "Delete": p.Delete,
		}
		for field, d := range dists {
			if name == "zero" {
				if !d.IsZero() {
					t.Errorf("zero profile delays %s", field)
				}
				continue
			}
			if d.IsZero() || d.Source == "" || d.P99 < d.P50 {
				t.Errorf("%s.%s = %+v: every delay needs p50 <= p99 and a source", name, field, d)
			}
		}
	}
	if _, err := ProfileByName("nope"); err == nil || !strings.Contains(err.Error(), "rapid") {
		t.Fatalf("unknown profile: err = %v, want one listing the known names", err)
	}
	r := Rapid()
	// The published figure: create+write+finalize at 80-100 ms.
	if sum := r.CreateAppendable.P50 + r.Finalize.P50; sum < 80*time.Millisecond || sum > 100*time.Millisecond {
		t.Errorf("rapid create+finalize p50 = %v, want 80-100 ms", sum)
	}
}

func TestSeededDelaysReplay(t *testing.T) {
	draw := func() []time.Duration {
		srv, err := NewUnstartedServer(Options{Profile: Rapid(), Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		var out []time.Duration
		for range 5 {
			out = append(out, srv.sampler.Sample(srv.opts.Profile.CreateAppendable))
		}
		return out
	}
	a, b := draw(), draw()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d: %v then %v with the same seed", i, a[i], b[i])
		}
	}
}

func TestCloseWaitsForInFlightStreams(t *testing.T) {
	srv, err := NewUnstartedServer(Options{
		Buckets: []Bucket{{Name: "zonal", Zonal: true}},
		Profile: Profile{FirstByte: latency.Fixed(300 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
	ctx := context.Background()
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := c.Bucket("zonal").Object("slow").NewWriter(ctx)
	w.Append, w.FinalizeOnClose = true, true
	w.Write([]byte("slow read"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	before := srv.Stats()
	done := make(chan error, 1)
	go func() {
		r, err := c.Bucket("zonal").Object("slow").NewReader(ctx)
		if err == nil {
			_, err = io.ReadAll(r)
			r.Close()
		}
		done <- err
	}()
	// The read is in flight once the server holds it in its delay.
	for srv.Stats().Delays == before.Delays {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	// Close returned after the read's handler ended: past its delay, with
	// every byte sent.
	if sent := srv.Stats().BytesRead - before.BytesRead; sent != int64(len("slow read")) {
		t.Fatalf("Close returned with %d bytes of the in-flight read sent, want %d", sent, len("slow read"))
	}
	if err := <-done; err != nil {
		t.Fatalf("read in flight during Close: %v", err)
	}
	srv.Close() // idempotent
}

func TestWriteObjectClientStreaming(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	st := rawStream(t, srv, "WriteObject", "regional")
	first := newMsg("WriteObjectRequest")
	res := first.mutable("write_object_spec").mutable("resource")
	res.set("bucket", bucketPrefix+"regional")
	res.set("name", "ws")
	first.mutable("checksummed_data").set("content", []byte("abc"))
	last := newMsg("WriteObjectRequest")
	last.set("write_offset", int64(3))
	last.mutable("checksummed_data").set("content", []byte("def"))
	last.set("finish_write", true)
	for _, m := range []msg{first, last} {
		if err := st.SendMsg(m.proto()); err != nil {
			t.Fatal(err)
		}
	}
	st.CloseSend()
	resp := newMsg("WriteObjectResponse")
	if err := st.RecvMsg(resp.proto()); err != nil {
		t.Fatal(err)
	}
	if got := resp.sub("resource").i64("size"); got != 6 {
		t.Fatalf("size = %d, want 6", got)
	}
	if st := srv.Stats(); st.BytesWritten != 6 || st.ObjectsCreated != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestUnknownMethod(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	err := exchange(t, rawStream(t, srv, "ComposeObject", ""), "Object", newMsg("ComposeObjectRequest"))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("err = %v, want Unimplemented", err)
	}
}

func TestBucketNames(t *testing.T) {
	srv, err := NewUnstartedServer(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, bad := range []string{"", "ab", "UPPER", "has/slash", strings.Repeat("a", 64)} {
		if err := srv.CreateBucket(bad, false); err == nil {
			t.Errorf("CreateBucket(%q) succeeded", bad)
		}
	}
	if err := srv.CreateBucket("ok-bucket", true); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateBucket("ok-bucket", true); err == nil {
		t.Fatal("duplicate bucket created")
	}
	if _, err := NewUnstartedServer(Options{MaxBytes: -1}); err == nil {
		t.Fatal("negative MaxBytes accepted")
	}
}
