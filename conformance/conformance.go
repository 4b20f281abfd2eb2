// Package conformance is the one test suite every blob.Store must pass: the
// drivers, the wrappers, the quorum and the tiered store.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewStore: func(ctx context.Context, t *testing.T) blob.Store { ... },
//			Caps:     conformance.Caps{GenerationPreconditions: true},
//		})
//	}
//
// A harness makes a fresh, empty store for every test. Optional interfaces
// (appends, copies, finalizing) are discovered from the store with
// blob.CapabilitiesOf, so wrappers are tested for what they pass through;
// Caps declares only what discovery cannot tell. Capability flags name
// what a backend lacks; a capability that is absent is still checked for
// refusing clearly (a store that cannot enforce a precondition must fail the
// write, never ignore it).
package conformance

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

// Harness makes stores for the suite.
type Harness struct {
	// NewStore returns a new, empty store. The suite closes it.
	NewStore func(ctx context.Context, t *testing.T) blob.Store
	Caps     Caps
	// OpenMissingBucket, if set, opens the same kind of store over a bucket
	// that does not exist: the open, or else every call, must fail with
	// blob.ErrBucketNotFound, never blob.ErrNotFound.
	OpenMissingBucket func(ctx context.Context, t *testing.T) (blob.Store, error)

	// opened is when Run asked for the store under test: no name the store
	// makes, even one made ahead of need for a pool, is older.
	opened time.Time
}

// Caps are the capabilities that vary between backends.
type Caps struct {
	// GenerationPreconditions: IfGenerationMatch on writes, deletes,
	// appends (where the store appends) and copies' destinations is
	// enforced. Without it, the suite checks that such operations are
	// refused, and copies before any I/O.
	GenerationPreconditions bool
	// NonSlashDelimiters: List groups by delimiters other than "/".
	NonSlashDelimiters bool
	// FileTree: the store is a directory tree, so a key cannot also be a
	// directory of other keys ("a" and "a/b") and "." and ".." are not keys.
	FileTree bool
	// LargeObjectSize is the size of the large round trip (default 8 MiB + 1).
	LargeObjectSize int
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness, s blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"RangeReads", testRangeReads},
		{"Attributes", testAttributes},
		{"ContentMD5", testContentMD5},
		{"Overwrite", testOverwrite},
		{"IfNotExist", testIfNotExist},
		{"IfNotExistRace", testIfNotExistRace},
		{"GenerationPreconditions", testGenerationPreconditions},
		{"EmptyGenerationRefused", testEmptyGenerationRefused},
		{"DeleteConditions", testDeleteConditions},
		{"WrittenGeneration", testWrittenGeneration},
		{"Missing", testMissing},
		{"InvalidKeys", testInvalidKeys},
		{"WeirdKeys", testWeirdKeys},
		{"KeysRoundTripOrRefused", testKeysRoundTripOrRefused},
		{"ListOptionsChecked", testListOptionsChecked},
		{"ListOrder", testListOrder},
		{"ListPrefixDelimiter", testListPrefixDelimiter},
		{"ListStartAfter", testListStartAfter},
		{"ListPaging", testListPaging},
		{"ListPagingWithChanges", testListPagingWithChanges},
		{"CanceledWrite", testCanceledWrite},
		{"ConcurrentReadersWriters", testConcurrentReadersWriters},
		{"Create", testCreate},
		{"CreateConcurrent", testCreateConcurrent},
		{"Copy", testCopy},
		{"CopyConditions", testCopyConditions},
		{"Append", testAppend},
		{"AppendConditions", testAppendConditions},
		{"ReaderAt", testReaderAt},
		{"Retire", testRetire},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			h.opened = time.Now()
			s := h.NewStore(ctx, t)
			if s == nil {
				t.Fatal("harness returned a nil store")
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					s.Close()
				}
			})
			if tc.name == "Closed" {
				closed = true
			}
			tc.fn(t, h, s)
		})
	}
	t.Run("MissingBucket", func(t *testing.T) { testMissingBucket(t, h) })
}

// testMissingBucket: a missing bucket is told from a missing object.
func testMissingBucket(t *testing.T, h Harness) {
	if h.OpenMissingBucket == nil {
		t.Skip("the harness cannot open a missing bucket")
	}
	ctx := ctxT(t)
	check := func(op string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s on a missing bucket succeeded", op)
		case !errors.Is(err, blob.ErrBucketNotFound):
			t.Errorf("%s on a missing bucket: %v, want ErrBucketNotFound", op, err)
		case errors.Is(err, blob.ErrNotFound):
			t.Errorf("%s on a missing bucket: %v is also ErrNotFound", op, err)
		case blob.GocloudErrorCode(err).String() != "NotFound":
			t.Errorf("%s on a missing bucket: gocloud code %v", op, blob.GocloudErrorCode(err))
		}
	}
	s, err := h.OpenMissingBucket(ctx, t)
	if err != nil {
		check("open", err)
		return
	}
	defer s.Close()
	check("write", blob.Put(ctx, s, "k", []byte("v"), nil))
	_, err = s.Stat(ctx, "k")
	check("stat", err)
	_, err = blob.ReadAll(ctx, s, "k")
	check("read", err)
	_, err = s.List(ctx, nil)
	check("list", err)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustPut(t *testing.T, s blob.Store, key string, data []byte, opts *blob.WriterOptions) {
	t.Helper()
	if err := blob.Put(ctxT(t), s, key, data, opts); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustRead(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	b, err := blob.ReadAll(ctxT(t), s, key)
	if err != nil {
		t.Fatalf("ReadAll(%q): %v", key, err)
	}
	return b
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
		return
	}
	var be *blob.Error
	if !errors.As(err, &be) {
		t.Errorf("%s: error %v is not a *blob.Error", what, err)
	}
}

func testRoundTrip(t *testing.T, h Harness, s blob.Store) {
	large := h.Caps.LargeObjectSize
	if large == 0 {
		large = 8<<20 + 1
	}
	for _, n := range []int{0, 1, 10, 1 << 10, 256<<10 + 3, large} {
		key := fmt.Sprintf("rt/%d", n)
		data := payload(uint64(n), n)
		mustPut(t, s, key, data, nil)
		got := mustRead(t, s, key)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes, want %d identical bytes", key, len(got), len(data))
		}
		a, err := s.Stat(ctxT(t), key)
		if err != nil {
			t.Fatalf("Stat(%s): %v", key, err)
		}
		if a.Size != int64(n) {
			t.Errorf("Stat(%s).Size = %d, want %d", key, a.Size, n)
		}
		if a.Key != key {
			t.Errorf("Stat(%s).Key = %q", key, a.Key)
		}
		if sum := md5.Sum(data); len(a.MD5) > 0 && !bytes.Equal(a.MD5, sum[:]) {
			t.Errorf("Stat(%s).MD5 = %x, want %x", key, a.MD5, sum)
		}
		if a.ModTime.IsZero() {
			t.Errorf("Stat(%s).ModTime is zero", key)
		}
	}
}

