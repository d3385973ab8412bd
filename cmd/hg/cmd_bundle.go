package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

func newBundleCmd(g *globals) *cobra.Command {
	return groupCmd("bundle", "move closures between stores as CAR files",
		newBundleExportCmd(g), newBundleImportCmd(g))
}

type bundleRoot struct {
	CID string `json:"cid"`
	Pin string `json:"pin,omitempty"`
}

type exportResult struct {
	File   string       `json:"file"`
	Roots  []bundleRoot `json:"roots"`
	Blocks int          `json:"blocks"`
	Bytes  int64        `json:"bytes"`
	Size   int64        `json:"size"`
}

func newBundleExportCmd(g *globals) *cobra.Command {
	var (
		out    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "export CID|PIN|RUN... -o FILE.car",
		Short: "write the closure of one or more roots as a CARv1 file",
		Long: `Write a CARv1 file naming the given roots and holding every block they
reach, each once, depth first from each root in turn: the same store and
roots always give the same file. A run id stands for its latest record,
which reaches the Work Order, the packages, every receipt and acceptance
and all they link: the bundle 'hg verify --bundle' checks on another
machine. Every block is verified before it is
written. The file is written beside FILE.car and renamed into place, so a
failed export leaves nothing there; -o - writes to standard output.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("%s: want at least one CID or pin name", cmd.CommandPath())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case out == "":
				return usageError{errors.New("give -o FILE.car (or -o - for standard output)")}
			case out == "-" && asJSON:
				return usageError{errors.New("--json needs -o FILE.car: standard output holds the bundle")}
			}
			if out != "-" {
				if err := outsideStore(g, out); err != nil {
					return err
				}
			}
			return g.withStore(true, func(st cas.Store) error {
				ctx := cmd.Context()
				roots := make([]cid.Cid, len(args))
				var total int64
				for i, arg := range args {
					c, err := resolveRoot(ctx, st, arg)
					if err != nil {
						return err
					}
					info, err := cas.Stat(ctx, st, c)
					if err != nil {
						return err
					}
					roots[i], total = c, total+int64(info.Size)
				}
				update, finish := g.ui.progress("export", total)
				defer finish()
				var res *cas.ExportResult
				err := writeOut(out, g.ui.stdout, func(w io.Writer) error {
					var err error
					res, err = cas.ExportCAR(ctx, st, roots, w, &cas.ExportOptions{
						Progress: func(done int64) { update(min(done, total)) },
					})
					return err
				})
				if err != nil || out == "-" {
					return err
				}
				finish()
				return printExport(g.ui, out, res, asJSON)
			})
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the bundle to `FILE.car` (- for standard output)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {file, roots, blocks, bytes, size} as JSON")
	return cmd
}

func printExport(u *ui, file string, res *cas.ExportResult, asJSON bool) error {
	if asJSON {
		roots := make([]bundleRoot, len(res.Roots))
		for i, c := range res.Roots {
			roots[i] = bundleRoot{CID: c.String()}
		}
		return u.printJSON(exportResult{File: file, Roots: roots, Blocks: res.Blocks, Bytes: res.Bytes, Size: res.Size})
	}
	u.printf("exported %d blocks (%d bytes) from %d root(s) to %s\n", res.Blocks, res.Bytes, len(res.Roots), file)
	return nil
}

type importResult struct {
	File       string       `json:"file"`
	CARVersion int          `json:"car_version"`
	Roots      []bundleRoot `json:"roots"`
	Blocks     int          `json:"blocks"`
	NewBlocks  int          `json:"new_blocks"`
	Bytes      int64        `json:"bytes"`
}

func newBundleImportCmd(g *globals) *cobra.Command {
	var (
		pin    string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "import FILE.car|-",
		Short: "check a CAR file, store its blocks and pin its roots, all or nothing",
		Long: `Read a CAR file (CARv1, or CARv2 through the CARv1 inside it) from FILE.car
or standard input (-), check every block against its CID, store the blocks
and pin each root as bundle/CID (or --pin NAME, for a bundle of one root).
hg objects in the bundle must be canonical; blocks from other tools are kept
as opaque bytes under their hash. Every block a root reaches must be in the
bundle or already in the store.

All or nothing: if anything is wrong, the command names the first bad
section by byte offset and CID, and the store is left as it was. Exit code
4 means the file is damaged (a block that does not match its CID, an hg
object that is not canonical, broken framing); 1 means it cannot be taken
as it is (no roots, an incomplete closure, an unsupported hash function).`,
		Args: exactArgs(1, "one FILE.car (or - for standard input)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pin != "" {
				if err := cas.CheckPinName(pin); err != nil {
					return usageError{err}
				}
			}
			path := args[0]
			in, size, err := openBundle(g.ui, path)
			if err != nil {
				return err
			}
			defer in.Close()
			return g.withStore(false, func(st cas.Store) error {
				update, finish := g.ui.progress("import", size)
				defer finish()
				res, err := cas.ImportCAR(cmd.Context(), st, in, &cas.ImportOptions{Pin: pin, Progress: update})
				if err != nil {
					return importError(path, err)
				}
				finish()
				return printImport(g.ui, path, res, asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&pin, "pin", "", "pin the bundle's one root as `NAME` instead of bundle/CID")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {file, car_version, roots, blocks, new_blocks, bytes} as JSON")
	return cmd
}

// openBundle opens the bundle to import and returns its size, or -1 for
// standard input.
func openBundle(u *ui, path string) (io.ReadCloser, int64, error) {
	if path == "-" {
		return io.NopCloser(u.stdin), -1, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if info.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is a directory, not a CAR file", path)
	}
	return f, info.Size(), nil
}

// importError says that the bundle was refused. Damage found in the file
// (a block that does not match its CID, a non-canonical hg object, broken
// framing) is an integrity failure, exit 4; the store itself is fine, so
// the usual fsck hint would mislead.
func importError(path string, err error) error {
	var carErr *cas.CARError
	if errors.As(err, &carErr) && (errors.Is(err, cas.ErrCorrupt) || errors.Is(err, cas.ErrNotCanonical) || errors.Is(err, cas.ErrBadCAR)) {
		return integrityError{msg: fmt.Sprintf("bundle %s refused: %v", path, err)}
	}
	return fmt.Errorf("bundle %s refused: %w", path, err)
}

func printImport(u *ui, file string, res *cas.ImportResult, asJSON bool) error {
	if asJSON {
		roots := make([]bundleRoot, len(res.Roots))
		for i, p := range res.Roots {
			roots[i] = bundleRoot{CID: p.CID.String(), Pin: p.Name}
		}
		return u.printJSON(importResult{File: file, CARVersion: res.CARVersion, Roots: roots,
			Blocks: res.Blocks, NewBlocks: res.NewBlocks, Bytes: res.Bytes})
	}
	u.printf("imported %d blocks (%d new, %d bytes) from %s\n", res.Blocks, res.NewBlocks, res.Bytes, file)
	for _, p := range res.Roots {
		u.printf("pinned %s as %s\n", p.CID, p.Name)
	}
	return nil
}

// resolveRoot is resolve, taking a run id for its latest record too.
// It also takes RUN/NODE for the receipt of a node of a run, as the replay
// command of such a receipt names it.
func resolveRoot(ctx context.Context, st cas.Store, arg string) (cid.Cid, error) {
	if !isRunID(arg) {
		return resolve(ctx, st, arg)
	}
	if run, node, ok := strings.Cut(arg, "/"); ok {
		rec, _, err := scheduler.LoadRecord(ctx, st, run)
		if err != nil {
			return cid.Undef, fmt.Errorf("run %s: %w", run, err)
		}
		for _, n := range rec.Nodes {
			if n.Name == node {
				if n.Receipt == nil {
					return cid.Undef, fmt.Errorf("node %s of run %s has no receipt (it is %s)", node, run, n.State)
				}
				return n.Receipt.Cid, nil
			}
		}
		return cid.Undef, fmt.Errorf("run %s has no node %q", run, node)
	}
	c, err := st.GetRef(ctx, scheduler.RefNamespace, arg)
	if err != nil {
		return cid.Undef, fmt.Errorf("run %s: %w", arg, err)
	}
	return c, nil
}
