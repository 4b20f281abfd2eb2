package driver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/driver"
)

// sdkError stands in for a backend's own error type.
type sdkError struct{ code int }

func (e *sdkError) Error() string { return fmt.Sprintf("sdk error %d", e.code) }

func TestErrorUnwrapsToSentinelAndCause(t *testing.T) {
	cause := &sdkError{404}
	err := driver.WrapError("stat", "k", cause, func(error) error { return blob.ErrNotFound })
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("errors.Is(ErrNotFound) false for %v", err)
	}
	var se *sdkError
	if !errors.As(err, &se) || se.code != 404 {
		t.Errorf("errors.As(*sdkError) failed for %v", err)
	}
	var be *blob.Error
	if !errors.As(err, &be) || be.Op != "stat" || be.Key != "k" {
		t.Errorf("errors.As(*blob.Error) = %+v", be)
	}
	if want := `blob: stat "k": object not found: sdk error 404`; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if driver.WrapError("x", "k", nil, nil) != nil {
		t.Error("WrapError(nil) != nil")
	}
	canceled := driver.WrapError("read", "k", context.Canceled, func(error) error { return blob.ErrNotFound })
	if errors.Is(canceled, blob.ErrNotFound) || !errors.Is(canceled, context.Canceled) {
		t.Errorf("context errors must not be classified: %v", canceled)
	}
}

func TestQuery(t *testing.T) {
	u, _ := url.Parse("x://b?pool_size=8&age=5s&on=true&replica=a&replica=b&bad=zz")
	q := driver.NewQuery(u)
	if got := q.Int("pool_size", 1); got != 8 {
		t.Errorf("Int = %d", got)
	}
	if got := q.Duration("age", 0); got != 5*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if got := q.Bool("on", false); !got {
		t.Errorf("Bool = %v", got)
	}
	if got := q.Strings("replica"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Strings = %v", got)
	}
	if got := q.Int("missing", 7); got != 7 {
		t.Errorf("default = %d", got)
	}
	q.Int("bad", 0)
	err := q.Err()
	if err == nil || !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), `"zz" is not an integer`) {
		t.Errorf("Err = %v", err)
	}
	u2, _ := url.Parse("x://b?known=1&typo=2")
	q2 := driver.NewQuery(u2)
	q2.String("known", "")
	if err := q2.Err(); err == nil || !strings.Contains(err.Error(), "typo") || !strings.Contains(err.Error(), "known") {
		t.Errorf("unknown parameter error = %v", err)
	}
}

func TestQuerySize(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int64
		ok   bool
	}{
		{"8388608", 8 << 20, true},
		{"8MiB", 8 << 20, true},
		{"64KiB", 64 << 10, true},
		{"2GiB", 2 << 30, true},
		{"0", 0, true},
		{"8MB", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"lots", 0, false},
		{"9999999999999GiB", 0, false},
	} {
		u, _ := url.Parse("x://b?size=" + url.QueryEscape(c.v))
		q := driver.NewQuery(u)
		got := q.Size("size", 7)
		err := q.Err()
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("Size(%q) = %d, %v; want %d", c.v, got, err, c.want)
		}
		if !c.ok && (err == nil || !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "size") || got != 7) {
			t.Errorf("Size(%q) = %d, %v; want the default and an error naming the parameter", c.v, got, err)
		}
	}
	u, _ := url.Parse("x://b")
	if got := driver.NewQuery(u).Size("size", 7); got != 7 {
		t.Errorf("absent Size = %d, want the default", got)
	}
}