func testRangeReads(t *testing.T, h Harness, s blob.Store) {
	const n = 1000
	data := payload(1, n)
	mustPut(t, s, "range", data, nil)
	cases := []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{0, n, data},
		{0, 1, data[:1]},
		{0, 0, nil},
		{1, 10, data[1:11]},
		{n - 1, 1, data[n-1:]},
		{n - 1, -1, data[n-1:]},
		{n - 1, 10, data[n-1:]},
		{500, n, data[500:]},
		{n, -1, nil},
		{n, 5, nil},
		{n + 100, -1, nil},
	}
	for _, c := range cases {
		r, err := s.NewRangeReader(ctxT(t), "range", c.off, c.length)
		if err != nil {
			t.Errorf("NewRangeReader(%d, %d): %v", c.off, c.length, err)
			continue
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Errorf("read (%d, %d): %v", c.off, c.length, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("read (%d, %d): got %d bytes, want %d", c.off, c.length, len(got), len(c.want))
		}
		if a := r.Attributes(); a == nil || a.Size != n {
			t.Errorf("read (%d, %d): Attributes().Size is not the object size %d: %+v", c.off, c.length, n, a)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if r, err := s.NewRangeReader(ctxT(t), "range", -1, 10); err == nil {
		r.Close()
		t.Errorf("negative offset: no error")
	}
}

func testAttributes(t *testing.T, h Harness, s blob.Store) {
	opts := &blob.WriterOptions{
		ContentType:        "application/x-zonal",
		CacheControl:       "no-cache",
		ContentDisposition: "attachment; filename=seg.log",
		ContentEncoding:    "identity",
		ContentLanguage:    "en",
		Metadata:           map[string]string{"segment": "42", "owner": "log-a"},
	}
	data := []byte("attributes")
	mustPut(t, s, "attrs", data, opts)
	a, err := s.Stat(ctxT(t), "attrs")
	if err != nil {
		t.Fatal(err)
	}
	check := func(field, got, want string) {
		if got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}
	check("ContentType", a.ContentType, opts.ContentType)
	check("CacheControl", a.CacheControl, opts.CacheControl)
	check("ContentDisposition", a.ContentDisposition, opts.ContentDisposition)
	check("ContentEncoding", a.ContentEncoding, opts.ContentEncoding)
	check("ContentLanguage", a.ContentLanguage, opts.ContentLanguage)
	if len(a.Metadata) != len(opts.Metadata) {
		t.Errorf("Metadata = %v, want %v", a.Metadata, opts.Metadata)
	}
	for k, v := range opts.Metadata {
		if a.Metadata[k] != v {
			t.Errorf("Metadata[%q] = %q, want %q", k, a.Metadata[k], v)
		}
	}
	if a.Generation == "" {
		t.Errorf("Generation is empty")
	}
	r, err := s.NewRangeReader(ctxT(t), "attrs", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ra := r.Attributes(); ra.ContentType != opts.ContentType || ra.Size != int64(len(data)) {
		t.Errorf("reader attributes = %+v, want content type %q and size %d", ra, opts.ContentType, len(data))
	}
}

func testContentMD5(t *testing.T, h Harness, s blob.Store) {
	data := []byte("checked bytes")
	sum := md5.Sum(data)
	mustPut(t, s, "md5/good", data, &blob.WriterOptions{ContentMD5: sum[:]})
	bad := md5.Sum([]byte("other bytes"))
	if err := blob.Put(ctxT(t), s, "md5/bad", data, &blob.WriterOptions{ContentMD5: bad[:]}); err == nil {
		t.Errorf("Put with a wrong ContentMD5 succeeded")
	}
	if ok, err := blob.Exists(ctxT(t), s, "md5/bad"); err != nil || ok {
		t.Errorf("after a failed MD5 check the object exists=%v (err %v), want nothing committed", ok, err)
	}
}

func testOverwrite(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "ow", []byte("first version, longer"), nil)
	mustPut(t, s, "ow", []byte("second"), &blob.WriterOptions{Metadata: map[string]string{"v": "2"}})
	if got := mustRead(t, s, "ow"); string(got) != "second" {
		t.Errorf("read %q after overwrite, want %q", got, "second")
	}
	a, err := s.Stat(ctxT(t), "ow")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 6 || a.Metadata["v"] != "2" {
		t.Errorf("attributes after overwrite: size %d metadata %v", a.Size, a.Metadata)
	}
}

func testIfNotExist(t *testing.T, h Harness, s blob.Store) {
	ine := &blob.WriterOptions{If: blob.IfNotExist()}
	mustPut(t, s, "ine", []byte("winner"), ine)
	err := blob.Put(ctxT(t), s, "ine", []byte("loser"), ine)
	wantErr(t, "second IfNotExist Put", err, blob.ErrExists)
	if got := mustRead(t, s, "ine"); string(got) != "winner" {
		t.Errorf("content after losing IfNotExist = %q, want %q", got, "winner")
	}
}

func testIfNotExistRace(t *testing.T, h Harness, s blob.Store) {
	const writers = 16
	for round := range 3 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		start := make(chan struct{})
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = blob.Put(ctxT(t), s, key, fmt.Appendf(nil, "writer %d", i), &blob.WriterOptions{If: blob.IfNotExist()})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%s: writers %d and %d both won", key, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, blob.ErrExists):
				t.Errorf("%s: writer %d: %v, want ErrExists", key, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer won", key)
		}
		if got, want := string(mustRead(t, s, key)), fmt.Sprintf("writer %d", winner); got != want {
			t.Errorf("%s: content %q, want the winner's %q", key, got, want)
		}
	}
}

func testGenerationPreconditions(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "gen", []byte("v1"), nil)
	a1, err := s.Stat(ctxT(t), "gen")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Caps.GenerationPreconditions {
		err := blob.Put(ctxT(t), s, "gen", []byte("v2"), &blob.WriterOptions{If: blob.IfGenerationMatch("not-" + a1.Generation)})
		if err == nil {
			t.Fatalf("store without generation preconditions accepted (and ignored) IfGenerationMatch")
		}
		if got := mustRead(t, s, "gen"); string(got) != "v1" {
			t.Errorf("refused conditional write changed the object to %q", got)
		}
		if err := s.Delete(ctxT(t), "gen", &blob.DeleteOptions{If: blob.IfGenerationMatch("not-" + a1.Generation)}); err == nil {
			t.Errorf("store without generation preconditions accepted (and ignored) a Delete with IfGenerationMatch")
		}
		if ok, err := blob.Exists(ctxT(t), s, "gen"); !ok || err != nil {
			t.Errorf("refused conditional delete: exists=%v err=%v", ok, err)
		}
		return
	}
	mustPut(t, s, "gen", []byte("v2"), &blob.WriterOptions{If: blob.IfGenerationMatch(a1.Generation)})
	a2, err := s.Stat(ctxT(t), "gen")
	if err != nil {
		t.Fatal(err)
	}
	if a2.Generation == a1.Generation {
		t.Fatalf("generation did not change on overwrite: %q", a2.Generation)
	}
	err = blob.Put(ctxT(t), s, "gen", []byte("v3"), &blob.WriterOptions{If: blob.IfGenerationMatch(a1.Generation)})
	wantErr(t, "write with a stale generation", err, blob.ErrPrecondition)
	if got := mustRead(t, s, "gen"); string(got) != "v2" {
		t.Errorf("content %q after failed conditional write, want v2", got)
	}
	err = s.Delete(ctxT(t), "gen", &blob.DeleteOptions{If: blob.IfGenerationMatch(a1.Generation)})
	wantErr(t, "delete with a stale generation", err, blob.ErrPrecondition)
	if err := s.Delete(ctxT(t), "gen", &blob.DeleteOptions{If: blob.IfGenerationMatch(a2.Generation)}); err != nil {
		t.Fatalf("delete with the current generation: %v", err)
	}
	err = blob.Put(ctxT(t), s, "gen", []byte("v4"), &blob.WriterOptions{If: blob.IfGenerationMatch(a2.Generation)})
	wantErr(t, "conditional write of a deleted object", err, blob.ErrPrecondition)
	if ok, _ := blob.Exists(ctxT(t), s, "gen"); ok {
		t.Errorf("failed conditional write created the object")
	}
}

