package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/ipath"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newInitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "create a store (DIR/.haygent, or --store DIR or $HG_STORE itself)",
		Args:  rangeArgs(0, 1, "at most one DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := g.store
			if env := os.Getenv("HG_STORE"); dir == "" && len(args) == 0 && env != "" {
				dir = env // where every other command will look for it
			}
			if dir == "" {
				parent := "."
				if len(args) == 1 {
					parent = args[0]
				}
				dir = filepath.Join(parent, storeDirName)
			} else if len(args) == 1 {
				return usageError{errors.New("give DIR or --store, not both")}
			}
			if err := boltstore.Init(dir); err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				abs = dir
			}
			g.ui.printf("initialized empty hg store in %s\n", abs)
			return nil
		},
	}
}

type putResult struct {
	CID  string `json:"cid"`
	Kind string `json:"kind"`
	Size uint64 `json:"size"`
	Pin  string `json:"pin,omitempty"`
}

func newPutCmd(g *globals) *cobra.Command {
	var (
		recursive bool
		asJSON    bool
		pin       string
		force     bool
	)
	cmd := &cobra.Command{
		Use:   "put [-r] PATH|-",
		Short: "store a file, a directory tree (-r) or stdin (-); print the root CID",
		Long: `Store a file, a directory tree (with -r) or standard input (-) and print the
root CID. Files become 1 MiB raw chunks under an hg/file@1 index; directories
become hg/tree@1 nodes; symlinks are stored as links and never followed.
Nothing is pinned unless --pin NAME is given, and 'hg gc' removes what no pin
reaches.`,
		Args: exactArgs(1, "one PATH (or - for stdin)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pin != "" {
				if err := cas.CheckPinName(pin); err != nil {
					return usageError{err}
				}
			}
			path := args[0]
			var info os.FileInfo
			if path != "-" {
				var err error
				info, err = os.Stat(path)
				if err != nil {
					return err
				}
				if info.IsDir() && !recursive {
					return usageError{fmt.Errorf("%s is a directory (use -r to store a tree)", path)}
				}
			}
			return g.withStore(false, func(st cas.Store) error {
				ctx := cmd.Context()
				var (
					root cid.Cid
					size uint64
					kind = cas.KindFile
					err  error
				)
				switch {
				case path == "-":
					update, finish := g.ui.progress("put", -1)
					root, size, err = cas.PutFile(ctx, st, g.ui.stdin, &cas.PutOptions{Progress: update})
					finish()
				case info.IsDir():
					kind = cas.KindDir
					root, err = putTree(ctx, g, st, path)
					if err == nil {
						var in *cas.Info
						if in, err = cas.Stat(ctx, st, root); err == nil {
							size = in.Size
						}
					}
				case info.Mode().IsRegular():
					root, size, err = putFile(ctx, g, st, path, info.Size())
				default:
					return fmt.Errorf("%s is not a regular file or directory", path)
				}
				if err != nil {
					return err
				}
				if pin != "" {
					if err := setPin(ctx, st, pin, root, force); err != nil {
						return fmt.Errorf("stored %s, not pinned: %w", root, err)
					}
				}
				if asJSON {
					return g.ui.printJSON(putResult{CID: root.String(), Kind: kind, Size: size, Pin: pin})
				}
				g.ui.printf("%s\n", root)
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "store a directory and everything below it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {cid, kind, size, pin} as JSON")
	cmd.Flags().StringVar(&pin, "pin", "", "pin the root under `NAME` once it is stored")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "with --pin, move the pin if it names another root")
	return cmd
}

func putFile(ctx context.Context, g *globals, st cas.Store, path string, size int64) (cid.Cid, uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return cid.Undef, 0, err
	}
	defer f.Close()
	update, finish := g.ui.progress("put", size)
	defer finish()
	return cas.PutFile(ctx, st, f, &cas.PutOptions{Progress: update})
}

// putTree stores the directory path as a tree, leaving out every hg
// store in it (this one, and any directory that is a store by its name or
// its contents) and any hard link to this store's runner key, each with a
// warning: a tree is shared (bundles, hg serve, workspaces), a key never.
func putTree(ctx context.Context, g *globals, st cas.Store, path string) (cid.Cid, error) {
	dir, err := locateStore(g.store)
	if err != nil {
		return cid.Undef, err
	}
	fence, err := workspace.NewFence(path, dir)
	if err != nil {
		return cid.Undef, err
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return cid.Undef, err
	}
	defer root.Close()
	update, finish := g.ui.progress("put", -1)
	defer finish()
	return cas.PutTreeRoot(ctx, st, root, &cas.TreeOptions{
		Progress: update,
		Skipped: func(p string, mode os.FileMode) {
			g.ui.warnf("skipped %s: a %s cannot be stored", p, mode.Type())
		},
		Include: fence.Keep(root, func(p string) {
			g.ui.warnf("left out %s: an hg store (or its key) is never stored in a tree", p)
		}),
	})
}

func newGetCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "get CID|CID/PATH|PIN|RUN/NODE [-o PATH]",
		Short: "write a file to stdout or PATH, or a tree into the directory PATH",
		Long: `Write the file CID to standard output, or to PATH with -o (replaced
atomically), or the tree CID into the directory PATH, which must not exist or
be empty. Every block is verified before its bytes are used; a damaged block
stops the command with exit code 4 and leaves nothing at PATH.

UnixFS files and directories (what 'ipfs add' makes, brought in with 'hg
bundle import' of an 'ipfs dag export') are written the same way, HAMT-sharded
directories too. Every size the DAG declares must match the bytes it holds; an
entry name that is not a single path element ("..", "a/b", empty) or appears
twice is refused, and so is a symlink whose target could leave PATH; modes and
mtimes are not applied. CID/a/b names what a path leads to, through hg trees,
UnixFS directories and DAG-CBOR maps and lists.

RUN/NODE is the final workspace of a node of a run: the tree its receipt
records as the workspace it left, which a Work Order hands on to the nodes
that start from it ({"from": NODE}). RUN is a run id, or the pin or CID of
a run record (a run imported from a bundle with 'hg bundle import --pin').
A node that is not done is written too, with a hint that its receipt was
not accepted work.

If PATH is a symlink, the file or tree is written where it points, as cp and
git clone do, and the link itself is kept; the same rules apply there (a
tree needs an empty or missing directory). A symlink to nothing is refused.`,
		Args: exactArgs(1, "one CID or pin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out != "" {
				if err := outsideStore(g, out); err != nil {
					return err
				}
			}
			return g.withStore(true, func(st cas.Store) error {
				ctx := cmd.Context()
				var (
					res    ipath.Result
					isPath bool
					err    error
					c      cid.Cid
				)
				if !runRecordNode(ctx, st, args[0]) {
					res, isPath, err = resolvePath(ctx, st, args[0])
				}
				switch {
				case isPath && err == nil:
					c, err = wholeBlock(args[0], res)
				case !isPath:
					c, err = resolve(ctx, st, args[0])
					if i := strings.LastIndex(args[0], "/"); err != nil && i > 0 {
						// Not a pin: RUN/NODE.
						c, err = nodeFinalWorkspace(ctx, g, st, args[0][:i], args[0][i+1:])
					}
				}
				if err != nil {
					return err
				}
				if c.Type() == cas.DagPB {
					return getUnixFS(ctx, g, st, c, out)
				}
				info, err := cas.Stat(ctx, st, c)
				if err != nil {
					return err
				}
				switch info.Type {
				case cas.TypeTree:
					if out == "" {
						return usageError{fmt.Errorf("%s is a directory tree: give -o DIR", c)}
					}
					update, finish := g.ui.progress("get", int64(info.Size))
					defer finish()
					return cas.GetTree(ctx, st, c, out, &cas.TreeOptions{Progress: update})
				case cas.TypeFile:
					update, finish := g.ui.progress("get", int64(info.Size))
					defer finish()
					return writeOut(out, g.ui.stdout, func(w io.Writer) error {
						_, err := cas.ReadFile(ctx, st, c, w, update)
						return err
					})
				}
				if c.Type() == cas.Raw {
					return writeOut(out, g.ui.stdout, func(w io.Writer) error {
						return st.View(ctx, c, func(data []byte) error {
							_, err := w.Write(data)
							return err
						})
					})
				}
				what := info.Codec
				if info.Type != "" {
					what = info.Type
				}
				return fmt.Errorf("%s is a %s block, not a file or tree (try 'hg dag get')", c, what)
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to `PATH` instead of stdout (required for a tree)")
	return cmd
}

// nodeFinalWorkspace returns the final workspace the receipt of node of
// run records; run is a run id, or the pin or CID of a run record. A node
// that is not done has a receipt that was not accepted (a HALT, a
// rejected one): said on stderr.
func nodeFinalWorkspace(ctx context.Context, g *globals, st cas.Store, run, node string) (cid.Cid, error) {
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		c, rerr := resolve(ctx, st, run)
		if rerr != nil {
			if scheduler.CheckRunID(run) == nil {
				return cid.Undef, err
			}
			return cid.Undef, usageError{errors.New(textsafe.Sprintf("%q is neither a CID, a pin nor RUN/NODE", run+"/"+node))}
		}
		if rec, err = scheduler.LoadRecordAt(ctx, st, c); err != nil {
			return cid.Undef, err
		}
		run = rec.Run
	}
	for _, n := range rec.Nodes {
		if n.Name != node {
			continue
		}
		if n.Receipt == nil {
			return cid.Undef, errors.New(textsafe.Sprintf("node %s of run %s has no receipt (it is %s): it left no workspace", node, run, n.State))
		}
		r, err := ledger.LoadReceipt(ctx, st, n.Receipt.Cid)
		if err != nil {
			return cid.Undef, err
		}
		if r.FinalWorkspace == nil {
			return cid.Undef, errors.New(textsafe.Sprintf("the receipt %s of node %s records no final workspace (it was made before receipts recorded one)", n.Receipt.Cid, node))
		}
		if n.State != dag.Done {
			g.ui.hintf("%s", textsafe.Sprintf("node %s of run %s is %s: its receipt %s is not accepted work", node, run, n.State, n.Receipt.Cid))
		}
		return r.FinalWorkspace.Cid, nil
	}
	return cid.Undef, errors.New(textsafe.Sprintf("run %s has no node %q", run, node))
}

