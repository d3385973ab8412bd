package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
)

// storeWorkspaces stores, before a submitted run starts, each workspace
// directory its Work Order names, as the scheduler would when the run
// starts, but read through an os.Root opened beneath --root's (with the
// store fence of a put tree): a directory swapped for a symlink since
// the Work Order was checked leads nowhere outside. The plan's nodes
// then name their trees ({"tree": CID}), which is what the scheduler
// stores in the run's Work Order for a directory anyway.
func (s *mcpServer) storeWorkspaces(ctx context.Context, plan *scheduler.Plan) error {
	wo := plan.WorkOrder
	var nodes map[string]*dag.Node
	for _, name := range wo.Order {
		n := wo.Nodes[name]
		if n.Workspace == nil || n.Workspace.Dir == "" {
			continue
		}
		dir := filepath.FromSlash(n.Workspace.Dir)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(plan.Dir, dir)
		}
		c, err := s.putDir(ctx, dir, true)
		if err != nil {
			return fmt.Errorf("node %q: workspace: %w", name, err)
		}
		if nodes == nil {
			nodes = make(map[string]*dag.Node, len(wo.Nodes))
			for k, v := range wo.Nodes {
				nodes[k] = v
			}
		}
		node := *n
		node.Workspace = &dag.Workspace{Tree: c}
		nodes[name] = &node
	}
	if nodes != nil {
		copied := *wo
		copied.Nodes = nodes
		plan.WorkOrder = &copied
	}
	return nil
}

// putDir stores the directory p names under the root as a tree, read
// through an os.Root beneath the root's, without any store or runner key
// in it (treeFence). A socket, device or named pipe in it is left out
// with skipSpecial (as the scheduler leaves it out of a workspace), an
// error without.
func (s *mcpServer) putDir(ctx context.Context, p string, skipSpecial bool) (c cid.Cid, err error) {
	real, err := s.root.resolve(p)
	if err != nil {
		return c, err
	}
	dir, err := s.root.openDir(real)
	if err != nil {
		return c, err
	}
	defer dir.Close()
	include, err := s.root.treeFence(real, dir)
	if err != nil {
		return c, err
	}
	opts := &cas.TreeOptions{Include: include}
	if skipSpecial {
		opts.Skipped = func(string, fs.FileMode) {}
	}
	err = s.globals(io.Discard, io.Discard).withStore(false, func(st cas.Store) error {
		c, err = cas.PutTreeRoot(ctx, st, dir, opts)
		return err
	})
	return c, err
}
