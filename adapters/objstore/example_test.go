package objstore_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/thanos-io/objstore"

	zobjstore "github.com/zonalblob/zonalblob/adapters/objstore"
	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

// A zonalblob Store (mem:// here; a quorum:// of zonal buckets in
// production) serving as the bucket of a Thanos-style engine.
func Example() {
	ctx := context.Background()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	var bkt objstore.Bucket = zobjstore.New(s, "blocks")
	defer bkt.Close()

	for _, name := range []string{"01H/meta.json", "01H/chunks/000001", "01J/meta.json"} {
		if err := bkt.Upload(ctx, name, strings.NewReader("data of "+name)); err != nil {
			fmt.Println(err)
			return
		}
	}
	bkt.Iter(ctx, "", func(name string) error { fmt.Println(name); return nil })
	bkt.Iter(ctx, "01H", func(name string) error { fmt.Println(name); return nil }, objstore.WithRecursiveIter())

	rc, err := bkt.GetRange(ctx, "01J/meta.json", 8, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	fmt.Printf("%s\n", b)

	_, err = bkt.Get(ctx, "01K/meta.json")
	fmt.Println(bkt.IsObjNotFoundErr(err))
	// Output:
	// 01H/
	// 01J/
	// 01H/chunks/000001
	// 01H/meta.json
	// 01J
	// true
}
