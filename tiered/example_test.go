package tiered_test

import (
	"context"
	"fmt"
	"time"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/tiered"
)

// Writes land in the hot store and a compactor moves them to the cold
// one once they are older than After: here a pass run by hand moves both
// objects into one pack, and reads find them there. A Delete of an object a
// move may be taking leaves a grave in hot, which a later pass retires.
func Example() {
	ctx := context.Background()
	hot, _ := blob.Open(ctx, "mem://")
	cold, _ := blob.Open(ctx, "mem://")
	s, err := tiered.New(hot, cold, tiered.Options{After: time.Nanosecond, Manual: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, k := range []string{"a", "b"} {
		if err := blob.Put(ctx, s, k, []byte("value of "+k), nil); err != nil {
			fmt.Println(err)
			return
		}
	}
	time.Sleep(time.Millisecond) // older than After
	res := s.CompactOnce(ctx)
	fmt.Println(res.Moved, s.Stats().Packs)
	b, err := blob.ReadAll(ctx, s, "a")
	fmt.Printf("%s %v\n", b, err)
	if err := blob.Put(ctx, s, "c", []byte("young"), nil); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Delete(ctx, "c", nil), s.Stats().Graves)
	// Output:
	// 2 1
	// value of a <nil>
	// <nil> 1
}