// testWrittenGeneration checks what a writer reports of the version it
// wrote (blob.WrittenGeneration), through every way the store opens writers:
// nothing before Close or after a Close that failed, and, after a Close that
// returned nil, exactly the generation Stat reports, which a conditional
// Delete accepts. A caller deletes on the strength of the report without a
// Stat, so a wrong one would fail its delete or, worse, match another
// version. Reporting is optional: a store whose writers report nothing passes.
func testWrittenGeneration(t *testing.T, h Harness, s blob.Store) {
	large := h.Caps.LargeObjectSize
	if large == 0 {
		large = 8<<20 + 1
	}
	caps := blob.CapabilitiesOf(s)
	newWriter := func(opts *blob.WriterOptions) func(ctx context.Context, key string) (string, blob.Writer, error) {
		return func(ctx context.Context, key string) (string, blob.Writer, error) {
			w, err := s.NewWriter(ctx, key, opts)
			return key, w, err
		}
	}
	prewarm := func(ctx context.Context, key string) (string, blob.Writer, error) {
		w, err := blob.Prewarm(ctx, s, key, nil)
		return key, w, err
	}
	create := func(ctx context.Context, key string) (string, blob.Writer, error) {
		return blob.Create(ctx, s, key+"/", nil)
	}
	type write struct {
		name  string
		open  func(ctx context.Context, key string) (string, blob.Writer, error)
		size  int
		chunk int // bytes per Write call; 0 for one call
		skip  bool
	}
	mustPut(t, s, "wg/generationmatch", []byte("v1"), nil)
	var opts *blob.WriterOptions
	if h.Caps.GenerationPreconditions {
		a, err := s.Stat(ctxT(t), "wg/generationmatch")
		if err != nil {
			t.Fatal(err)
		}
		opts = &blob.WriterOptions{If: blob.IfGenerationMatch(a.Generation)}
	}
	writes := []write{
		{name: "unconditional", open: newWriter(nil), size: 10},
		{name: "empty", open: newWriter(nil)},
		{name: "ifnotexist", open: newWriter(&blob.WriterOptions{If: blob.IfNotExist()}), size: 1000},
		{name: "generationmatch", open: newWriter(opts), size: 100, skip: opts == nil},
		{name: "streamed", open: newWriter(nil), size: large, chunk: 1<<20 - 3},
		{name: "prewarm", open: prewarm, size: 10, skip: !caps.Prewarm},
		{name: "prewarm-empty", open: prewarm, skip: !caps.Prewarm},
		{name: "prewarm-streamed", open: prewarm, size: large, chunk: 1<<20 - 3, skip: !caps.Prewarm},
		{name: "create", open: create, size: 10, skip: !caps.Create},
	}
	reported := 0
	for i, wr := range writes {
		if wr.skip {
			continue
		}
		t.Run(wr.name, func(t *testing.T) {
			ctx := ctxT(t)
			key, w, err := wr.open(ctx, "wg/"+wr.name)
			if err != nil {
				t.Fatal(err)
			}
			if g, ok := blob.WrittenGeneration(w); ok {
				t.Errorf("a writer not yet written to reports generation %q", g)
			}
			data := payload(uint64(100+i), wr.size)
			for rest := data; len(rest) > 0; {
				n := len(rest)
				if wr.chunk > 0 {
					n = min(n, wr.chunk)
				}
				if _, err := w.Write(rest[:n]); err != nil {
					t.Fatalf("Write: %v", err)
				}
				rest = rest[n:]
			}
			if g, ok := blob.WrittenGeneration(w); ok {
				t.Errorf("a writer not yet closed reports generation %q", g)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			g, ok := blob.WrittenGeneration(w)
			if !ok {
				return
			}
			reported++
			a, err := s.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			if g != a.Generation {
				t.Fatalf("the writer reports generation %q, Stat %q", g, a.Generation)
			}
			if a.Size != int64(len(data)) {
				t.Errorf("Stat's size is %d, want %d", a.Size, len(data))
			}
			if !h.Caps.GenerationPreconditions {
				return
			}
			if err := s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g)}); err != nil {
				t.Fatalf("Delete on condition of the reported generation: %v", err)
			}
			if ok, err := blob.Exists(ctx, s, key); ok || err != nil {
				t.Errorf("after the conditional delete: exists=%v err=%v", ok, err)
			}
		})
	}
	t.Run("failed", func(t *testing.T) {
		ctx := ctxT(t)
		mustPut(t, s, "wg/taken", []byte("first"), nil)
		w, err := s.NewWriter(ctx, "wg/taken", &blob.WriterOptions{If: blob.IfNotExist()})
		if err != nil {
			wantErr(t, "IfNotExist NewWriter on an existing key", err, blob.ErrExists)
			return
		}
		w.Write([]byte("second"))
		err = w.Close()
		wantErr(t, "IfNotExist write on an existing key", err, blob.ErrExists)
		if g, ok := blob.WrittenGeneration(w); ok {
			t.Errorf("a write that failed reports generation %q", g)
		}
	})
	if reported == 0 {
		t.Logf("no writer of %T reports the generation it wrote", s)
	}
}

// testEmptyGenerationRefused checks that IfGenerationMatch("") is refused by
// NewWriter itself, with ErrInvalidArgument, whether or not the store enforces
// generations and whether or not the key exists: a store that looked at the
// object first would see a generation mismatch (ErrPrecondition) or no support
// (ErrUnsupported) instead. Nothing is written.
func testEmptyGenerationRefused(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "emptygen/present", []byte("v1"), nil)
	before, err := s.Stat(ctxT(t), "emptygen/present")
	if err != nil {
		t.Fatal(err)
	}
	opts := &blob.WriterOptions{If: blob.IfGenerationMatch("")}
	for _, key := range []string{"emptygen/present", "emptygen/missing"} {
		w, err := s.NewWriter(ctxT(t), key, opts)
		if err == nil {
			w.Write([]byte("v2"))
			err = w.Close()
			t.Errorf("%s: NewWriter accepted IfGenerationMatch(\"\"); Close returned %v", key, err)
			continue
		}
		wantErr(t, key+": NewWriter with IfGenerationMatch(\"\")", err, blob.ErrInvalidArgument)
	}
	if got := mustRead(t, s, "emptygen/present"); string(got) != "v1" {
		t.Errorf("refused write changed the object to %q", got)
	}
	if after, err := s.Stat(ctxT(t), "emptygen/present"); err != nil || after.Generation != before.Generation {
		t.Errorf("refused write changed the generation from %q: %+v, %v", before.Generation, after, err)
	}
	if ok, err := blob.Exists(ctxT(t), s, "emptygen/missing"); ok || err != nil {
		t.Errorf("refused write: Exists(missing key) = %v, %v; want false, nil", ok, err)
	}
}

// refusedConditions are the conditions neither a Delete nor an Append can
// take: IfNotExist (a delete needs the object, and appends never create
// one) and an empty generation.
var refusedConditions = []struct {
	name string
	cond blob.Condition
}{
	{"IfNotExist", blob.IfNotExist()},
	{`IfGenerationMatch("")`, blob.IfGenerationMatch("")},
}

