package s3expresstest_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/zonalblob/zonalblob/blob/latency"
	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

func crc32c(s string) string {
	sum := crc32.Checksum([]byte(s), crc32.MakeTable(crc32.Castagnoli))
	return base64.StdEncoding.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
}

func TestCRC32CIsVerifiedStoredAndReturned(t *testing.T) {
	var mu sync.Mutex
	var sent string
	_, c := newDirServer(t, s3expresstest.Options{Observe: func(op s3expresstest.Op, r *http.Request) {
		if op == s3expresstest.OpPutObject {
			mu.Lock()
			sent = r.Header.Get("x-amz-checksum-crc32c")
			mu.Unlock()
		}
	}})
	ctx := context.Background()
	const body = "checksummed payload"
	out, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(dirBucket), Key: aws.String("c"), Body: strings.NewReader(body),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if sent != crc32c(body) {
		t.Errorf("client sent x-amz-checksum-crc32c %q, want %q", sent, crc32c(body))
	}
	mu.Unlock()
	if aws.ToString(out.ChecksumCRC32C) != crc32c(body) {
		t.Errorf("PutObject answered checksum %q, want %q", aws.ToString(out.ChecksumCRC32C), crc32c(body))
	}

	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("c"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(head.ChecksumCRC32C) != crc32c(body) {
		t.Errorf("HeadObject with checksum mode: %q, want %q", aws.ToString(head.ChecksumCRC32C), crc32c(body))
	}
	plain, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("c")})
	if err != nil {
		t.Fatal(err)
	}
	if plain.ChecksumCRC32C != nil {
		t.Errorf("HeadObject without checksum mode returned a checksum")
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("c"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(got.Body) // the SDK validates the body against the checksum here
	got.Body.Close()
	if err != nil || string(b) != body || aws.ToString(got.ChecksumCRC32C) != crc32c(body) {
		t.Errorf("GetObject: %q %q %v", b, aws.ToString(got.ChecksumCRC32C), err)
	}

	// A checksum that does not match the body is refused and stores nothing.
	_, err = c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(dirBucket), Key: aws.String("bad"), Body: strings.NewReader(body),
		ChecksumCRC32C: aws.String(crc32c("something else")),
	})
	if apiCode(err) != "BadDigest" {
		t.Errorf("mismatched CRC32C: got %v, want BadDigest", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("bad")}); err == nil {
		t.Errorf("object with a bad checksum was stored")
	}
}

func TestIfNoneMatchRaceHasOneWinner(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		t.Run(fmt.Sprintf("ConflictOnConcurrentWrite=%v", conflict), func(t *testing.T) {
			// Writes take a while, so the 16 writers overlap.
			srv, c := newDirServer(t, s3expresstest.Options{
				ConflictOnConcurrentWrite: conflict,
				Profile:                   s3expresstest.Profile{Put: latency.Dist{P50: 5 * time.Millisecond, P99: 20 * time.Millisecond}},
			})
			put(t, c, "warm", "x") // one session for all writers
			const writers = 16
			codes := make([]string, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					_, err := c.PutObject(context.Background(), &s3.PutObjectInput{
						Bucket: aws.String(dirBucket), Key: aws.String("lock"), Body: strings.NewReader(fmt.Sprint(i)),
						IfNoneMatch: aws.String("*"),
					}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
					if err == nil {
						codes[i] = "OK"
					} else {
						codes[i] = apiCode(err)
					}
				})
			}
			wg.Wait()
			var winners, lost412, lost409 int
			for _, code := range codes {
				switch code {
				case "OK":
					winners++
				case "PreconditionFailed":
					lost412++
				case "ConditionalRequestConflict":
					lost409++
				default:
					t.Errorf("unexpected outcome %q", code)
				}
			}
			if winners != 1 {
				t.Fatalf("%d writers won, want exactly 1 (outcomes %v)", winners, codes)
			}
			if !conflict && lost409 != 0 {
				t.Errorf("409s without ConflictOnConcurrentWrite: %v", codes)
			}
			st := srv.Stats()
			if st.PreconditionFailed != int64(lost412) || st.Conflicts != int64(lost409) {
				t.Errorf("stats 412=%d 409=%d, clients saw %d and %d", st.PreconditionFailed, st.Conflicts, lost412, lost409)
			}
			t.Logf("1 winner, %d x 412, %d x 409", lost412, lost409)
			won := slices.Index(codes, "OK")
			if got := get(t, c, "lock"); got != fmt.Sprint(won) {
				t.Errorf("stored %q, the winner wrote %q", got, fmt.Sprint(won))
			}
		})
	}
}

