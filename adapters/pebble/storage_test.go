package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/cockroachdb/pebble/v2/vfs"

	zpebble "github.com/zonalblob/zonalblob/adapters/pebble"
	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	_ "github.com/zonalblob/zonalblob/blob/regional"
	_ "github.com/zonalblob/zonalblob/quorum"
	_ "github.com/zonalblob/zonalblob/tiered"
)

// quorumURL is a 2-of-3 quorum of mem:// replicas.
const quorumURL = "quorum://?w=2&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F&replica=mem%3A%2F%2F"

var stores = []struct{ name, url string }{
	{"mem", "mem://"},
	{"quorum", quorumURL},
	// Tiered over the quorum, moving tables into packs as soon as it can:
	// pebble's reads, lists and deletes meet packed tables.
	{"tiered", "tiered://?hot=" + url.QueryEscape(quorumURL) + "&cold=mem%3A%2F%2F&after=1ms&interval=20ms"},
}

func open(t *testing.T, rawURL string) blob.Store {
	t.Helper()
	s, err := blob.Open(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const locator remote.Locator = "zonalblob"

// dbOptions are the options of a DB whose sstables all live in st, its
// WAL, manifest and catalog in fs.
func dbOptions(t *testing.T, fs vfs.FS, st remote.Storage) *pebble.Options {
	o := &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             testLogger{t},
	}
	o.Experimental.RemoteStorage = remote.MakeSimpleFactory(map[remote.Locator]remote.Storage{locator: st})
	o.Experimental.CreateOnShared = remote.CreateOnSharedAll
	o.Experimental.CreateOnSharedLocator = locator
	return o
}

type testLogger struct{ t *testing.T }

func (testLogger) Infof(string, ...any)                {}
func (l testLogger) Errorf(format string, args ...any) { l.t.Logf(format, args...) }
func (testLogger) Fatalf(format string, args ...any)   { panic(fmt.Sprintf(format, args...)) }

func key(i int) []byte { return fmt.Appendf(nil, "key%06d", i) }

func value(i, round int) []byte {
	return bytes.Repeat(fmt.Appendf(nil, "%d.%d;", i, round), 10)
}

// TestDB writes a pebble DB whose sstables all go through the adapter
// (flushes, then a manual compaction), closes it, reopens it and reads
// every key back from the Store.
func TestDB(t *testing.T) {
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			f := fault.Wrap(open(t, tc.url), fault.Options{}) // to count the reads
			st := zpebble.New(f)
			defer st.Close()
			fs := vfs.NewMem()

			db, err := pebble.Open("db", dbOptions(t, fs, st))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.SetCreatorID(1); err != nil {
				t.Fatal(err)
			}
			const n, rounds = 3000, 3
			for round := range rounds {
				for i := range n {
					if i%7 == round { // some keys end deleted
						if err := db.Delete(key(i), pebble.NoSync); err != nil {
							t.Fatal(err)
						}
						continue
					}
					if err := db.Set(key(i), value(i, round), pebble.NoSync); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Compact(context.Background(), key(0), key(n), false); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			local, err := fs.List("db")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range local {
				if strings.HasSuffix(name, ".sst") {
					t.Errorf("sstable %s is on the local file system", name)
				}
			}

			readsBefore := f.Stats()[fault.OpRead].Calls
			db, err = pebble.Open("db", dbOptions(t, fs, st))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.SetCreatorID(1); err != nil {
				t.Fatal(err)
			}
			last := rounds - 1
			for i := range n {
				v, closer, err := db.Get(key(i))
				if i%7 == last {
					if !errors.Is(err, pebble.ErrNotFound) {
						t.Fatalf("key %d: %v, want deleted", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
				if !bytes.Equal(v, value(i, last)) {
					t.Fatalf("key %d: %q, want %q", i, v, value(i, last))
				}
				closer.Close()
			}
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			var scanned, want int
			for it.First(); it.Valid(); it.Next() {
				scanned++
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if i%7 != last {
					want++
				}
			}
			if scanned != want {
				t.Errorf("a scan saw %d keys, want %d", scanned, want)
			}
			if f.Stats()[fault.OpRead].Calls == readsBefore {
				t.Error("the reopened DB read nothing from the Store")
			}

			// Every live sstable is in the Store, and the compaction's inputs
			// were deleted from it.
			tables, err := db.SSTables()
			if err != nil {
				t.Fatal(err)
			}
			var live int
			for _, level := range tables {
				live += len(level)
			}
			objects, err := st.List("", "")
			if err != nil {
				t.Fatal(err)
			}
			var stored int
			for _, name := range objects {
				if strings.HasSuffix(name, ".sst") {
					stored++
				}
			}
			if live == 0 || stored != live {
				t.Errorf("%d sstables in the Store, %d live (objects %q)", stored, live, objects)
			}
		})
	}
}

// TestStorage checks the remote.Storage contract directly: reads, sizes,
// listings with and without a delimiter, deletes and missing objects.
func TestStorage(t *testing.T) {
	ctx := context.Background()
	f := fault.Wrap(open(t, "mem://"), fault.Options{})
	st := zpebble.New(f)
	defer st.Close()
	for _, name := range []string{"a", "b/4", "b/5", "b/6"} {
		w, err := st.CreateObject(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, "data of "+name); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		prefix, delimiter string
		want              []string
	}{
		{"", "", []string{"a", "b/4", "b/5", "b/6"}},
		{"", "/", []string{"a", "b"}},
		{"b/", "/", []string{"4", "5", "6"}},
		{"b", "", []string{"/4", "/5", "/6"}},
		{"c", "", nil},
	} {
		got, err := st.List(tc.prefix, tc.delimiter)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("List(%q, %q) = %q, want %q", tc.prefix, tc.delimiter, got, tc.want)
		}
	}

	r, size, err := st.ReadObject(ctx, "b/5")
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len("data of b/5")) {
		t.Errorf("size %d", size)
	}
	p := make([]byte, 4)
	if err := r.ReadAt(ctx, p, 3); err != nil || string(p) != "a of" {
		t.Errorf("ReadAt(3) = %q, %v", p, err)
	}
	if err := r.ReadAt(ctx, p, size-3); !errors.Is(err, io.EOF) {
		t.Errorf("ReadAt past the end: %v, want io.EOF", err)
	}
	// Each ReadAt reads under its own context: a read that hangs ends with
	// it, and the next one goes through.
	hang := f.Hang(fault.OpRead)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.ReadAt(cancelled, p, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt under a cancelled context: %v", err)
	}
	f.Remove(hang)
	if err := r.ReadAt(ctx, p, 0); err != nil || string(p) != "data" {
		t.Errorf("ReadAt(0) = %q, %v", p, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadAt(ctx, p, 0); !errors.Is(err, blob.ErrClosed) {
		t.Errorf("ReadAt after Close: %v", err)
	}

	if n, err := st.Size("a"); n != int64(len("data of a")) || err != nil {
		t.Errorf("Size = %d, %v", n, err)
	}
	if err := st.Delete("a"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Delete": st.Delete("a"),
		"Size":   second(st.Size("a")),
		"ReadObject": func() error {
			_, _, err := st.ReadObject(ctx, "a")
			return err
		}(),
	} {
		if !st.IsNotExistError(err) {
			t.Errorf("%s of a missing object: %v, want not-exist", name, err)
		}
	}
	if st.IsNotExistError(&blob.Error{Op: "stat", Kind: blob.ErrBucketNotFound}) {
		t.Error("a missing bucket is taken for a missing object")
	}
}

func second[T any](_ T, err error) error { return err }

// TestCreateObjectFailedWriteCommitsNothing checks that closing a writer
// whose Write failed (pebble closes a writer to abort it) commits nothing.
func TestCreateObjectFailedWriteCommitsNothing(t *testing.T) {
	f := fault.Wrap(open(t, "mem://"), fault.Options{})
	st := zpebble.New(f)
	defer st.Close()
	w, err := st.CreateObject("x.sst")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	f.FailNth(fault.OpWriteData, 1, nil)
	if _, err := w.Write([]byte("second")); err == nil {
		t.Fatal("injected Write failure not reported")
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a failed Write succeeded")
	}
	if _, err := st.Size("x.sst"); !st.IsNotExistError(err) {
		t.Errorf("after an aborted write: %v, want not-exist", err)
	}
}

// TestReadAtContexts: a reader opened under one context serves ReadAts
// under others after that one ended (pebble's table cache keeps readers
// opened by earlier operations), and a ReadAt under an ended context fails
// with its error.
func TestReadAtContexts(t *testing.T) {
	st := zpebble.New(open(t, "mem://"))
	defer st.Close()
	w, err := st.CreateObject("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	opened, cancel := context.WithCancel(context.Background())
	r, size, err := st.ReadObject(opened, "t.sst")
	if err != nil || size != int64(len(data)) {
		t.Fatalf("ReadObject: %d, %v", size, err)
	}
	defer r.Close()
	cancel()
	p := make([]byte, 100)
	if err := r.ReadAt(context.Background(), p, 5000); err != nil || !bytes.Equal(p, data[5000:5100]) {
		t.Fatalf("ReadAt after the open's context ended: %q, %v", p, err)
	}
	if err := r.ReadAt(opened, p, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt under an ended context: %v, want context.Canceled", err)
	}
	if err := r.ReadAt(context.Background(), p, int64(len(data)-50)); !errors.Is(err, io.EOF) {
		t.Errorf("ReadAt past the end: %v, want io.EOF", err)
	}
}
