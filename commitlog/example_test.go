package commitlog_test

import (
	"context"
	"fmt"

	"github.com/zonalblob/zonalblob/blob"
	"github.com/zonalblob/zonalblob/commitlog"
)

// A log over three zones (mem:// here; zonal buckets in production): an
// Append returns the offset of its first record once two zones hold it,
// and a reader from offset 0 reads the records in order.
func Example() {
	ctx := context.Background()
	var zones []blob.Store
	for range 3 {
		z, err := blob.Open(ctx, "mem://")
		if err != nil {
			fmt.Println(err)
			return
		}
		zones = append(zones, z)
	}
	l, err := commitlog.Open(ctx, zones, "orders", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for _, rec := range []string{"created", "paid", "shipped"} {
		off, err := l.Append(ctx, []byte(rec))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(off, rec)
	}
	r, err := commitlog.NewReader(zones, "orders", 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for range 3 {
		rec, err := r.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("read %d %s\n", rec.Offset, rec.Data)
	}
	// Output:
	// 0 created
	// 1 paid
	// 2 shipped
	// read 0 created
	// read 1 paid
	// read 2 shipped
}

// A striped log of four stripes: each zone writes four segment objects at
// once, so a log of large records is not held to one stream's bandwidth.
// One Append of five records spans the stripes; it returns once all five
// are committed, and a reader serves them in order.
func ExampleOpenStriped() {
	ctx := context.Background()
	var zones []blob.Store
	for range 3 {
		z, err := blob.Open(ctx, "mem://")
		if err != nil {
			fmt.Println(err)
			return
		}
		zones = append(zones, z)
	}
	s, err := commitlog.OpenStriped(ctx, zones, "events", 4, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	off, err := s.Append(ctx, []byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("appended from", off, "committed to", s.Committed())
	r, err := commitlog.NewStripedReader(zones, "events", 4, 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for range 5 {
		rec, err := r.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("read %d %s\n", rec.Offset, rec.Data)
	}
	// Output:
	// appended from 0 committed to 4
	// read 0 a
	// read 1 b
	// read 2 c
	// read 3 d
	// read 4 e
}
