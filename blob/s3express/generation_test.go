package s3express_test

import (
	"bytes"
	"context"
	"github.com/zonalblob/zonalblob/conformance"
	"testing"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/s3express"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// A write reports the ETag PutObject or CompleteMultipartUpload replied
// with, in the form HeadObject gives it, so that a later delete conditions
// on it without a HeadObject of its own.
func TestWriterReportsGeneration(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t, s3expresstest.Options{})
	s := newStore(t, srv, s3express.Options{MultipartThreshold: 5 << 20, PartSize: 5 << 20})
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
		{"multipart", nil, 12<<20 + 3, 1 << 20},
		{"multipart-ifnotexist", &blob.WriterOptions{If: blob.IfNotExist()}, 11 << 20, 3 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "gen/" + c.name
			w, err := s.NewWriter(ctx, key, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte{byte(len(c.name))}, c.size)
			g := conformance.WriteReported(ctx, t, s, key, w, data, c.chunk)
			for _, size := range []int{7, 6 << 20} {
				w, err = s.NewWriter(ctx, key, &blob.WriterOptions{If: blob.IfGenerationMatch(g)})
				if err != nil {
					t.Fatal(err)
				}
				g2 := conformance.WriteReported(ctx, t, s, key, w, bytes.Repeat([]byte("o"), size), 1<<20)
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