// testDeleteConditions checks that a Delete's condition is checked before
// any I/O: IfNotExist, which no delete can meet, and IfGenerationMatch("")
// are refused with ErrInvalidArgument whether or not the key exists (a
// store that looked first would say ErrNotFound or ErrPrecondition for a
// missing one), and nothing is deleted. The zero condition deletes
// unconditionally.
func testDeleteConditions(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "delcond/present", []byte("v1"), nil)
	for _, r := range refusedConditions {
		for _, key := range []string{"delcond/present", "delcond/missing"} {
			err := s.Delete(ctxT(t), key, &blob.DeleteOptions{If: r.cond})
			wantErr(t, key+": Delete with "+r.name, err, blob.ErrInvalidArgument)
		}
	}
	if got := mustRead(t, s, "delcond/present"); string(got) != "v1" {
		t.Errorf("refused deletes changed the object to %q", got)
	}
	if err := s.Delete(ctxT(t), "delcond/present", &blob.DeleteOptions{}); err != nil {
		t.Fatalf("Delete with the zero condition: %v", err)
	}
	if ok, err := blob.Exists(ctxT(t), s, "delcond/present"); ok || err != nil {
		t.Errorf("after the unconditional delete: exists=%v err=%v", ok, err)
	}
}

func testMissing(t *testing.T, h Harness, s blob.Store) {
	_, err := s.Stat(ctxT(t), "missing")
	wantErr(t, "Stat", err, blob.ErrNotFound)
	_, err = blob.ReadAll(ctxT(t), s, "missing")
	wantErr(t, "ReadAll", err, blob.ErrNotFound)
	err = s.Delete(ctxT(t), "missing", nil)
	wantErr(t, "Delete", err, blob.ErrNotFound)
	if ok, err := blob.Exists(ctxT(t), s, "missing"); ok || err != nil {
		t.Errorf("Exists = %v, %v", ok, err)
	}
	var be *blob.Error
	if _, err := s.Stat(ctxT(t), "missing"); errors.As(err, &be) && (be.Key != "missing" || be.Op == "") {
		t.Errorf("error does not name op and key: %+v", be)
	}
	mustPut(t, s, "gone", []byte("x"), nil)
	if err := s.Delete(ctxT(t), "gone", nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(ctxT(t), "gone")
	wantErr(t, "Stat after Delete", err, blob.ErrNotFound)
}

func testInvalidKeys(t *testing.T, h Harness, s blob.Store) {
	for name, key := range map[string]string{
		"empty":     "",
		"utf8":      "bad\xff\xfe",
		"nul":       "a\x00b",
		"too long":  strings.Repeat("k", blob.MaxKeyLen+1),
		"lone half": "\xed\xa0\x80",
	} {
		ctx := ctxT(t)
		_, err := s.Stat(ctx, key)
		wantErr(t, name+": Stat", err, blob.ErrInvalidKey)
		_, err = s.NewRangeReader(ctx, key, 0, -1)
		wantErr(t, name+": NewRangeReader", err, blob.ErrInvalidKey)
		_, err = s.NewWriter(ctx, key, nil)
		wantErr(t, name+": NewWriter", err, blob.ErrInvalidKey)
		err = s.Delete(ctx, key, nil)
		wantErr(t, name+": Delete", err, blob.ErrInvalidKey)
		if key != "" {
			// A listing's prefix is a key's beginning: what no key may
			// hold, no prefix may either.
			_, err = s.List(ctx, &blob.ListOptions{Prefix: key})
			wantErr(t, name+": List prefix", err, blob.ErrInvalidKey)
		}
	}
}

// testListOptionsChecked: a page size that makes no sense is refused with
// ErrInvalidArgument before any I/O, not taken for the default.
func testListOptionsChecked(t *testing.T, h Harness, s blob.Store) {
	_, err := s.List(ctxT(t), &blob.ListOptions{PageSize: -1})
	wantErr(t, "List with a negative page size", err, blob.ErrInvalidArgument)
}

// longKey is MaxKeyLen bytes in segments short enough for file systems.
func longKey() string {
	seg := strings.Repeat("L", 199) + "/"
	return strings.Repeat(seg, blob.MaxKeyLen/len(seg)+1)[:blob.MaxKeyLen-1] + "x"
}

func weirdKeys() []string {
	return []string{
		"with space", "tab\there", "unicodé/日本語/🙂", "dots/../up", "dots/..x", "ctl\x01\x1f", "a..b",
		"percent%2Fslash", "q?mark#hash&amp=", "back\\slash", "plus+sign", "quote\"'", "double//slash",
		"trailing-dash-", "~tilde", "UPPER/lower", longKey(),
	}
}

func testWeirdKeys(t *testing.T, h Harness, s blob.Store) {
	keys := weirdKeys()
	if !h.Caps.FileTree {
		keys = append(keys, "./dot", "dir", "dir/in")
	}
	for i, k := range keys {
		mustPut(t, s, k, fmt.Appendf(nil, "key %d", i), nil)
	}
	for i, k := range keys {
		if got, want := string(mustRead(t, s, k)), fmt.Sprintf("key %d", i); got != want {
			t.Errorf("key %q: read %q, want %q", k, got, want)
		}
	}
	var listed []string
	for o, err := range blob.All(ctxT(t), s, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, o.Key)
	}
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(listed, want) {
		t.Errorf("listed\n%q\nwant\n%q", listed, want)
	}
	for _, k := range keys {
		if err := s.Delete(ctxT(t), k, nil); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	if h.Caps.FileTree {
		testFileAndFolder(t, s)
	}
}

// testFileAndFolder: a directory tree cannot hold "a" and "a/b" at once.
// Whichever comes second is refused with ErrInvalidKey (not an unclassified
// file system error), and the first is left as it was.
func testFileAndFolder(t *testing.T, s blob.Store) {
	for _, pair := range [][2]string{{"tree", "tree/in"}, {"nest/in", "nest"}} {
		first, second := pair[0], pair[1]
		mustPut(t, s, first, []byte("first"), nil)
		err := blob.Put(ctxT(t), s, second, []byte("second"), nil)
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q) beside %q = %v, want ErrInvalidKey", second, first, err)
		}
		if got := string(mustRead(t, s, first)); got != "first" {
			t.Errorf("%q after the refused Put(%q) = %q, want %q", first, second, got, "first")
		}
		if _, err := s.Stat(ctxT(t), second); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat(%q) after it was refused = %v, want ErrNotFound", second, err)
		}
		if err := s.Delete(ctxT(t), first, nil); err != nil {
			t.Errorf("Delete(%q): %v", first, err)
		}
	}
}

// edgeKeys are keys the contract accepts that backends are known to alias,
// mangle or fail on: each must round-trip exactly or be refused before any
// I/O with ErrInvalidKey. Those marked ordinary must be accepted everywhere.
func edgeKeys() []struct {
	key      string
	ordinary bool
} {
	return []struct {
		key      string
		ordinary bool
	}{
		{"x", true}, {"/x", false}, {"//x", false}, {"y", true}, {"//y", false}, {"/", false},
		{"a/", false}, {"a//", false}, {"a/b/", false}, {"sub/x", true},
		{strings.Repeat("k", blob.MaxKeyLen), false},
		{strings.Repeat("é", blob.MaxKeyLen/2), false},
		{strings.Repeat("\x01", blob.MaxKeyLen), false},
		{strings.Repeat("seg/", blob.MaxKeyLen/4-1) + "end", false},
		{"obj.attrs", false}, {"obj.18f3a2b4c5d6e7f8.tmp", false}, {"obj.tmp", true},
		{"__0x2f__", false}, {"a__0x41__b", false}, {"_0x", true},
		{"...", false}, {"a/.../b", false}, {" lead", true}, {"trail ", true},
		{"zero\u200bwidth", true}, {"nbsp\u00a0", true}, {"e\u0301", true}, {"\u00e9", true},
		{"del\x7f", false}, {"bell\x07", false}, {"nl\nkey", false}, {"cr\rkey", false},
	}
}