func TestIfMatchOnRandomETag(t *testing.T) {
	_, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	first := put(t, c, "doc", "v1")
	md5sum := md5.Sum([]byte("v1"))
	if etag := aws.ToString(first.ETag); etag == `"`+hex.EncodeToString(md5sum[:])+`"` || len(etag) < 10 {
		t.Errorf("ETag %s is the MD5 of the body; directory buckets use random ETags", etag)
	}
	same := put(t, c, "doc2", "v1")
	if aws.ToString(same.ETag) == aws.ToString(first.ETag) {
		t.Errorf("same content got the same ETag %s", aws.ToString(same.ETag))
	}

	second, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc"),
		Body: strings.NewReader("v2"), IfMatch: first.ETag})
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc"),
		Body: strings.NewReader("v3"), IfMatch: first.ETag})
	if apiCode(err) != "PreconditionFailed" {
		t.Errorf("If-Match with a stale ETag: got %v, want PreconditionFailed", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("missing"),
		Body: strings.NewReader("v1"), IfMatch: first.ETag})
	if apiCode(err) != "NoSuchKey" {
		t.Errorf("If-Match on a missing key: got %v, want NoSuchKey", err)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc")})
	if err != nil || aws.ToString(head.ETag) != aws.ToString(second.ETag) {
		t.Fatalf("HeadObject ETag %s, want %s (%v)", aws.ToString(head.ETag), aws.ToString(second.ETag), err)
	}

	// Conditional delete.
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc"), IfMatch: first.ETag})
	if apiCode(err) != "PreconditionFailed" {
		t.Errorf("DeleteObject If-Match stale: got %v, want PreconditionFailed", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc"), IfMatch: second.ETag}); err != nil {
		t.Errorf("DeleteObject If-Match current: %v", err)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("doc")}); err == nil {
		t.Errorf("object still exists after conditional delete")
	}
}

func TestAppendWithWriteOffset(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	appendAt := func(key string, off int64, data string) (*s3.PutObjectOutput, error) {
		return c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String(key),
			Body: strings.NewReader(data), WriteOffsetBytes: aws.Int64(off), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	}
	if _, err := appendAt("log", 0, "hello"); err != nil {
		t.Fatalf("append at 0 to a missing object creates it: %v", err)
	}
	out, err := appendAt("log", 5, ", world")
	if err != nil {
		t.Fatalf("append at the current size: %v", err)
	}
	if aws.ToInt64(out.Size) != 12 {
		t.Errorf("PutObject Size after append = %d, want 12", aws.ToInt64(out.Size))
	}
	if got := get(t, c, "log"); got != "hello, world" {
		t.Fatalf("after appends: %q", got)
	}
	for _, off := range []int64{0, 11, 13} {
		if _, err := appendAt("log", off, "!"); apiCode(err) != "InvalidWriteOffset" {
			t.Errorf("append at %d to a 12-byte object: got %v, want InvalidWriteOffset", off, err)
		}
	}
	if _, err := appendAt("other", 3, "x"); apiCode(err) != "InvalidWriteOffset" {
		t.Errorf("append at 3 to a missing object: got %v, want InvalidWriteOffset", err)
	}
	// The full-object checksum follows the appended content.
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("log"),
		ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(head.ChecksumCRC32C) != crc32c("hello, world") || aws.ToInt64(head.ContentLength) != 12 {
		t.Errorf("HeadObject after append: crc %q size %d err %v", aws.ToString(head.ChecksumCRC32C), aws.ToInt64(head.ContentLength), err)
	}
	if st := srv.Stats(); st.Appends != 6 {
		t.Errorf("Appends = %d, want 6", st.Appends)
	}
}

func TestDeleteObjects(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	var ids []types.ObjectIdentifier
	for i := range 20 {
		k := fmt.Sprintf("d/%02d", i)
		put(t, c, k, "x")
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
	}
	ids = append(ids, types.ObjectIdentifier{Key: aws.String("d/never-existed")})
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(dirBucket), Delete: &types.Delete{Objects: ids}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 21 || len(out.Errors) != 0 {
		t.Errorf("Deleted %d, Errors %d; want 21 and 0", len(out.Deleted), len(out.Errors))
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(dirBucket), Prefix: aws.String("d/")})
	if err != nil || len(list.Contents) != 0 {
		t.Errorf("after DeleteObjects: %d objects left (%v)", len(list.Contents), err)
	}
	tooMany := make([]types.ObjectIdentifier, 1001)
	for i := range tooMany {
		tooMany[i] = types.ObjectIdentifier{Key: aws.String(fmt.Sprint(i))}
	}
	_, err = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(dirBucket), Delete: &types.Delete{Objects: tooMany}})
	if apiCode(err) != "MalformedXML" {
		t.Errorf("1001 keys: got %v, want MalformedXML", err)
	}
	if st := srv.Stats(); st.DeleteObjects != 2 || st.DeletedKeys != 21 {
		t.Errorf("DeleteObjects=%d DeletedKeys=%d, want 2 and 21", st.DeleteObjects, st.DeletedKeys)
	}
}

