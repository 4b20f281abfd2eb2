package quorum_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/blob/fault"
	"github.com/zonalblob/zonalblob/quorum"
)

// Three zones (mem:// here; zonal buckets in production) behind a 2-of-3
// quorum: a write is acknowledged once two hold it, and with a zone down
// the value is still read and written.
func Example() {
	ctx := context.Background()
	var zones []*fault.Store
	var replicas []blob.Store
	for range 3 {
		m, err := blob.Open(ctx, "mem://")
		if err != nil {
			fmt.Println(err)
			return
		}
		f := fault.Wrap(m, fault.Options{})
		zones, replicas = append(zones, f), append(replicas, f)
	}
	q, err := quorum.New(replicas, quorum.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	if err := blob.Put(ctx, q, "k", []byte("v1"), nil); err != nil {
		fmt.Println(err)
		return
	}
	zones[0].SetDown(true) // a zone goes
	b, err := blob.ReadAll(quorum.WithConsistency(ctx, quorum.ReadMajority), q, "k")
	fmt.Printf("%s %v\n", b, err)
	fmt.Println(blob.Put(ctx, q, "k", []byte("v2"), nil))
	fmt.Println(errors.Is(q.Delete(ctx, "missing", nil), blob.ErrNotFound))
	// Output:
	// v1 <nil>
	// <nil>
	// true
}
