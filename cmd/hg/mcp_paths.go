package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	return real, nil
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
// [os.Root] at the root: no symlink put in its way since leads out.
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
	return root.Open(rel)
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
		if _, err := r.resolveDir(at(n.Haygent)); err != nil {
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
		if _, err := r.resolveDir(plan.Packages[name].Dir); err != nil {
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

// treeFence keeps a put tree's store directories out, as the scheduler
// keeps them out of a workspace: every directory named .haygent, and the
// store itself wherever it lies in the tree.
func (r *mcpRoot) treeFence(dir string) (include func(p string, isDir bool) bool, err error) {
	fence, err := workspace.NewFence(dir, r.store)
	if err != nil {
		return nil, err
	}
	return func(p string, isDir bool) bool {
		if fence.Holds(p) {
			return false
		}
		if !isDir {
			return true
		}
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		return err != nil || !fence.IsStore(fi)
	}, nil
}