func TestMultipartUpload(t *testing.T) {
	_, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	part1 := strings.Repeat("a", 5<<20)
	part2 := "tail"
	upload := func(ifNoneMatch bool) (*s3.CompleteMultipartUploadOutput, error) {
		created, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(dirBucket),
			Key: aws.String("mp"), ContentType: aws.String("text/plain"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		for i, body := range []string{part1, part2} {
			n := int32(i + 1)
			p, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(dirBucket), Key: aws.String("mp"),
				UploadId: created.UploadId, PartNumber: aws.Int32(n), Body: strings.NewReader(body),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: p.ETag, ChecksumCRC32C: p.ChecksumCRC32C})
		}
		in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(dirBucket), Key: aws.String("mp"),
			UploadId: created.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}
		if ifNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		return c.CompleteMultipartUpload(ctx, in)
	}
	done, err := upload(true)
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(head.ContentLength) != int64(len(part1)+len(part2)) || aws.ToString(head.ContentType) != "text/plain" ||
		aws.ToString(head.ETag) != aws.ToString(done.ETag) {
		t.Errorf("HeadObject: size %d type %q etag %s (complete said %s)", aws.ToInt64(head.ContentLength),
			aws.ToString(head.ContentType), aws.ToString(head.ETag), aws.ToString(done.ETag))
	}
	if got := get(t, c, "mp"); got != part1+part2 {
		t.Errorf("multipart content differs (len %d)", len(got))
	}
	if _, err := upload(true); apiCode(err) != "PreconditionFailed" {
		t.Errorf("second CompleteMultipartUpload with If-None-Match: got %v, want PreconditionFailed", err)
	}
}

// TestAppendPartLimit checks S3 Express's limit of 10,000 parts per object:
// each append is a part, and the append past the limit fails with 400
// TooManyParts and leaves the object as it was.
func TestAppendPartLimit(t *testing.T) {
	srv, c := newDirServer(t, s3expresstest.Options{})
	ctx := context.Background()
	appendAt := func(key string, off int64, data string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String(key),
			Body: strings.NewReader(data), WriteOffsetBytes: aws.Int64(off)})
		return err
	}
	for i := range s3expresstest.DefaultMaxObjectParts {
		if err := appendAt("log", int64(i), "x"); err != nil {
			t.Fatalf("append %d: %v", i+1, err)
		}
	}
	err := appendAt("log", s3expresstest.DefaultMaxObjectParts, "y")
	if apiCode(err) != "TooManyParts" || httpStatusOf(err) != http.StatusBadRequest {
		t.Fatalf("append %d: got %v (status %d), want 400 TooManyParts", s3expresstest.DefaultMaxObjectParts+1, err, httpStatusOf(err))
	}
	if got := get(t, c, "log"); got != strings.Repeat("x", s3expresstest.DefaultMaxObjectParts) {
		t.Errorf("a refused append changed the object: %d bytes", len(got))
	}
	if st := srv.Stats(); st.Appends != s3expresstest.DefaultMaxObjectParts+1 || st.TooManyParts != 1 {
		t.Errorf("Appends %d, TooManyParts %d; want %d and 1", st.Appends, st.TooManyParts, s3expresstest.DefaultMaxObjectParts+1)
	}
}

// TestAppendPartLimitOption checks a lower limit, that a PUT counts as one
// part and a multipart upload as its parts, and that a copy starts a new count.
func TestAppendPartLimitOption(t *testing.T) {
	_, c := newDirServer(t, s3expresstest.Options{MaxObjectParts: 3})
	ctx := context.Background()
	appendAt := func(key string, off int64, data string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String(key),
			Body: strings.NewReader(data), WriteOffsetBytes: aws.Int64(off)})
		return err
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("p"), Body: strings.NewReader("a")}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "", "TooManyParts"} {
		if err := appendAt("p", int64(1+i), "b"); apiCode(err) != want {
			t.Fatalf("append %d after a PUT: %v, want code %q", i+1, err, want)
		}
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(dirBucket), Key: aws.String("q"),
		CopySource: aws.String(dirBucket + "/p")}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "", "TooManyParts"} {
		if err := appendAt("q", int64(3+i), "c"); apiCode(err) != want {
			t.Fatalf("append %d after a copy: %v, want code %q", i+1, err, want)
		}
	}
	if got := get(t, c, "q"); got != "abbcc" {
		t.Errorf("copy after appends: %q", got)
	}
}

func httpStatusOf(err error) int {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}
