package azpremium_test

import (
	"bytes"
	"context"
	"github.com/zonalblob/zonalblob/conformance"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/azpremium"
)

// A write reports the ETag its Put Blob or Put Block List replied with,
// which is Stat's generation, so that a later delete conditions on it
// without a Get Blob Properties of its own.
func TestWriterReportsGeneration(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, azpremium.Options{MultipartThreshold: 64 << 10, PartSize: 100 << 10, Concurrency: 3})
	defer s.Close()
	for _, c := range []struct {
		name  string
		opts  *blob.WriterOptions
		size  int
		chunk int
	}{
		{"put", nil, 10, 0},
		{"ifnotexist", &blob.WriterOptions{If: blob.IfNotExist()}, 10, 0},
		{"empty", nil, 0, 0},
		{"staged", nil, 1<<20 + 7, 50 << 10},
		{"staged-ifnotexist", &blob.WriterOptions{If: blob.IfNotExist()}, 300 << 10, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "gen/" + c.name
			w, err := s.NewWriter(ctx, key, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte{byte(len(c.name))}, c.size)
			g := conformance.WriteReported(ctx, t, s, key, w, data, c.chunk)
			for _, size := range []int{7, 500 << 10} {
				w, err = s.NewWriter(ctx, key, &blob.WriterOptions{If: blob.IfGenerationMatch(g)})
				if err != nil {
					t.Fatal(err)
				}
				g2 := conformance.WriteReported(ctx, t, s, key, w, bytes.Repeat([]byte("o"), size), 64<<10)
				if g2 == g {
					t.Errorf("the overwrite reports the generation it replaced, %s", g)
				}
				g = g2
			}
			if err := s.Delete(ctx, key, &blob.DeleteOptions{If: blob.IfGenerationMatch(g)}); err != nil {
				t.Errorf("Delete on condition of the reported generation: %v", err)
			}
		})
	}
}
