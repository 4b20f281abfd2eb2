package blob_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/zonalblob/zonalblob/blob"
)

// A Store is opened by URL; the helpers write, read and list through any
// of them. A conditional write (IfNotExist) refuses a key that exists.
func Example() {
	ctx := context.Background()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for _, k := range []string{"logs/0001", "logs/0002"} {
		if err := blob.Put(ctx, s, k, []byte("record "+k), nil); err != nil {
			fmt.Println(err)
			return
		}
	}
	b, err := blob.ReadAll(ctx, s, "logs/0001")
	fmt.Printf("%s %v\n", b, err)
	for obj, err := range blob.All(ctx, s, &blob.ListOptions{Prefix: "logs/"}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(obj.Key, obj.Size)
	}
	err = blob.Put(ctx, s, "logs/0001", []byte("again"), &blob.WriterOptions{If: blob.IfNotExist()})
	fmt.Println(errors.Is(err, blob.ErrExists))
	// Output:
	// record logs/0001 <nil>
	// logs/0001 16
	// logs/0002 16
	// true
}

// One Condition serves every operation that takes one: a copy that replaces
// only the version of its destination that was read, a delete of one
// version only. A condition an operation cannot take is refused before any
// I/O.
func ExampleCondition() {
	ctx := context.Background()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	blob.Put(ctx, s, "config", []byte("v1"), nil)
	blob.Put(ctx, s, "config.next", []byte("v2"), nil)
	a, err := s.Stat(ctx, "config")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Promote config.next if config is still the version read.
	err = blob.Copy(ctx, s, "config", "config.next", &blob.CopyOptions{If: blob.IfGenerationMatch(a.Generation)})
	fmt.Println(err)
	// That version is gone, so a delete on its condition fails.
	err = s.Delete(ctx, "config", &blob.DeleteOptions{If: blob.IfGenerationMatch(a.Generation)})
	fmt.Println(errors.Is(err, blob.ErrPrecondition))
	// A delete removes an object that exists: IfNotExist makes no sense.
	err = s.Delete(ctx, "config", &blob.DeleteOptions{If: blob.IfNotExist()})
	fmt.Println(errors.Is(err, blob.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
	// true
}
