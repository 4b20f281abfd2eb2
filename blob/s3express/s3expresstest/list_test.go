package s3expresstest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

// listAll pages through a listing with continuation tokens and returns the
// keys and common prefixes in the order the server gave them.
func listAll(t *testing.T, c *s3.Client, bucket, prefix, delim string, pageSize int32) (keys, prefixes []string, pages int) {
	t.Helper()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(pageSize)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if delim != "" {
		in.Delimiter = aws.String(delim)
	}
	p := s3.NewListObjectsV2Paginator(c, in)
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if n := len(out.Contents) + len(out.CommonPrefixes); n > int(pageSize) || int(aws.ToInt32(out.KeyCount)) != n {
			t.Fatalf("page %d has %d entries, KeyCount %d, MaxKeys %d", pages, n, aws.ToInt32(out.KeyCount), pageSize)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, cp := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(cp.Prefix))
		}
	}
	return keys, prefixes, pages
}

func TestDirectoryListingIsShuffledCompleteAndPaged(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{Seed: 7})
	var want []string
	for i := range 57 {
		k := fmt.Sprintf("dir/%03d", i)
		put(t, c, k, "x")
		want = append(want, k)
	}
	put(t, c, "dir/sub/a", "x")
	put(t, c, "dir/sub/b", "x")
	put(t, c, "elsewhere", "x")

	keys, prefixes, pages := listAll(t, c, dirBucket, "dir/", "/", 10)
	if pages != 6 {
		t.Errorf("%d pages of 10 for 58 entries, want 6", pages)
	}
	if !slices.Equal(prefixes, []string{"dir/sub/"}) {
		t.Errorf("common prefixes %v, want [dir/sub/]", prefixes)
	}
	if slices.IsSorted(keys) {
		t.Errorf("directory bucket listing came back sorted: %v", keys[:10])
	}
	sorted := slices.Sorted(slices.Values(keys))
	if !slices.Equal(sorted, want) {
		t.Fatalf("listing is not complete or has duplicates: got %d keys, want %d", len(sorted), len(want))
	}

	// The order is seeded: the same seed lists in the same order, another
	// seed in another.
	again, _, _ := listAll(t, c, dirBucket, "dir/", "/", 1000)
	if !slices.Equal(again, keys) {
		t.Errorf("one page of 1000 lists in a different order than pages of 10")
	}
	other := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{dirBucket}, Seed: 8})
	oc := other.Client()
	for _, k := range want {
		put(t, oc, k, "x")
	}
	otherKeys, _, _ := listAll(t, oc, dirBucket, "dir/", "/", 1000)
	if slices.Equal(otherKeys, keys) {
		t.Errorf("seeds 7 and 8 list in the same order")
	}

	// Without a delimiter, a directory bucket lists recursively.
	all, _, _ := listAll(t, c, dirBucket, "", "", 1000)
	if len(all) != 60 {
		t.Errorf("recursive listing has %d keys, want 60", len(all))
	}
	if st := srv.Stats(); st.List == 0 {
		t.Errorf("List not counted")
	}
}

func TestDirectoryListingRejects(t *testing.T) {
	_, c := newDirServer(t, s3expresstest.Options{})
	put(t, c, "a/b", "x")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		in   s3.ListObjectsV2Input
	}{
		{"StartAfter", s3.ListObjectsV2Input{StartAfter: aws.String("a/")}},
		{"prefix without trailing slash", s3.ListObjectsV2Input{Prefix: aws.String("a/b")}},
		{"delimiter other than slash", s3.ListObjectsV2Input{Delimiter: aws.String("-")}},
	} {
		in := tc.in
		in.Bucket = aws.String(dirBucket)
		if _, err := c.ListObjectsV2(ctx, &in); apiCode(err) != "InvalidArgument" {
			t.Errorf("%s: got %v, want InvalidArgument", tc.name, err)
		}
	}
}

func TestPlainBucketListsInOrderWithStartAfter(t *testing.T) {
	srv := s3expresstest.Start(t, s3expresstest.Options{Buckets: []string{"regional"}})
	c := srv.Client()
	ctx := context.Background()
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("k%02d", i)
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("regional"), Key: aws.String(k),
			Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
		want = append(want, k)
	}
	keys, _, pages := listAll(t, c, "regional", "", "", 7)
	if !slices.Equal(keys, want) || pages != 4 {
		t.Errorf("plain bucket listing %v in %d pages, want sorted %v in 4", keys, pages, want)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("regional"), StartAfter: aws.String("k19"),
		Prefix: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	if !slices.Equal(got, want[20:]) {
		t.Errorf("StartAfter k19: %v", got)
	}
	if st := srv.Stats(); st.CreateSession != 0 || st.RejectedMissingToken != 0 {
		t.Errorf("plain bucket used sessions: %+v", st)
	}
}