// checkOutDirs checks, before a run, that hg run --out can write the
// final workspace of each of nodes to DIR/NODE: outside the store, and
// each a missing or empty directory.
func checkOutDirs(g *globals, dir string, nodes []string) error {
	if err := outsideStore(g, dir); err != nil {
		return err
	}
	for _, n := range nodes {
		p := filepath.Join(dir, n)
		if ents, err := os.ReadDir(p); err == nil && len(ents) > 0 {
			return usageError{errors.New(textsafe.Sprintf("--out %s: %s exists and is not empty", dir, p))}
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return usageError{fmt.Errorf("--out %s: %w", dir, err)}
		}
	}
	return nil
}

// writeOutcomeTrees writes the final workspace of each of the outcome's
// nodes that is done to DIR/NODE, and says which it could not.
func writeOutcomeTrees(ctx context.Context, g *globals, rec *scheduler.Record, nodes []string, dir string, asJSON bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return g.withStore(true, func(st cas.Store) error {
		for _, name := range nodes {
			var n *scheduler.NodeRecord
			for i := range rec.Nodes {
				if rec.Nodes[i].Name == name {
					n = &rec.Nodes[i]
				}
			}
			if n == nil || n.State != dag.Done {
				state := "missing"
				if n != nil {
					state = n.State
				}
				g.ui.hintf("%s", textsafe.Sprintf("--out: node %s is %s: no final workspace written for it", name, state))
				continue
			}
			c, err := nodeFinalWorkspace(ctx, g, st, rec.Run, name)
			if err != nil {
				return err
			}
			p := filepath.Join(dir, name)
			if err := cas.GetTree(ctx, st, c, p, nil); err != nil {
				return err
			}
			if asJSON {
				_ = g.ui.printJSON(map[string]any{"run": rec.Run, "event": "written", "node": name, "tree": c.String(), "dir": p})
			} else {
				g.ui.printSafe("wrote the final workspace of %s (%s) to %s\n", name, c, p)
			}
		}
		return nil
	})
}

// writeOut runs write against stdout (path "" or "-"), straight into path
// when it is a device or pipe, and otherwise into a temporary file beside
// path that is renamed over it only when write succeeds. A path that is a
// symlink stands for the file it points to.
func writeOut(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "" || path == "-" {
		return write(stdout)
	}
	// A symlink is written through, never replaced (as GetTree does).
	name := path
	path, err := cas.FollowSymlink(path)
	if err != nil {
		return err
	}
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		if info.IsDir() {
			if path != name {
				return fmt.Errorf("%s is a symlink to the directory %s: give a file name", name, path)
			}
			return fmt.Errorf("%s is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	// A writer killed before here (an export of a big bundle) left its
	// temporary file; it goes now. Ours is named and locked so that the
	// next writer can tell.
	cas.SweepDeadTemps(filepath.Dir(path))
	tmp, err := cas.CreateOwnedTemp(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newStatCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat CID|CID/PATH|PIN",
		Short: "show a block's codec, type, size and links",
		Long: `Show a block's codec, its type (an hg object's, or unixfs/file,
unixfs/directory, unixfs/hamt-shard, unixfs/symlink for UnixFS), the size of
what it stands for (a file's content, the files below a tree or directory, or
the block itself), the block's own size and its links. CID/a/b names what a
path leads to, as for 'hg get'.`,
		Args: exactArgs(1, "one CID or pin name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withStore(true, func(st cas.Store) error {
				c, err := resolveBlock(cmd.Context(), st, args[0])
				if err != nil {
					return err
				}
				var info *cas.Info
				if c.Type() == cas.DagPB {
					info, err = unixfs.Stat(cmd.Context(), st, c)
					if errors.Is(err, unixfs.ErrNotUnixFS) {
						// dag-pb of another kind: the block alone.
						info, err = cas.Stat(cmd.Context(), st, c)
					}
				} else {
					info, err = cas.Stat(cmd.Context(), st, c)
				}
				if err != nil {
					return err
				}
				if asJSON {
					type infoJSON struct {
						CID string `json:"cid"`
						*cas.Info
					}
					return g.ui.printJSON(infoJSON{info.CID.String(), info})
				}
				g.ui.printf("cid        %s\n", info.CID)
				g.ui.printf("codec      %s\n", info.Codec)
				if info.Type != "" {
					g.ui.printf("type       %s\n", info.Type)
				}
				g.ui.printf("size       %d\n", info.Size)
				g.ui.printf("block size %d\n", info.BlockSize)
				g.ui.printf("links      %d\n", info.Links)
				if info.Entries > 0 {
					g.ui.printf("entries    %d\n", info.Entries)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
