package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/ipfs/go-cid"
)

// wsTree is a workspace tree and every block of it, as a node is handed
// it: engines run an invocation from its blocks alone.
type wsTree struct {
	root   cid.Cid
	blocks []cas.Block
	index  map[cid.Cid]cas.Block // blocks by CID
}

// checkWorkspaceDirs checks, before anything is stored, that every
// directory a node names as its workspace is one.
func checkWorkspaceDirs(wo *dag.WorkOrder, dir string) error {
	var errs []error
	for _, name := range wo.Order {
		ws := wo.Nodes[name].Workspace
		if ws == nil || ws.Dir == "" {
			continue
		}
		p := workspaceDir(dir, ws.Dir)
		info, err := os.Stat(p)
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			errs = append(errs, &dag.FieldError{Node: name, Field: "workspace", Msg: fmt.Sprintf("%s: %v", p, pe.Err)})
		case err != nil:
			errs = append(errs, &dag.FieldError{Node: name, Field: "workspace", Msg: err.Error()})
		case !info.IsDir():
			errs = append(errs, &dag.FieldError{Node: name, Field: "workspace", Msg: p + ": not a directory"})
		}
	}
	return errors.Join(errs...)
}

// workspaceDir is the directory a Work Order in dir names as p.
func workspaceDir(dir, p string) string {
	p = filepath.FromSlash(p)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// storeWorkspaces stores the workspace directories of the plan's nodes as
// trees in st and resolves their pins, and returns the Work Order with
// each of those named by its tree, to be stored: from then on a run works
// from the store alone. A tree named by CID or pin must be in st whole.
// No store is stored: every directory named like one or holding what one
// holds is left out, and so are storeDir if it lies inside a workspace
// and its runner key under any other name (workspace.Fence.Keep).
func storeWorkspaces(ctx context.Context, st cas.Store, plan *Plan, storeDir string) (*dag.WorkOrder, error) {
	wo := plan.WorkOrder
	var out *dag.WorkOrder
	for _, name := range sortedNames(wo) {
		n := wo.Nodes[name]
		ws := n.Workspace
		if ws == nil || ws.From != "" {
			continue
		}
		var c cid.Cid
		switch {
		case ws.Dir != "":
			dir := workspaceDir(plan.Dir, ws.Dir)
			fence, err := workspace.NewFence(dir, storeDir)
			if err != nil {
				return nil, fmt.Errorf("node %q: workspace %s: %w", name, dir, err)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				return nil, fmt.Errorf("node %q: store workspace %s: %w", name, dir, err)
			}
			c, err = cas.PutTreeRoot(ctx, st, root, &cas.TreeOptions{
				Skipped: func(string, fs.FileMode) {},
				Include: fence.Keep(root, nil),
			})
			root.Close()
			if err != nil {
				return nil, fmt.Errorf("node %q: store workspace %s: %w", name, dir, err)
			}
		case ws.Pin != "":
			var err error
			if c, err = st.Pin(ctx, ws.Pin); errors.Is(err, cas.ErrNotFound) {
				return nil, fmt.Errorf("node %q: workspace %s: no such pin in the store", name, ws)
			} else if err != nil {
				return nil, err
			}
			fallthrough
		default:
			if !c.Defined() {
				c = ws.Tree
			}
			if err := checkStoredTree(ctx, st, c); err != nil {
				return nil, fmt.Errorf("node %q: workspace %s: %w", name, ws, err)
			}
		}
		if out == nil {
			copied := *wo
			copied.Nodes = make(map[string]*dag.Node, len(wo.Nodes))
			for k, v := range wo.Nodes {
				copied.Nodes[k] = v
			}
			out = &copied
		}
		node := *n
		node.Workspace = &dag.Workspace{Tree: c}
		out.Nodes[name] = &node
	}
	if out == nil {
		return wo, nil
	}
	return out, nil
}

// checkStoredTree checks that c is an hg/tree@1 whose every block is in
// st and intact.
func checkStoredTree(ctx context.Context, st cas.Store, c cid.Cid) error {
	if _, err := cas.LoadTree(ctx, st, c); err != nil {
		return err
	}
	return cas.CheckClosure(ctx, st, c)
}

// storedTree reads every block of the tree c from st.
func storedTree(ctx context.Context, st cas.Store, c cid.Cid) (*wsTree, error) {
	if _, err := cas.LoadTree(ctx, st, c); err != nil {
		return nil, err
	}
	t := &wsTree{root: c}
	err := cas.Walk(ctx, st, []cid.Cid{c}, nil, func(c cid.Cid, data []byte) error {
		b, err := cas.NewBlockWithCID(c, bytes.Clone(data))
		t.blocks = append(t.blocks, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", c, err)
	}
	t.index = blockIndex(t.blocks)
	return t, nil
}

// treeFrom collects every block of the tree root from blocks a node's
// work returned (or, for a block they share with the package, from
// base). A block missing from both is an error: the work does not hold
// the tree its receipt names.
func treeFrom(root cid.Cid, work map[cid.Cid]cas.Block, base map[cid.Cid]cas.Block) (*wsTree, error) {
	t := &wsTree{root: root}
	seen := map[cid.Cid]bool{root: true}
	stack := []cid.Cid{root}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		b, ok := work[c]
		if !ok {
			if b, ok = base[c]; !ok {
				return nil, fmt.Errorf("tree %s: block %s is not among the node's blocks", root, c)
			}
		}
		t.blocks = append(t.blocks, b)
		links, err := cas.Links(c, b.Data())
		if err != nil {
			return nil, fmt.Errorf("tree %s: block %s: %w", root, c, err)
		}
		for _, l := range links {
			if !seen[l] {
				seen[l] = true
				stack = append(stack, l)
			}
		}
	}
	t.index = blockIndex(t.blocks)
	return t, nil
}

// packedIndex maps the blocks of p by CID; the blocks alias p.
func packedIndex(p cas.Packed) map[cid.Cid]cas.Block {
	m := make(map[cid.Cid]cas.Block, p.Len())
	for off := 0; ; {
		_, next, ok := p.Next(off)
		if !ok {
			return m
		}
		b := p.Block(off)
		m[b.CID()] = b
		off = next
	}
}

// WorkspaceView returns the CID of what a Haygent whose permissions are
// set sees of the tree c: the tree the runtime stores as its workspace
// snapshot when it works on c written out. The rule is the runtime's
// (haygent's snapshot of a workspace): a directory is kept if some path
// under it may be read, a file or symlink if it may be read, nothing
// under a directory named like a store (.haygent, in any case) is kept,
// and each directory's size is that of what it keeps. read gives a
// block's bytes. A tree the view keeps whole is c itself.
func WorkspaceView(ctx context.Context, read func(cid.Cid) ([]byte, error), c cid.Cid, set *perm.Set) (cid.Cid, error) {
	v, _, err := view(ctx, read, c, "", set)
	return v, err
}

func view(ctx context.Context, read func(cid.Cid) ([]byte, error), c cid.Cid, rel string, set *perm.Set) (cid.Cid, uint64, error) {
	if err := ctx.Err(); err != nil {
		return cid.Undef, 0, err
	}
	if c.Type() != cas.DagCBOR {
		return cid.Undef, 0, fmt.Errorf("%s is not a tree: %w", c, cas.ErrInvalid)
	}
	data, err := read(c)
	if err != nil {
		return cid.Undef, 0, err
	}
	t, err := cas.DecodeTree(data)
	if err != nil {
		return cid.Undef, 0, fmt.Errorf("tree %s: %w", c, err)
	}
	var fence *workspace.Fence // the names of stores only
	kept := make([]cas.TreeEntry, 0, len(t.Entries))
	changed := false
	var total uint64
	for _, e := range t.Entries {
		p := e.Name
		if rel != "" {
			p = path.Join(rel, e.Name)
		}
		keep := !fence.Holds(p)
		if keep && e.Kind == cas.KindDir {
			if keep = set.MayMatchUnder(perm.VerbRead, p); keep {
				sub, size, err := view(ctx, read, e.Link.Cid, p, set)
				if err != nil {
					return cid.Undef, 0, err
				}
				if sub != e.Link.Cid || size != e.Size {
					changed = true
					e.Link.Cid, e.Size = sub, size
				}
			}
		} else if keep {
			keep = set.Check(perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: p}).Allowed
		}
		if !keep {
			changed = true
			continue
		}
		total += e.Size
		kept = append(kept, e)
	}
	if !changed {
		return c, total, nil
	}
	out, err := cas.Marshal(&cas.TreeNode{Type: cas.TypeTree, Entries: kept})
	if err != nil {
		return cid.Undef, 0, err
	}
	return cas.Sum(cas.DagCBOR, out), total, nil
}

// blockReader reads blocks from an index, then from st if it is not nil.
func blockReader(ctx context.Context, index map[cid.Cid]cas.Block, st cas.Store) func(cid.Cid) ([]byte, error) {
	return func(c cid.Cid) ([]byte, error) {
		if b, ok := index[c]; ok {
			return b.Data(), nil
		}
		if st == nil {
			return nil, &cas.NotFoundError{CID: c}
		}
		return st.Get(ctx, c)
	}
}

// materialize writes the workspace tree root, whose blocks index holds by
// CID, into a new directory; remove takes it away again, whatever modes
// the tree gave its directories.
func materialize(ctx context.Context, root cid.Cid, index map[cid.Cid]cas.Block) (dir string, remove func(), err error) {
	tmp, err := os.MkdirTemp("", "hg-node-*")
	if err != nil {
		return "", nil, err
	}
	remove = func() { removeTree(tmp) }
	dir = filepath.Join(tmp, "ws")
	if err := cas.GetTree(ctx, newStaging(index), root, dir, nil); err != nil {
		remove()
		return "", nil, fmt.Errorf("write workspace %s out: %w", root, err)
	}
	return dir, remove, nil
}

// removeTree removes dir and everything below it, making its directories
// writable first.
func removeTree(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// emptyWorkspace is the workspace snapshot of a node given none.
var emptyWorkspace = haygent.EmptyTree()
