package regional_test

import (
	"bytes"
	"context"
	"github.com/zonalblob/zonalblob/conformance"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/regional"
)

// On buckets with local preconditions a write reports the generation token
// it stored, which Stat reports, through the streaming writer and the
// buffered one alike; a write that failed its condition reports none.
func TestWriterReportsGeneration(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) blob.Store{
		"mem": func(t *testing.T) blob.Store { return memStore(ctx, t) },
		"file": func(t *testing.T) blob.Store {
			s, err := blob.Open(ctx, fileURL(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"buffered": func(t *testing.T) blob.Store {
			return regional.New(memblob.OpenBucket(nil), regional.Options{LocalPreconditions: true, BufferedUploads: true})
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			for _, c := range []struct {
				name string
				opts *blob.WriterOptions
				size int
			}{
				{"put", nil, 10},
				{"ifnotexist", &blob.WriterOptions{If: blob.IfNotExist(), Metadata: map[string]string{"m": "1"}}, 10},
				{"empty", nil, 0},
				{"large", nil, 3<<20 + 1},
			} {
				key := "gen/" + c.name
				w, err := s.NewWriter(ctx, key, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				g := conformance.WriteReported(ctx, t, s, key, w, bytes.Repeat([]byte("x"), c.size), 1<<20)
				w, err = s.NewWriter(ctx, key, &blob.WriterOptions{If: blob.IfGenerationMatch(g)})
				if err != nil {
					t.Fatal(err)
				}
				g2 := conformance.WriteReported(ctx, t, s, key, w, []byte("over"), 0)
				if g2 == g {
					t.Errorf("%s: the overwrite reports the generation it replaced, %s", key, g)
				}
				w, err = s.NewWriter(ctx, key, &blob.WriterOptions{If: blob.IfGenerationMatch(g)})
				if err != nil {
					t.Fatal(err)
				}
				w.Write([]byte("stale"))
				if err := w.Close(); err == nil {
					t.Fatalf("%s: a write on condition of a replaced generation succeeded", key)
				}
				if g, ok := blob.WrittenGeneration(w); ok {
					t.Errorf("%s: a write that failed reports generation %q", key, g)
				}
				if err := s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g2)}); err != nil {
					t.Errorf("%s: Delete on condition of the reported generation: %v", key, err)
				}
			}
		})
	}
}
