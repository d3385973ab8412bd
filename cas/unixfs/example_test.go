package unixfs_test

import (
	"context"
	"fmt"
	"os"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/ipath"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/unixfs"
)

// A directory kubo exported ('ipfs dag export') is imported, then one of
// its files is found by path and read.
func ExampleReadFile() {
	ctx := context.Background()
	st := memstore.New()
	f, err := os.Open("testdata/dir-with-files.car")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	res, err := cas.ImportCAR(ctx, st, f, nil)
	if err != nil {
		panic(err)
	}
	root := res.Roots[0].CID
	p, _, _ := ipath.Parse(root.String() + "/hello.txt")
	file, err := ipath.Resolve(ctx, st, p)
	if err != nil {
		panic(err)
	}
	if _, err := unixfs.ReadFile(ctx, st, file.CID, os.Stdout, nil); err != nil {
		panic(err)
	}
	info, err := unixfs.Stat(ctx, st, root)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Type, info.Entries, "entries,", info.Size, "bytes")
	// Output:
	// hello world
	// unixfs/directory 4 entries, 1100 bytes
}
