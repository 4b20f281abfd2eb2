package s3expresstest_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/zonalblob/zonalblob/blob/s3express/s3expresstest"
)

func ExampleNewServer() {
	srv, err := s3expresstest.NewServer(s3expresstest.Options{
		Buckets: []string{"logs--use1-az4--x-s3"},
		Profile: s3expresstest.MustProfile("zero"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	client := srv.Client()
	ctx := context.Background()

	// The SDK sees a directory bucket name, calls CreateSession, and signs
	// the PutObject with the session credentials.
	_, err = client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String("logs--use1-az4--x-s3"),
		Key:               aws.String("segment-0001"),
		Body:              strings.NewReader("first record"),
		IfNoneMatch:       aws.String("*"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String("logs--use1-az4--x-s3"), Key: aws.String("segment-0001"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer out.Body.Close()
	body, _ := io.ReadAll(out.Body)
	st := srv.Stats()
	fmt.Printf("%s; sessions %d, puts %d, gets %d\n", body, st.CreateSession, st.PutObject, st.GetObject)
	// Output: first record; sessions 1, puts 1, gets 1
}