func testKeysRoundTripOrRefused(t *testing.T, h Harness, s blob.Store) {
	ctx := ctxT(t)
	var accepted, refused []string
	defer func() { t.Logf("refused before I/O: %.24q", refused) }()
	content := map[string]string{}
	for i, c := range edgeKeys() {
		data := fmt.Sprintf("key %d", i)
		err := blob.Put(ctx, s, c.key, []byte(data), nil)
		if err != nil {
			if c.ordinary || !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("Put(%.40q, %d bytes): %v; want it stored, or refused with ErrInvalidKey", c.key, len(c.key), err)
				continue
			}
			if n := len(err.Error()); n > 600 {
				t.Errorf("refusing a %d-byte key takes a %d-byte message; long keys must be shortened", len(c.key), n)
			}
			// A refused key is refused by every operation, before I/O.
			_, err = s.Stat(ctx, c.key)
			wantErr(t, fmt.Sprintf("Stat(%.40q) of a refused key", c.key), err, blob.ErrInvalidKey)
			_, err = s.NewRangeReader(ctx, c.key, 0, -1)
			wantErr(t, fmt.Sprintf("NewRangeReader(%.40q) of a refused key", c.key), err, blob.ErrInvalidKey)
			err = s.Delete(ctx, c.key, nil)
			wantErr(t, fmt.Sprintf("Delete(%.40q) of a refused key", c.key), err, blob.ErrInvalidKey)
			refused = append(refused, c.key)
			continue
		}
		accepted = append(accepted, c.key)
		content[c.key] = data
	}
	// Every accepted key holds what was written to it, and only it: no two
	// keys share an object.
	for _, k := range accepted {
		if got := string(mustRead(t, s, k)); got != content[k] {
			t.Errorf("key %.40q (%d bytes) reads %q, want %q: another key aliased it", k, len(k), got, content[k])
		}
		a, err := s.Stat(ctx, k)
		if err != nil {
			t.Errorf("Stat(%.40q): %v", k, err)
		} else if a.Key != k {
			t.Errorf("Stat(%.40q).Key = %.40q", k, a.Key)
		}
	}
	// The listing holds exactly the accepted keys, each once and as written.
	// (Their order is ListOrder's and WeirdKeys' to check: here it would
	// also depend on how a backend escapes what it cannot store.)
	want := slices.Sorted(slices.Values(accepted))
	if got := slices.Sorted(slices.Values(listKeys(t, s, nil))); !slices.Equal(got, want) {
		t.Errorf("List =\n%.60q\nwant exactly the accepted keys\n%.60q", got, want)
	}
	for _, k := range accepted {
		if err := s.Delete(ctx, k, nil); err != nil {
			t.Errorf("Delete(%.40q): %v", k, err)
		}
	}
	if got := listKeys(t, s, nil); len(got) != 0 {
		t.Errorf("after deleting every key, List = %.60q", got)
	}
}

func listKeys(t *testing.T, s blob.Store, opts *blob.ListOptions) []string {
	t.Helper()
	var out []string
	for o, err := range blob.All(ctxT(t), s, opts) {
		if err != nil {
			t.Fatalf("List(%+v): %v", opts, err)
		}
		k := o.Key
		if o.IsDir {
			k += "(dir)"
		}
		out = append(out, k)
	}
	return out
}

// orderKeys are chosen so that byte order differs from a directory walk and
// from case-insensitive or length-first orders.
func orderKeys(fileAndPrefix bool) []string {
	keys := []string{"a-b", "a.b", "a/b", "a/c/d", "a0", "aa", "b", "B", "é", "z~", "a/b0", "a/b/c"}
	if fileAndPrefix {
		keys = append(keys, "a")
	} else {
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "a/b" })
	}
	return keys
}

func testListOrder(t *testing.T, h Harness, s blob.Store) {
	keys := orderKeys(!h.Caps.FileTree)
	shuffled := slices.Clone(keys)
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, k := range shuffled {
		mustPut(t, s, k, []byte(k), nil)
	}
	want := slices.Sorted(slices.Values(keys))
	if got := listKeys(t, s, nil); !slices.Equal(got, want) {
		t.Errorf("List = %q, want byte order %q", got, want)
	}
	page, err := s.List(ctxT(t), &blob.ListOptions{Prefix: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Objects) != 1 || page.Objects[0].Key != "b" || page.Objects[0].Size != 1 || page.Objects[0].IsDir {
		t.Errorf("List(prefix b) = %+v", page.Objects)
	}
}

func testListPrefixDelimiter(t *testing.T, h Harness, s blob.Store) {
	for _, k := range []string{"logs/1", "logs/2", "logs/sub/3", "logs/sub/4", "logs/zz/5", "logsx", "other/1", "top"} {
		mustPut(t, s, k, []byte(k), nil)
	}
	cases := []struct {
		opts blob.ListOptions
		want []string
	}{
		{blob.ListOptions{Prefix: "logs/"}, []string{"logs/1", "logs/2", "logs/sub/3", "logs/sub/4", "logs/zz/5"}},
		{blob.ListOptions{Prefix: "logs"}, []string{"logs/1", "logs/2", "logs/sub/3", "logs/sub/4", "logs/zz/5", "logsx"}},
		{blob.ListOptions{Delimiter: "/"}, []string{"logs/(dir)", "logsx", "other/(dir)", "top"}},
		{blob.ListOptions{Prefix: "logs/", Delimiter: "/"}, []string{"logs/1", "logs/2", "logs/sub/(dir)", "logs/zz/(dir)"}},
		{blob.ListOptions{Prefix: "logs/s", Delimiter: "/"}, []string{"logs/sub/(dir)"}},
		{blob.ListOptions{Prefix: "nothing"}, nil},
		{blob.ListOptions{Prefix: "logs/", Delimiter: "/", PageSize: 1}, []string{"logs/1", "logs/2", "logs/sub/(dir)", "logs/zz/(dir)"}},
	}
	if h.Caps.NonSlashDelimiters {
		cases = append(cases, struct {
			opts blob.ListOptions
			want []string
		}{blob.ListOptions{Delimiter: "s"}, []string{"logs(dir)", "other/1", "top"}})
	}
	for _, c := range cases {
		if got := listKeys(t, s, &c.opts); !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %q, want %q", c.opts, got, c.want)
		}
	}
}

func testListStartAfter(t *testing.T, h Harness, s blob.Store) {
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("seg/%04d", i))
	}
	keys = append(keys, "seg/dir/a", "seg/dir/b", "segz")
	for _, k := range keys {
		mustPut(t, s, k, []byte(k), nil)
	}
	after := func(from string, all []string) []string {
		var out []string
		for _, k := range all {
			if strings.TrimSuffix(k, "(dir)") > from {
				out = append(out, k)
			}
		}
		return out
	}
	flat := slices.Sorted(slices.Values(keys))
	for _, sa := range []string{"", "seg/0000", "seg/0009", "seg/00095", "seg/0019", "seg/dir/a", "seg/zzz", "a", "zzzz"} {
		for _, ps := range []int{0, 1, 3} {
			got := listKeys(t, s, &blob.ListOptions{StartAfter: sa, PageSize: ps})
			if want := after(sa, flat); !slices.Equal(got, want) {
				t.Errorf("List(StartAfter %q, PageSize %d) = %q, want %q", sa, ps, got, want)
			}
		}
	}
	grouped := []string{"seg/0018", "seg/0019", "seg/dir/(dir)"}
	if got := listKeys(t, s, &blob.ListOptions{Prefix: "seg/", Delimiter: "/", StartAfter: "seg/0017"}); !slices.Equal(got, grouped) {
		t.Errorf("List(delimiter, StartAfter seg/0017) = %q, want %q", got, grouped)
	}
}

