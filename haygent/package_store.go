package haygent

import (
	"context"
	"fmt"
	"os"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/workspace"
)

// PutPackage stores the Haygent package directory dir as a tree, read
// through an [os.Root] at it, and returns its CID. A package is stored
// whole, so one that holds an hg store is refused: a directory named as
// stores are, the store storeDir (by path or identity), a directory that
// is a store by its contents, or storeDir's runner key under another
// name (see [workspace.Fence.Keep]). A store holds the runner's signing
// key, and what is stored, any reader of the store may read.
func PutPackage(ctx context.Context, st cas.BlockWriter, dir, storeDir string) (cid.Cid, error) {
	fence, err := workspace.NewFence(dir, storeDir)
	if err != nil {
		return cid.Undef, fmt.Errorf("package %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return cid.Undef, err
	}
	defer root.Close()
	var held []string
	keep := fence.Keep(root, func(p string) { held = append(held, p) })
	if !keep(".", true) {
		return cid.Undef, fmt.Errorf("package %s is %s: refused", dir, workspace.RuleStore)
	}
	c, err := cas.PutTreeRoot(ctx, st, root, &cas.TreeOptions{Include: keep})
	if err != nil {
		return cid.Undef, err
	}
	if len(held) > 0 {
		return cid.Undef, fmt.Errorf("package %s holds an hg store or a runner key (%s): refused", dir, held[0])
	}
	return c, nil
}
