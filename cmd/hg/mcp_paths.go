package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/haygent/hg/scheduler"
)

// mcpMaxPath bounds a path an MCP client passes.
const mcpMaxPath = 4096

// errNotReadable is wrapped by every path an MCP client names that hg
// mcp will not read.
var errNotReadable = errors.New("hg mcp may not read it")

// mcpRoot is the one directory whose files an MCP client may have hg
// read (put, plan, submit, a bundle to verify): --root, by default the
// working directory hg mcp started in. The store inside it is never
// read as files: its runner key would hand a client the power to sign.
type mcpRoot struct {
	dir   string // absolute, every symlink resolved
	given string // absolute, as given: a client may name files through it
	store string // the store directory, absolute, symlinks resolved
}

func newMCPRoot(dir, storeDir string) (*mcpRoot, error) {
	real, err := realDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--root %s: %w", dir, err)
	}
	given, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := realDir(storeDir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", storeDir, err)
	}
	return &mcpRoot{dir: real, given: given, store: st}, nil
}

// realDir is dir made absolute with every symlink resolved; it must be
// a directory.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

// resolve returns the path p names (relative to the root, or absolute)
// with every symlink resolved, after checking that it lies inside the
// root, not inside the store, and that it exists. ".." and symlinks may
// move inside the root, never out of it.
func (r *mcpRoot) resolve(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("no path given")
	case len(p) > mcpMaxPath:
		return "", fmt.Errorf("a path of %d bytes: at most %d", len(p), mcpMaxPath)
	case strings.ContainsRune(p, 0):
		return "", errors.New("a path holds a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dir, p)
	}
	// A path outside the root as written is refused before anything
	// looks at it: no error says whether a file out there exists.
	p = filepath.Clean(p)
	if !within(r.dir, p) && !within(r.given, p) {
		return "", fmt.Errorf("%s: outside %s: %w", p, r.dir, errNotReadable)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s: %w", p, err)
	}
	// Where a symlink leads out is not said either.
	if !within(r.dir, real) {
		return "", fmt.Errorf("%s: outside %s through a symlink: %w", p, r.dir, errNotReadable)
	}
	if within(r.store, real) || inStoreDir(r.dir, real) {
		return "", fmt.Errorf("%s: inside a store: %w", p, errNotReadable)
	}
	if err := r.checkStoreContents(real); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return real, nil
}

// checkStoreContents refuses real, a resolved path under the root, if
// it or a directory on its way is a store by its contents, whatever its
// name (workspace.IsStoreDir), or if it is the store's runner key under
// another name (a hard link).
func (r *mcpRoot) checkStoreContents(real string) error {
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for d := filepath.ToSlash(rel); ; d = path.Dir(d) {
		if workspace.IsStoreDir(root, d) {
			return fmt.Errorf("inside a store: %w", errNotReadable)
		}
		if d == "." || d == "/" {
			break
		}
	}
	fi, err := root.Lstat(rel)
	if err != nil {
		return err
	}
	return r.checkNotKey(fi)
}

// checkNotKey refuses the file fi if it is the store's runner key, by
// identity: a hard link to it is the key under another name.
func (r *mcpRoot) checkNotKey(fi fs.FileInfo) error {
	fence, err := r.fence(r.dir)
	if err != nil {
		return err
	}
	if fence.IsKey(fi) {
		return fmt.Errorf("the runner key of a store, under another name: %w", errNotReadable)
	}
	return nil
}

// fence is the store fence of dir, made when asked: the runner key it
// knows by identity may have been made since hg mcp started.
func (r *mcpRoot) fence(dir string) (*workspace.Fence, error) {
	return workspace.NewFence(dir, r.store)
}

// inStoreDir reports whether p, beneath root, is or lies inside a
// directory named as a store is (.haygent, in any letter case): another
// store's runner key is as much a key as this one's.
func inStoreDir(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return true
	}
	for _, seg := range strings.Split(filepath.ToSlash(rel), "/") {
		if strings.EqualFold(seg, storeDirName) {
			return true
		}
	}
	return false
}

