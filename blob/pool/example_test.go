package pool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/gcsrapid" // registers gcsrapid://
	"github.com/zonalblob/zonalblob/blob/gcsrapid/gcsrapidtest"
	"github.com/zonalblob/zonalblob/blob/pool"
	"github.com/zonalblob/zonalblob/quorum"
)

// A pool of objects created ahead of need in front of a 2-of-3 quorum of
// zonal buckets (three buckets on the in-process emulator, each without a
// pool of its own): a Create takes a prewarmed name on every zone, so it
// costs the quorum's write and not the creates.
func Example() {
	srv, err := gcsrapidtest.NewServer(gcsrapidtest.Options{
		Buckets: []gcsrapidtest.Bucket{{Name: "zone-a", Zonal: true}, {Name: "zone-b", Zonal: true}, {Name: "zone-c", Zonal: true}},
		Profile: gcsrapidtest.Zero(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ctx := context.Background()
	var zones []blob.Store
	for _, b := range []string{"zone-a", "zone-b", "zone-c"} {
		z, err := blob.Open(ctx, "gcsrapid://"+b+"?pool_size=0&endpoint="+srv.Endpoint())
		if err != nil {
			fmt.Println(err)
			return
		}
		zones = append(zones, z)
	}
	q, err := quorum.New(zones, quorum.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := pool.NewCreator(q, pool.CreatorOptions{Capacity: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close() // closes the quorum and its zones too
	fmt.Println(blob.CapabilitiesOf(q).Create, blob.CapabilitiesOf(c).Create)
	key, err := blob.CreateBytes(ctx, c, "events/", []byte("first event"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := blob.ReadAll(ctx, c, key)
	fmt.Printf("%v %s %v\n", strings.HasPrefix(key, "events/"), b, err)
	// Output:
	// false true
	// true first event <nil>
}