func testListPaging(t *testing.T, h Harness, s blob.Store) {
	var keys []string
	for i := range 25 {
		keys = append(keys, fmt.Sprintf("p/%02d", i))
	}
	for _, k := range keys {
		mustPut(t, s, k, nil, nil)
	}
	for _, size := range []int{1, 2, 7, 25, 26, 1000} {
		var got []string
		opts := &blob.ListOptions{Prefix: "p/", PageSize: size}
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatalf("page size %d: more than 30 pages", size)
			}
			page, err := s.List(ctxT(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Objects) > size {
				t.Errorf("page size %d: got a page of %d", size, len(page.Objects))
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
			}
			if page.NextPageToken == "" {
				break
			}
			opts.PageToken = page.NextPageToken
		}
		if !slices.Equal(got, keys) {
			t.Errorf("page size %d: listed %q, want %q", size, got, keys)
		}
	}
}

func testListPagingWithChanges(t *testing.T, h Harness, s blob.Store) {
	// Stable objects are even; odd ones come and go between pages.
	stable := map[string]bool{}
	for i := 0; i < 40; i += 2 {
		k := fmt.Sprintf("c/%03d", i)
		stable[k] = true
		mustPut(t, s, k, nil, nil)
	}
	opts := &blob.ListOptions{Prefix: "c/", PageSize: 3}
	var got []string
	r := rand.New(rand.NewPCG(9, 9))
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("more than 100 pages")
		}
		page, err := s.List(ctxT(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Objects {
			got = append(got, o.Key)
		}
		if page.NextPageToken == "" {
			break
		}
		opts.PageToken = page.NextPageToken
		// Insert and delete around and behind the cursor.
		for range 3 {
			k := fmt.Sprintf("c/%03d", 2*r.IntN(20)+1)
			if ok, _ := blob.Exists(ctxT(t), s, k); ok {
				if err := s.Delete(ctxT(t), k, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				mustPut(t, s, k, nil, nil)
			}
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("listing with changes between pages is not sorted: %q", got)
	}
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	for k := range stable {
		if seen[k] != 1 {
			t.Errorf("stable object %s listed %d times, want once", k, seen[k])
		}
	}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("%s listed %d times", k, n)
		}
	}
}

func testCanceledWrite(t *testing.T, h Harness, s blob.Store) {
	t.Run("new", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		w, err := s.NewWriter(ctx, "cancel/new", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload(5, 100<<10)); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := w.Close(); err == nil {
			t.Errorf("Close after cancel returned nil")
		}
		if ok, err := blob.Exists(ctxT(t), s, "cancel/new"); ok || err != nil {
			t.Errorf("canceled write committed: exists=%v err=%v", ok, err)
		}
	})
	t.Run("overwrite", func(t *testing.T) {
		mustPut(t, s, "cancel/old", []byte("old"), nil)
		ctx, cancel := context.WithCancel(ctxT(t))
		w, err := s.NewWriter(ctx, "cancel/old", nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("new"))
		cancel()
		w.Close()
		if got := mustRead(t, s, "cancel/old"); string(got) != "old" {
			t.Errorf("canceled overwrite replaced content with %q", got)
		}
	})
	t.Run("create", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		key, w, err := blob.Create(ctx, s, "cancel/create/", nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("never"))
		cancel()
		if err := w.Close(); err == nil {
			t.Errorf("Close after cancel returned nil")
		}
		if a, err := s.Stat(ctxT(t), key); err == nil && a.Size > 0 {
			t.Errorf("canceled Create committed %d bytes", a.Size)
		}
	})
}