// open opens the file real, a path resolve returned, through an
// [os.Root] at the root: no symlink put in its way since leads out. The
// file opened is checked again: it must not be a runner key.
func (r *mcpRoot) open(real string) (*os.File, error) {
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = r.checkNotKey(fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openDir opens the directory real, a path resolve returned, as an
// [os.Root] beneath the root's: a directory swapped for a symlink since
// it was resolved leads nowhere outside, and a tree is read through it.
func (r *mcpRoot) openDir(real string) (*os.Root, error) {
	rel, err := filepath.Rel(r.dir, real)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.OpenRoot(rel)
}

// holdsStore reports whether dir is the store or one of its parents.
func (r *mcpRoot) holdsStore(dir string) bool { return within(dir, r.store) }

// within reports whether p is dir or lies beneath it; both are clean
// absolute paths.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// confineWorkOrder checks, before the Work Order is loaded, that every
// directory it reads from disk (its Haygent packages, its workspace
// directories, named relative to dir, the Work Order's, as
// scheduler.Load names them) lies inside the root and holds no store: a
// Work Order is a way to read files too, and what a run stores an MCP
// client can get back.
func (r *mcpRoot) confineWorkOrder(wo *dag.WorkOrder, dir string) error {
	at := func(p string) string {
		p = filepath.FromSlash(p)
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for _, name := range wo.Order {
		n := wo.Nodes[name]
		if err := r.checkPackage(at(n.Haygent)); err != nil {
			return fmt.Errorf("node %q: haygent: %w", name, err)
		}
		if ws := n.Workspace; ws != nil && ws.Dir != "" {
			if _, err := r.resolve(at(ws.Dir)); err != nil {
				return fmt.Errorf("node %q: workspace: %w", name, err)
			}
		}
	}
	return nil
}

// confinePlan checks a loaded plan's package directories again, as the
// scheduler will store them.
func (r *mcpRoot) confinePlan(plan *scheduler.Plan) error {
	for _, name := range plan.WorkOrder.Order {
		if err := r.checkPackage(plan.Packages[name].Dir); err != nil {
			return fmt.Errorf("node %q: haygent: %w", name, err)
		}
	}
	return nil
}

// resolveDir is resolve for a directory that must not hold the store
// (a package is stored whole, unfenced).
func (r *mcpRoot) resolveDir(p string) (string, error) {
	real, err := r.resolve(p)
	if err != nil {
		return "", err
	}
	if r.holdsStore(real) {
		return "", fmt.Errorf("%s holds the store: %w", p, errNotReadable)
	}
	return real, nil
}

// checkPackage checks a Haygent package directory before it is loaded
// and stored whole: it lies under the root, holds no store (by name, by
// identity or by its contents) and no runner key under another name, and
// none of its symlinks leads out of the root or into a store (loading
// reads its contracts through them). The tree is walked through a root
// opened beneath the server's.
func (r *mcpRoot) checkPackage(dir string) error {
	real, err := r.resolveDir(dir)
	if err != nil {
		return err
	}
	root, err := r.openDir(real)
	if err != nil {
		return err
	}
	defer root.Close()
	fence, err := r.fence(real)
	if err != nil {
		return err
	}
	var held string
	keep := fence.Keep(root, func(p string) {
		if held == "" {
			held = p
		}
	})
	if !keep(".", true) {
		held = "."
	}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if !keep(p, d.IsDir()) {
			return fs.SkipAll
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if _, err := r.resolve(filepath.Join(real, filepath.FromSlash(p))); err != nil {
				return fmt.Errorf("symlink %s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if held != "" {
		return fmt.Errorf("%s holds a store or a runner key (%s): %w", dir, held, errNotReadable)
	}
	return nil
}

// treeFence keeps a put tree's stores out, as the scheduler keeps them
// out of a workspace: every directory named .haygent, the store itself
// wherever it lies in the tree, every directory that is a store by its
// contents, and the runner key under any other name. dir is the tree's
// path, root the directory opened.
func (r *mcpRoot) treeFence(dir string, root *os.Root) (include func(p string, isDir bool) bool, err error) {
	fence, err := r.fence(dir)
	if err != nil {
		return nil, err
	}
	return fence.Keep(root, nil), nil
}
