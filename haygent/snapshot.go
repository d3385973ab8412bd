package haygent

import (
	"os"
	"path/filepath"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/ipfs/go-cid"
)

// needWorkspace makes the empty workspace of a run given none.
func (r *runner) needWorkspace() error {
	if r.workspace != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "hg-workspace-*")
	if err != nil {
		return err
	}
	r.workspace, r.tempWorkspace = dir, true
	return nil
}

// finalWorkspace is the workspace as the run leaves it, stored as
// snapshotWorkspace stores it: what a Work Order hands on along a
// workspace edge. A run that never had a workspace leaves the one it
// started with (start, the empty tree); a run whose head is an
// evaluation of the gates leaves the workspace that evaluation observed,
// which nothing has changed since; any other run's is stored now.
func (r *runner) finalWorkspace(start *cas.Link) (*cas.Link, error) {
	switch {
	case r.workspace == "":
		return start, nil
	case r.observed.Defined() && r.observedSeq == r.seq-1:
		return &cas.Link{Cid: r.observed}, nil
	}
	return r.snapshotWorkspace()
}

// emptyTree is the block of the empty hg/tree@1: the workspace of a run
// given none.
var emptyTree = func() cas.Block {
	data, err := cas.Marshal(&cas.TreeNode{Type: cas.TypeTree, Entries: []cas.TreeEntry{}})
	if err != nil {
		panic(err)
	}
	return cas.NewBlock(cas.DagCBOR, data)
}()

// EmptyTree is the CID of the empty hg/tree@1, the workspace snapshot of
// a run given no workspace.
func EmptyTree() cid.Cid { return emptyTree.CID() }

// snapshotWorkspace stores what the read grants let the Haygent see of its
// workspace, as a tree. Symlinks are stored as links, never followed. A
// run given no workspace has an empty one. An hg store in the workspace
// is left out, whatever the grants say: a step never sees one, and a
// store holds the runner's signing key.
func (r *runner) snapshotWorkspace() (*cas.Link, error) {
	if r.workspace == "" {
		return &cas.Link{Cid: emptyTree.CID()}, r.w.Add(r.ctx, emptyTree)
	}
	set := r.pkg.Permissions
	fence, err := workspace.NewFence(r.workspace, r.opts.StoreDir)
	if err != nil {
		return nil, err
	}
	c, err := cas.PutTree(r.ctx, r.st, r.workspace, &cas.TreeOptions{
		Skipped: func(string, os.FileMode) {},
		Include: func(p string, isDir bool) bool {
			if fence.Holds(p) {
				return false
			}
			if isDir {
				if !set.MayMatchUnder(perm.VerbRead, p) {
					return false
				}
				// A store reached by another name is still the store.
				fi, err := os.Lstat(filepath.Join(r.workspace, filepath.FromSlash(p)))
				return err != nil || !fence.IsStore(fi)
			}
			return set.Check(perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: p}).Allowed
		},
	})
	if err != nil {
		return nil, err
	}
	return &cas.Link{Cid: c}, nil
}