func TestPaginate(t *testing.T) {
	var objs []blob.ListObject
	for _, k := range []string{"b", "a/2", "a/1", "c", "a-", "a/x/y"} {
		objs = append(objs, blob.ListObject{Key: k})
	}
	var got []string
	opts := &blob.ListOptions{Delimiter: "/", PageSize: 2}
	for {
		p, err := driver.Paginate(objs, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Objects {
			got = append(got, o.Key)
		}
		if p.NextPageToken == "" {
			break
		}
		opts.PageToken = p.NextPageToken
	}
	if want := []string{"a-", "a/", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Paginate = %q, want %q", got, want)
	}
	if _, err := driver.Paginate(objs, &blob.ListOptions{PageToken: "!!"}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("bad token: %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	var l driver.Lifecycle
	if err := l.Check(driver.OpStat, "k"); err != nil {
		t.Fatalf("open store: %v", err)
	}
	if err := l.Check(driver.OpStat, "a\x00"); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("bad key: %v", err)
	}
	if !l.Close() || l.Close() {
		t.Error("Close must report true once, then false")
	}
	for _, err := range []error{l.Check(driver.OpWrite, "k"), l.CheckOpen(driver.OpList, "")} {
		var be *blob.Error
		if !errors.Is(err, blob.ErrClosed) || !errors.As(err, &be) || be.Op == "" {
			t.Errorf("after Close: %v", err)
		}
	}
	// A closed store reports ErrClosed before it looks at the key.
	if err := l.Check(driver.OpStat, ""); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("closed store, bad key: %v", err)
	}
}

type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (failingBody) Close() error               { return nil }

func TestReader(t *testing.T) {
	calls := 0
	attrs := func() *blob.Attributes { calls++; return &blob.Attributes{Key: "k", Size: 3} }
	r := driver.NewReader("k", io.NopCloser(strings.NewReader("abc")), attrs, nil)
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "abc" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}
	if r.Attributes().Size != 3 || r.Attributes().Key != "k" || calls != 1 {
		t.Errorf("attributes built %d times: %+v", calls, r.Attributes())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	cause := &sdkError{404}
	r = driver.NewReader("k", failingBody{cause}, attrs, func(error) error { return blob.ErrNotFound })
	_, err = r.Read(make([]byte, 1))
	var se *sdkError
	if !errors.Is(err, blob.ErrNotFound) || !errors.As(err, &se) {
		t.Errorf("read error not classified and wrapped: %v", err)
	}
	e := driver.EmptyReader(&blob.Attributes{Key: "k", Size: 9})
	if n, err := e.Read(make([]byte, 1)); n != 0 || err != io.EOF || e.Attributes().Size != 9 {
		t.Errorf("EmptyReader: %d, %v, %+v", n, err, e.Attributes())
	}
}

func TestClassifyWrite(t *testing.T) {
	pre := func(error) error { return blob.ErrPrecondition }
	nf := func(error) error { return blob.ErrNotFound }
	cause := errors.New("backend")
	for _, c := range []struct {
		classify func(error) error
		cond     blob.Condition
		want     error
	}{
		{pre, blob.IfNotExist(), blob.ErrExists},
		{pre, blob.IfGenerationMatch("1"), blob.ErrPrecondition},
		{pre, blob.Condition{}, blob.ErrPrecondition},
		{nf, blob.IfGenerationMatch("1"), blob.ErrPrecondition},
		{nf, blob.IfNotExist(), blob.ErrNotFound},
		{nf, blob.Condition{}, blob.ErrNotFound},
	} {
		if got := driver.ClassifyWrite(c.classify, c.cond)(cause); got != c.want {
			t.Errorf("%v: %v, want %v", c.cond, got, c.want)
		}
	}
}

func TestCheckList(t *testing.T) {
	var l driver.Lifecycle
	if o, err := l.CheckList(nil); err != nil || o.Prefix != "" {
		t.Errorf("nil options: %+v, %v", o, err)
	}
	if _, err := l.CheckList(&blob.ListOptions{PageSize: -1}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Errorf("negative page size: %v", err)
	}
	l.Close()
	if _, err := l.CheckList(&blob.ListOptions{PageSize: -1}); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("closed store: %v", err)
	}
}

// Tasks: Wait waits for every task Go took, and once it has begun Go takes
// none (the caller decides what to do instead), whatever races them.
func TestTasks(t *testing.T) {
	var tasks driver.Tasks
	release := make(chan struct{})
	var done atomic.Int64
	for range 3 {
		if !tasks.Go(func() { <-release; done.Add(1) }) {
			t.Fatal("Go refused a task before Wait")
		}
	}
	waited := make(chan struct{})
	go func() { tasks.Wait(); close(waited) }()
	// Go refuses once Wait has begun (Stop is its first step).
	for tasks.Go(func() { done.Add(100) }) {
		done.Add(-100) // taken before Wait began: undo its count when it runs
		runtime.Gosched()
	}
	select {
	case <-waited:
		t.Fatal("Wait returned with tasks running")
	default:
	}
	close(release)
	<-waited
	if n := done.Load(); n != 3 {
		t.Errorf("%d counted after Wait, want the 3 tasks taken (and nothing of the refused ones)", n)
	}
	if tasks.Go(func() {}) {
		t.Error("Go took a task after Wait")
	}

	// Many Go calls racing Wait: each is either waited for or refused.
	for range 20 {
		var tasks driver.Tasks
		var took, ran atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					if tasks.Go(func() { ran.Add(1) }) {
						took.Add(1)
					}
				}
			})
		}
		tasks.Wait()
		ranAtWait := ran.Load()
		wg.Wait()
		if ranAtWait != took.Load() || ran.Load() != took.Load() {
			t.Fatalf("took %d tasks, %d ran by Wait's return, %d in all", took.Load(), ranAtWait, ran.Load())
		}
	}
}
