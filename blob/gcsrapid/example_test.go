package gcsrapid_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid" // registers gcsrapid://
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
)

// A zonal bucket on the in-process emulator (the same google.storage.v2
// protocol as the service, over gRPC on 127.0.0.1), opened by URL with its
// endpoint. Create names the object from a pool of objects created ahead
// of need, so a small write costs one round trip.
func Example() {
	srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
		Buckets: []gcsrapidtest.Bucket{{Name: "rapid", Zonal: true}},
		Profile: gcsrapidtest.Zero(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx := context.Background()
	s, err := blob.Open(ctx, "gcsrapid://rapid?endpoint="+srv.Endpoint())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(blob.CapabilitiesOf(s).Create)
	key, err := blob.CreateBytes(ctx, s, "segments/", []byte("first record"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := blob.ReadAll(ctx, s, key)
	fmt.Printf("%v %s %v\n", strings.HasPrefix(key, "segments/"), b, err)
	// Output:
	// true
	// true first record <nil>
}