func testConcurrentReadersWriters(t *testing.T, h Harness, s blob.Store) {
	const writers, rounds = 4, 10
	versions := make([][]byte, writers*rounds)
	for i := range versions {
		versions[i] = bytes.Repeat([]byte{byte('A' + i%26)}, 4096+i)
	}
	mustPut(t, s, "shared", versions[0], nil)
	valid := func(b []byte) bool {
		for _, v := range versions {
			if bytes.Equal(b, v) {
				return true
			}
		}
		return false
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				v := w*rounds + r
				if err := blob.Put(ctxT(t), s, "shared", versions[v], nil); err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
				if err := blob.Put(ctxT(t), s, fmt.Sprintf("own/%d/%d", w, r), versions[v], nil); err != nil {
					t.Errorf("writer %d: %v", w, err)
				}
			}
		})
	}
	var rg sync.WaitGroup
	for range 4 {
		rg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := blob.ReadAll(ctxT(t), s, "shared")
				if err != nil {
					t.Errorf("reader: %v", err)
					return
				}
				if !valid(b) {
					t.Errorf("reader saw a torn object of %d bytes", len(b))
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	for w := range writers {
		for r := range rounds {
			if got := mustRead(t, s, fmt.Sprintf("own/%d/%d", w, r)); !bytes.Equal(got, versions[w*rounds+r]) {
				t.Errorf("own/%d/%d has wrong content", w, r)
			}
		}
	}
}

func testCreate(t *testing.T, h Harness, s blob.Store) {
	var keys []string
	for i := range 5 {
		key, err := blob.CreateBytes(ctxT(t), s, "created/", fmt.Appendf(nil, "entry %d", i), &blob.WriterOptions{ContentType: "text/plain"})
		returned := time.Now()
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if !strings.HasPrefix(key, "created/") {
			t.Errorf("Create key %q lacks prefix", key)
		}
		// The name was made after the store was asked for and before
		// Create returned, however long either took.
		ts, ok := blob.NameTime(key)
		if !ok || ts.Before(h.opened) || ts.After(returned) {
			t.Errorf("NameTime(%q) = %v, %v; want a time between the store's opening (%v) and Create's return (%v)", key, ts, ok, h.opened, returned)
		}
		keys = append(keys, key)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("sequential Create keys not in creation order: %q", keys)
	}
	for i, k := range keys {
		if got := string(mustRead(t, s, k)); got != fmt.Sprintf("entry %d", i) {
			t.Errorf("%s = %q", k, got)
		}
	}
	if got := listKeys(t, s, &blob.ListOptions{Prefix: "created/"}); !slices.Equal(got, keys) {
		t.Errorf("listed %q, want %q", got, keys)
	}
}

func testCreateConcurrent(t *testing.T, h Harness, s blob.Store) {
	const n = 32
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			k, err := blob.CreateBytes(ctxT(t), s, "cc/", fmt.Appendf(nil, "%d", i), nil)
			if err != nil {
				t.Errorf("Create %d: %v", i, err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, k := range keys {
		if seen[k] {
			t.Errorf("duplicate Create key %q", k)
		}
		seen[k] = true
		if got := string(mustRead(t, s, k)); got != fmt.Sprint(i) {
			t.Errorf("%s = %q, want %d", k, got, i)
		}
	}
}

func testCopy(t *testing.T, h Harness, s blob.Store) {
	data := payload(11, 3000)
	mustPut(t, s, "copy/src", data, &blob.WriterOptions{ContentType: "application/octet-stream", Metadata: map[string]string{"m": "1"}})
	if err := blob.Copy(ctxT(t), s, "copy/dst", "copy/src", nil); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, "copy/dst"); !bytes.Equal(got, data) {
		t.Errorf("copy has wrong content")
	}
	if a, err := s.Stat(ctxT(t), "copy/dst"); err != nil || a.Metadata["m"] != "1" || a.ContentType != "application/octet-stream" {
		t.Errorf("copy attributes = %+v, %v", a, err)
	}
	err := blob.Copy(ctxT(t), s, "copy/dst2", "copy/missing", nil)
	wantErr(t, "copy of a missing source", err, blob.ErrNotFound)
	err = blob.Copy(ctxT(t), s, "copy/dst", "copy/src", &blob.CopyOptions{If: blob.IfNotExist()})
	wantErr(t, "IfNotExist copy onto an existing key", err, blob.ErrExists)
}

// testCopyConditions checks a copy's condition on its destination. Where
// the store enforces generations, IfGenerationMatch(g) replaces generation g
// of dstKey only, never creates dstKey, and still reports a missing source
// as ErrNotFound. Elsewhere it is refused with ErrInvalidArgument before any
// I/O (a missing source would otherwise say ErrNotFound), never checked and
// then copied over unconditionally. IfGenerationMatch("") is refused
// everywhere. Nothing a refused or failed copy touches changes.
func testCopyConditions(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "copycond/src", []byte("new"), nil)
	mustPut(t, s, "copycond/src2", []byte("newer"), nil)
	mustPut(t, s, "copycond/dst", []byte("old"), nil)
	a1, err := s.Stat(ctxT(t), "copycond/dst")
	if err != nil {
		t.Fatal(err)
	}
	gen := func(g string) *blob.CopyOptions { return &blob.CopyOptions{If: blob.IfGenerationMatch(g)} }
	unchanged := func(what string) {
		t.Helper()
		if got := mustRead(t, s, "copycond/dst"); string(got) != what {
			t.Errorf("copycond/dst is %q, want %q", got, what)
		}
		if ok, err := blob.Exists(ctxT(t), s, "copycond/none"); ok || err != nil {
			t.Errorf("copycond/none: exists=%v err=%v, want it never created", ok, err)
		}
	}
	for _, dst := range []string{"copycond/dst", "copycond/none"} {
		for _, src := range []string{"copycond/src", "copycond/missing"} {
			err := blob.Copy(ctxT(t), s, dst, src, gen(""))
			wantErr(t, fmt.Sprintf("Copy of %s to %s with IfGenerationMatch(\"\")", src, dst), err, blob.ErrInvalidArgument)
		}
	}
	unchanged("old")
	if !h.Caps.GenerationPreconditions {
		for _, src := range []string{"copycond/src", "copycond/missing"} {
			err := blob.Copy(ctxT(t), s, "copycond/dst", src, gen(a1.Generation))
			wantErr(t, "Copy of "+src+" with IfGenerationMatch on a store without generation preconditions", err, blob.ErrInvalidArgument)
		}
		err := blob.Copy(ctxT(t), s, "copycond/none", "copycond/src", gen(a1.Generation))
		wantErr(t, "Copy onto a missing key with IfGenerationMatch on a store without generation preconditions", err, blob.ErrInvalidArgument)
		unchanged("old")
		return
	}
	if err := blob.Copy(ctxT(t), s, "copycond/dst", "copycond/src", gen(a1.Generation)); err != nil {
		t.Fatalf("Copy with the destination's current generation: %v", err)
	}
	unchanged("new")
	a2, err := s.Stat(ctxT(t), "copycond/dst")
	if err != nil {
		t.Fatal(err)
	}
	if a2.Generation == a1.Generation {
		t.Fatalf("generation did not change on the copy: %q", a2.Generation)
	}
	err = blob.Copy(ctxT(t), s, "copycond/dst", "copycond/src2", gen(a1.Generation))
	wantErr(t, "Copy with a stale destination generation", err, blob.ErrPrecondition)
	unchanged("new")
	err = blob.Copy(ctxT(t), s, "copycond/none", "copycond/src2", gen(a2.Generation))
	wantErr(t, "Copy with IfGenerationMatch onto a missing key", err, blob.ErrPrecondition)
	unchanged("new")
	err = blob.Copy(ctxT(t), s, "copycond/dst", "copycond/missing", gen(a2.Generation))
	wantErr(t, "Copy of a missing source with IfGenerationMatch", err, blob.ErrNotFound)
	unchanged("new")
}

func testAppend(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "app", []byte("head"), nil)
	w, err := blob.Append(ctxT(t), s, "app", &blob.AppendOptions{IfSizeMatch: -1})
	if !blob.CapabilitiesOf(s).Append {
		if !errors.Is(err, blob.ErrUnsupported) {
			t.Errorf("Append on a store without appends: %v, want ErrUnsupported", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("+tail"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, "app"); string(got) != "head+tail" {
		t.Errorf("after append: %q", got)
	}
	if w, err := blob.Append(ctxT(t), s, "app", &blob.AppendOptions{IfSizeMatch: 4}); err == nil {
		w.Write([]byte("x"))
		err = w.Close()
		wantErr(t, "append at a stale size", err, blob.ErrPrecondition)
	} else {
		wantErr(t, "append at a stale size", err, blob.ErrPrecondition)
	}
	_, err = blob.Append(ctxT(t), s, "app/missing", &blob.AppendOptions{IfSizeMatch: -1})
	wantErr(t, "append to a missing object", err, blob.ErrNotFound)
}

// testAppendConditions checks an append's condition. IfNotExist (an append
// extends an existing object; no store creates one) and
// IfGenerationMatch("") are refused with ErrInvalidArgument before any I/O,
// whether or not the key exists and whether or not the store appends.
// Where the store appends and enforces generations, IfGenerationMatch(g)
// appends to generation g only, alongside IfSizeMatch; where it appends
// without them, IfGenerationMatch fails rather than being ignored.
func testAppendConditions(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "appcond", []byte("head"), nil)
	tryAppend := func(key string, o *blob.AppendOptions, data string) error {
		w, err := blob.Append(ctxT(t), s, key, o)
		if err != nil {
			return err
		}
		w.Write([]byte(data))
		return w.Close()
	}
	for _, r := range refusedConditions {
		for _, key := range []string{"appcond", "appcond/missing"} {
			w, err := blob.Append(ctxT(t), s, key, &blob.AppendOptions{If: r.cond, IfSizeMatch: -1})
			if err == nil {
				w.Write([]byte("+x"))
				err = w.Close()
				t.Errorf("%s: Append accepted %s; Close returned %v", key, r.name, err)
				continue
			}
			wantErr(t, key+": Append with "+r.name, err, blob.ErrInvalidArgument)
		}
	}
	if got := mustRead(t, s, "appcond"); string(got) != "head" {
		t.Errorf("refused appends changed the object to %q", got)
	}
	if ok, err := blob.Exists(ctxT(t), s, "appcond/missing"); ok || err != nil {
		t.Errorf("appcond/missing: exists=%v err=%v, want it never created", ok, err)
	}
	if !blob.CapabilitiesOf(s).Append {
		return
	}
	a1, err := s.Stat(ctxT(t), "appcond")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Caps.GenerationPreconditions {
		err := tryAppend("appcond", &blob.AppendOptions{If: blob.IfGenerationMatch("not-" + a1.Generation), IfSizeMatch: -1}, "+x")
		if err == nil {
			t.Errorf("store without generation preconditions accepted (and ignored) an Append with IfGenerationMatch")
		}
		if got := mustRead(t, s, "appcond"); string(got) != "head" {
			t.Errorf("refused conditional append changed the object to %q", got)
		}
		return
	}
	if err := tryAppend("appcond", &blob.AppendOptions{If: blob.IfGenerationMatch(a1.Generation), IfSizeMatch: 4}, "+1"); err != nil {
		t.Fatalf("Append with the current generation and size: %v", err)
	}
	err = tryAppend("appcond", &blob.AppendOptions{If: blob.IfGenerationMatch(a1.Generation), IfSizeMatch: -1}, "+2")
	wantErr(t, "Append with a stale generation", err, blob.ErrPrecondition)
	a2, err := s.Stat(ctxT(t), "appcond")
	if err != nil {
		t.Fatal(err)
	}
	err = tryAppend("appcond", &blob.AppendOptions{If: blob.IfGenerationMatch(a2.Generation), IfSizeMatch: 4}, "+3")
	wantErr(t, "Append with the current generation at a stale size", err, blob.ErrPrecondition)
	if got := mustRead(t, s, "appcond"); string(got) != "head+1" {
		t.Errorf("after conditional appends: %q, want %q", got, "head+1")
	}
	err = tryAppend("appcond/missing", &blob.AppendOptions{If: blob.IfGenerationMatch(a2.Generation), IfSizeMatch: -1}, "+4")
	if !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("Append with IfGenerationMatch to a missing object: %v, want ErrNotFound or ErrPrecondition", err)
	}
	if ok, err := blob.Exists(ctxT(t), s, "appcond/missing"); ok || err != nil {
		t.Errorf("appcond/missing: exists=%v err=%v, want it never created", ok, err)
	}
}

func testReaderAt(t *testing.T, h Harness, s blob.Store) {
	data := payload(13, 100_000)
	mustPut(t, s, "ra", data, nil)
	ra, err := blob.OpenReaderAt(ctxT(t), s, "ra")
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	if ra.Size() != int64(len(data)) {
		t.Errorf("Size = %d", ra.Size())
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			off := int64(i * 12_000)
			p := make([]byte, 1000)
			n, err := ra.ReadAt(p, off)
			if err != nil || n != len(p) || !bytes.Equal(p, data[off:off+int64(n)]) {
				t.Errorf("ReadAt(%d) = %d, %v", off, n, err)
			}
		})
	}
	wg.Wait()
	p := make([]byte, 100)
	n, err := ra.ReadAt(p, int64(len(data)-40))
	if n != 40 || err != io.EOF || !bytes.Equal(p[:n], data[len(data)-40:]) {
		t.Errorf("ReadAt across the end = %d, %v; want 40, io.EOF", n, err)
	}

	// Each ReadAtContext runs under its caller's context, and the reader
	// outlives the context it was opened with.
	openCtx, cancelOpen := context.WithCancel(ctxT(t))
	held, err := blob.OpenReaderAt(openCtx, s, "ra")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	gone, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := held.ReadAtContext(gone, make([]byte, 10), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAtContext under an ended context: %v, want context.Canceled", err)
	}
	cancelOpen()
	for _, off := range []int64{0, 50_000, 99_000} {
		p := make([]byte, 1000)
		n, err := held.ReadAtContext(ctxT(t), p, off)
		if err != nil || n != len(p) || !bytes.Equal(p, data[off:off+1000]) {
			t.Errorf("ReadAtContext(%d) after the open's context ended = %d, %v", off, n, err)
		}
	}
	n, err = held.ReadAtContext(ctxT(t), p, int64(len(data)-40))
	if n != 40 || err != io.EOF || !bytes.Equal(p[:n], data[len(data)-40:]) {
		t.Errorf("ReadAtContext across the end = %d, %v; want 40, io.EOF", n, err)
	}
}

