package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonalblob/zonalblob/blob"
)

func TestMv(t *testing.T) {
	s, d := fileStore(t), fileStore(t)
	work := t.TempDir()
	exists := func(store, key string) bool {
		t.Helper()
		r := zb(t, "", "stat", store, key)
		return r.code == 0
	}

	t.Run("between stores", func(t *testing.T) {
		mustZB(t, "one", "put", s, "a", "--content-type", "text/x-one")
		var gen statJSON
		json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", s, "a")), &gen)
		out := mustZB(t, "", "mv", "--json", s, "a", d, "moved/a")
		var j copyJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil || j != (copyJSON{SrcKey: "a", DstKey: "moved/a", Size: 3, SrcGeneration: gen.Generation}) {
			t.Errorf("mv --json = %q (%v), want a -> moved/a, 3 bytes, generation %q", out, err, gen.Generation)
		}
		if exists(s, "a") {
			t.Error("the source is still there")
		}
		var st statJSON
		json.Unmarshal([]byte(mustZB(t, "", "stat", "--json", d, "moved/a")), &st)
		if got := mustZB(t, "", "cat", d, "moved/a"); got != "one" || st.ContentType != "text/x-one" {
			t.Errorf("destination holds %q, content type %q", got, st.ContentType)
		}
	})
	t.Run("into a folder of the same store", func(t *testing.T) {
		mustZB(t, "two", "put", s, "in/b")
		r := zb(t, "", "mv", s, "in/b", s, "done/")
		if r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, "moved 1 object, 3 bytes in ") {
			t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if exists(s, "in/b") || !exists(s, "done/b") {
			t.Error("in/b was not moved to done/b")
		}
	})
	t.Run("local file to store and back", func(t *testing.T) {
		f := filepath.Join(work, "f.txt")
		writeFile(t, f, "local")
		mustZB(t, "", "mv", "-q", f, s, "up/")
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the local source is still there: %v", err)
		}
		if got := mustZB(t, "", "cat", s, "up/f.txt"); got != "local" {
			t.Errorf("uploaded %q", got)
		}
		back := filepath.Join(work, "sub") + "/"
		out := mustZB(t, "", "mv", "--json", s, "up/f.txt", back)
		var j copyJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.SrcKey != "up/f.txt" || j.DstPath != filepath.Join(work, "sub", "f.txt") || j.Size != 5 {
			t.Errorf("mv --json download = %q", out)
		}
		if b, err := os.ReadFile(filepath.Join(work, "sub", "f.txt")); err != nil || string(b) != "local" {
			t.Errorf("downloaded %q, %v", b, err)
		}
		if exists(s, "up/f.txt") {
			t.Error("the object is still there")
		}
	})
	t.Run("refusals", func(t *testing.T) {
		mustZB(t, "c", "put", s, "c")
		mustZB(t, "taken", "put", d, "c")
		wantFail(t, zb(t, "", "mv", s, "c", s, "c"), exitUsage, "the same object")
		wantFail(t, zb(t, "", "mv", s, "c", s, ""), exitUsage, "the same object")
		wantFail(t, zb(t, "x", "mv", "-", s, "x"), exitUsage, `"-"`)
		wantFail(t, zb(t, "", "mv", s, "c", "-"), exitUsage, `"-"`)
		wantFail(t, zb(t, "", "mv", "--if-not-exist", s, "c", d, "c"), exitFailed, "exists")
		wantFail(t, zb(t, "", "mv", s, "nope", d, "x"), exitNotFound, "not found")
		wantFail(t, zb(t, "", "mv", filepath.Join(work, "a"), filepath.Join(work, "b")), exitUsage, "both ends are local")
		if !exists(s, "c") || mustZB(t, "", "cat", d, "c") != "taken" {
			t.Error("a refused mv changed something")
		}
	})
}

// racingStores are the stores of racing:// URLs, by host, for the test
// that opens them.
var racingStores sync.Map // host -> *racing

// racing is a store whose reads let another writer overwrite the object
// being read, once it is open: what a move's copy meets when the source is
// overwritten meanwhile, every time.
type racing struct {
	blob.Store
}

func (r racing) NewRangeReader(ctx context.Context, key string, offset, length int64) (blob.Reader, error) {
	rd, err := r.Store.NewRangeReader(ctx, key, offset, length)
	if err == nil {
		err = blob.Put(ctx, r.Store, key, []byte("overwritten"), nil)
	}
	return rd, err
}

// Close leaves the store to the test, which reads it afterwards.
func (r racing) Close() error { return nil }

func init() {
	blob.Register("racing", func(ctx context.Context, u *url.URL) (blob.Store, error) {
		st, ok := racingStores.Load(u.Host)
		if !ok {
			return nil, blob.Errorf("open", "", blob.ErrInvalidArgument, "no racing store %q", u.Host)
		}
		return st.(racing), nil
	})
}

// mv deletes its source only if it still holds the generation it copied: a
// source overwritten between the copy's read and the delete stays, and mv
// says so and fails.
func TestMvLeavesOverwrittenSource(t *testing.T) {
	ctx := context.Background()
	inner, err := blob.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	racingStores.Store(t.Name(), racing{inner})
	defer racingStores.Delete(t.Name())
	if err := blob.Put(ctx, inner, "src", []byte("original"), nil); err != nil {
		t.Fatal(err)
	}
	src := "racing://" + t.Name()

	for _, dst := range []struct{ name, store, key string }{
		{"same store", src, "dst"},
		{"another store", fileStore(t), "dst"},
		{"local file", "", filepath.Join(t.TempDir(), "dst")},
	} {
		t.Run(dst.name, func(t *testing.T) {
			if err := blob.Put(ctx, inner, "src", []byte("original"), nil); err != nil {
				t.Fatal(err)
			}
			args := []string{"mv", src, "src", dst.key}
			if dst.store != "" {
				args = []string{"mv", src, "src", dst.store, dst.key}
			}
			r := zb(t, "", args...)
			wantFail(t, r, exitFailed, `copied "src" to `, "did not delete the source: it was overwritten meanwhile", "both exist now")
			if got, err := blob.ReadAll(ctx, inner, "src"); err != nil || string(got) != "overwritten" {
				t.Errorf("the source holds %q, %v; want the overwrite, kept", got, err)
			}
			var copied string
			if dst.store == src {
				b, _ := blob.ReadAll(ctx, inner, dst.key)
				copied = string(b)
			} else if dst.store != "" {
				copied = mustZB(t, "", "cat", dst.store, dst.key)
			} else {
				b, _ := os.ReadFile(dst.key)
				copied = string(b)
			}
			if copied != "original" {
				t.Errorf("the destination holds %q, want what was read", copied)
			}
		})
	}
}

// A local source that changed while it was uploaded is not removed.
func TestRemoveUnchanged(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	writeFile(t, f, "v1")
	before, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f, "v2, longer")
	if err := removeUnchanged(f, before); !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("changed file: %v, want ErrPrecondition", err)
	}
	// Same size, another modification time.
	writeFile(t, f, "v1")
	if err := os.Chtimes(f, time.Time{}, before.ModTime().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := removeUnchanged(f, before); !errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("touched file: %v, want ErrPrecondition", err)
	}
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("a changed file was removed: %v", err)
	}
	now, _ := os.Stat(f)
	if err := removeUnchanged(f, now); err != nil {
		t.Errorf("unchanged file: %v", err)
	}
	if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unchanged file was kept: %v", err)
	}
}
