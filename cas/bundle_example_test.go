package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
)

func ExampleImportCAR() {
	ctx := context.Background()
	here, there := memstore.New(), memstore.New()
	root, _, err := cas.PutFile(ctx, here, strings.NewReader("hello"), nil)
	if err != nil {
		panic(err)
	}

	// The closure of root, as a CARv1 file.
	var car bytes.Buffer
	if _, err := cas.ExportCAR(ctx, here, []cid.Cid{root}, &car, nil); err != nil {
		panic(err)
	}

	// Every block checked, then stored and the root pinned; or nothing.
	res, err := cas.ImportCAR(ctx, there, bytes.NewReader(car.Bytes()), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Blocks, res.Roots[0].Name)

	// A flipped byte in the last section: refused, by offset and CID.
	bad := bytes.Clone(car.Bytes())
	bad[len(bad)-1] ^= 1
	_, err = cas.ImportCAR(ctx, memstore.New(), bytes.NewReader(bad), nil)
	fmt.Println(err)
	// Output:
	// 2 bundle/bafyreictjea2xikqziptbs2cxxchcstved2iafzx4igitm6szwpzuq5v74
	// car section at byte 174 (bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq): block bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq is corrupt: its bytes hash to bafkreigr3u7e6u5pwzn6k52ikplaw5h2claqw5u4eyqwkvrmkkd6nalocu
}