// testRetire checks a Retirer (a store that reports Capabilities.Retire
// must be one): a survey names the key's version, its bytes read back, a
// retirement of it leaves the key absent, and a retirement of an older
// version never touches a newer one. A store without the capability must
// not claim it through the interface alone.
func testRetire(t *testing.T, h Harness, s blob.Store) {
	r, ok := s.(blob.Retirer)
	if !blob.CapabilitiesOf(s).Retire {
		if ok {
			// A wrapper offers the methods over stores without them; they
			// must refuse, not pretend.
			if _, err := r.Survey(ctxT(t), "ret"); !errors.Is(err, blob.ErrUnsupported) {
				t.Errorf("Survey on a store that cannot retire: %v, want ErrUnsupported", err)
			}
		}
		return
	}
	if !ok {
		t.Fatalf("%T reports Retire but is no blob.Retirer", s)
	}
	ctx := ctxT(t)
	mustPut(t, s, "ret", []byte("v1"), nil)
	a, err := s.Stat(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	h1, err := r.Survey(ctx, "ret")
	if err != nil {
		t.Fatalf("Survey: %v", err)
	}
	if ha := h1.Attributes(); ha == nil || ha.Generation != a.Generation {
		t.Fatalf("Survey found %+v, want generation %s", ha, a.Generation)
	}
	if b, err := r.ReadHeld(ctx, h1); err != nil || string(b) != "v1" {
		t.Errorf("ReadHeld: %q, %v", b, err)
	}
	res, err := r.Retire(ctx, h1, a.Generation)
	if err != nil || res.Deleted == 0 || !res.Complete || res.Newer {
		t.Errorf("Retire: %+v, %v", res, err)
	}
	// The version is younger than InFlightBound, so a copy of it may still
	// land after the retirement (the write's own straggler, which a Survey
	// made before it landed did not see): as the contract has it, a later
	// retirement removes it, and then the key stays absent.
	_, err = s.Stat(ctx, "ret")
	for i := 0; i < 50 && err == nil; i++ {
		time.Sleep(20 * time.Millisecond)
		h, serr := r.Survey(ctx, "ret")
		if serr != nil {
			t.Fatalf("Survey: %v", serr)
		}
		if _, rerr := r.Retire(ctx, h, a.Generation); rerr != nil {
			t.Fatalf("Retire again: %v", rerr)
		}
		_, err = s.Stat(ctx, "ret")
	}
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat after the retirement: %v, want ErrNotFound", err)
	}
	if t0, ok := r.GenerationTime(a.Generation); ok && (t0.After(time.Now().Add(time.Minute)) || t0.Before(h.opened.Add(-time.Minute))) {
		t.Errorf("GenerationTime(%s) = %v, not about when it was written", a.Generation, t0)
	}

	mustPut(t, s, "ret", []byte("v2"), nil)
	a2, err := s.Stat(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r.Survey(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	res, err = r.Retire(ctx, h2, a.Generation)
	if err != nil || res.Deleted != 0 || !res.Newer {
		t.Errorf("Retire of an older version under a newer one: %+v, %v", res, err)
	}
	if b, err := blob.ReadAll(ctx, s, "ret"); err != nil || string(b) != "v2" {
		t.Errorf("the newer version after an older one's retirement: %q, %v (generation %s)", b, err, a2.Generation)
	}
}

func testClosed(t *testing.T, h Harness, s blob.Store) {
	mustPut(t, s, "k", []byte("v"), nil)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := ctxT(t)
	_, err := s.Stat(ctx, "k")
	wantErr(t, "Stat after Close", err, blob.ErrClosed)
	_, err = s.NewRangeReader(ctx, "k", 0, -1)
	wantErr(t, "NewRangeReader after Close", err, blob.ErrClosed)
	_, err = s.List(ctx, nil)
	wantErr(t, "List after Close", err, blob.ErrClosed)
	err = s.Delete(ctx, "k", nil)
	wantErr(t, "Delete after Close", err, blob.ErrClosed)
	if w, err := s.NewWriter(ctx, "k2", nil); err == nil {
		w.Write([]byte("x"))
		err = w.Close()
		wantErr(t, "write after Close", err, blob.ErrClosed)
	} else {
		wantErr(t, "NewWriter after Close", err, blob.ErrClosed)
	}
}
