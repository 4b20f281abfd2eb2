package s3expresstest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

func TestFaults(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{Faults: []s3expresstest.Fault{
		{Op: s3expresstest.OpPutObject, Nth: 2, Status: 503},
	}})
	ctx := context.Background()
	put(t, c, "a", "1")
	// The 2nd PutObject answers 503 SlowDown; the SDK retries it.
	put(t, c, "b", "2")
	st := srv.Stats()
	if st.FaultsInjected != 1 || st.PutObject != 3 {
		t.Errorf("FaultsInjected=%d PutObject=%d, want 1 and 3 (the faulted attempt counts)", st.FaultsInjected, st.PutObject)
	}

	noRetry := func(o *s3.Options) { o.RetryMaxAttempts = 1 }
	for _, tc := range []struct {
		status int
		code   string
	}{{503, "SlowDown"}, {500, "InternalError"}, {409, "ConditionalRequestConflict"}} {
		srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpGetObject, Nth: srv.Stats().GetObject + 1, Status: tc.status})
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("a")}, noRetry)
		if apiCode(err) != tc.code {
			t.Errorf("fault %d: got %v, want %s", tc.status, err, tc.code)
		}
		if got := get(t, c, "a"); got != "1" {
			t.Errorf("after a fault: %q", got)
		}
	}
	srv.InjectFault(s3expresstest.Fault{Op: s3expresstest.OpCreateSession, Nth: srv.Stats().CreateSession + 1, Status: 500})
	other := srv.Client(noRetry)
	if _, err := other.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("a")}); err == nil {
		t.Errorf("HeadObject succeeded although CreateSession failed")
	}
}

func TestProfiles(t *testing.T) {
	for _, name := range s3expresstest.ProfileNames() {
		p, err := s3expresstest.ProfileByName(name)
		if err != nil || p.Name != name {
			t.Fatalf("ProfileByName(%q) = %v, %v", name, p.Name, err)
		}
		if name == "zero" {
			continue
		}
		for op, d := range map[string]latency.Dist{"put": p.Put, "get": p.GetFirstByte, "head": p.Head,
			"list": p.List, "delete": p.Delete, "transfer": p.TransferPerMiB} {
			if d.IsZero() || d.P99 < d.P50 || d.Source == "" {
				t.Errorf("%s/%s: %+v needs p50 <= p99 and a source", name, op, d)
			}
		}
	}
	express, standard := s3expresstest.MustProfile("express"), s3expresstest.MustProfile("standard")
	if express.Put.P99 >= 10*time.Millisecond || express.GetFirstByte.P99 >= 10*time.Millisecond {
		t.Errorf("express is documented as single-digit ms: put p99 %v, get p99 %v", express.Put.P99, express.GetFirstByte.P99)
	}
	if r := float64(standard.GetFirstByte.P50) / float64(express.GetFirstByte.P50); r < 5 || r > 12 {
		t.Errorf("standard/express first byte ratio %.1f, want about 10 (AWS: up to 10x)", r)
	}
	if _, err := s3expresstest.ProfileByName("warp"); err == nil {
		t.Errorf("unknown profile accepted")
	}
}

func TestLatencyIsApplied(t *testing.T) {
	const d = 30 * time.Millisecond
	srv, c := newDirServer(t, s3expresstest.Options{Profile: s3expresstest.Profile{
		Put: latency.Fixed(d), GetFirstByte: latency.Fixed(d),
	}})
	// The profile delays what it sets and nothing else: the session and the
	// other operations are free here.
	for _, op := range []struct {
		name string
		call func()
	}{
		{"first PutObject", func() { put(t, c, "warm", "x") }},
		{"PutObject", func() { put(t, c, "a", "x") }},
		{"GetObject", func() { get(t, c, "a") }},
	} {
		before := srv.Stats()
		op.call()
		after := srv.Stats()
		if n, total := after.Delays-before.Delays, after.Delayed-before.Delayed; n != 1 || total != d {
			t.Errorf("%s: %d delays totalling %v, want one of %v", op.name, n, total, d)
		}
	}
	if _, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Delays != 3 || st.Delayed != 3*d {
		t.Errorf("after a HeadObject, which the profile leaves free: %d delays totalling %v, want 3 and %v", st.Delays, st.Delayed, 3*d)
	}
}

func TestCopyObject(t *testing.T) {
	_, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	src, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("src key"),
		Body: strings.NewReader("payload"), ContentType: aws.String("text/x"), Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("dst"),
		CopySource: aws.String(dirBucket + "/src%20key")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.CopyObjectResult.ETag) == aws.ToString(src.ETag) {
		t.Errorf("copy kept the source's random ETag")
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("dst")})
	if err != nil || aws.ToString(head.ContentType) != "text/x" || head.Metadata["k"] != "v" {
		t.Errorf("copied attributes: %v %v %v", aws.ToString(head.ContentType), head.Metadata, err)
	}
	if got := get(t, c, "dst"); got != "payload" {
		t.Errorf("copied content %q", got)
	}
}
