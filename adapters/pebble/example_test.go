package pebble_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/remote"
	"github.com/cockroachdb/pebble/v2/vfs"

	zpebble "github.com/zonalblob/zonalblob/adapters/pebble"
	"github.com/zonalblob/zonalblob/blob"
	_ "github.com/zonalblob/zonalblob/blob/regional"
)

// A pebble DB whose sstables all live in a zonalblob Store (mem:// here; a
// quorum:// of zonal buckets in production). The WAL and manifest stay on
// the local file system.
func Example() {
	ctx := context.Background()
	s, err := blob.Open(ctx, "mem://")
	if err != nil {
		fmt.Println(err)
		return
	}
	shared := zpebble.New(s)
	defer shared.Close()

	opts := &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}}
	opts.Experimental.RemoteStorage = remote.MakeSimpleFactory(map[remote.Locator]remote.Storage{"zonal": shared})
	opts.Experimental.CreateOnShared = remote.CreateOnSharedAll
	opts.Experimental.CreateOnSharedLocator = "zonal"
	db, err := pebble.Open("db", opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	if err := db.SetCreatorID(1); err != nil {
		fmt.Println(err)
		return
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		fmt.Println(err)
		return
	}
	if err := db.Flush(); err != nil { // the sstable goes to the Store
		fmt.Println(err)
		return
	}
	objects, err := shared.List("", "")
	fmt.Println(len(objects), err) // the sstable and pebble's reference marker
	v, closer, err := db.Get([]byte("k"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s\n", v)
	closer.Close()
	// Output:
	// 2 <nil>
	// v
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
