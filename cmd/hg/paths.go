package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/ipath"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// runRecordNode reports whether arg is RECORD/NODE with RECORD the CID of
// a run record (an hg/run@1 block): 'hg get' then writes the node's final
// workspace, not what a path into the record's fields would reach.
func runRecordNode(ctx context.Context, st cas.Store, arg string) bool {
	p, ok, err := ipath.Parse(arg)
	if !ok || err != nil || len(p.Segments) != 1 || p.Root.Type() != cas.DagCBOR {
		return false
	}
	_, err = scheduler.LoadRecordAt(ctx, st, p.Root)
	return err == nil
}

// resolvePath resolves an argument of the form CID/a/b (or /ipfs/CID/a/b)
// through hg trees, UnixFS directories and IPLD maps and lists. ok is
// false when arg is not such a path (a bare CID, a pin, a run). A path
// that ends inside a block, at a value that is not a link, is a result
// with InBlock set: only 'hg dag get' prints such a value.
func resolvePath(ctx context.Context, st cas.BlockReader, arg string) (res ipath.Result, ok bool, err error) {
	p, ok, err := ipath.Parse(arg)
	if err != nil {
		return ipath.Result{}, true, usageError{err}
	}
	if !ok || len(p.Segments) == 0 {
		return ipath.Result{}, false, nil
	}
	res, err = ipath.Resolve(ctx, st, p)
	return res, true, err
}

// wholeBlock refuses a path result that ends inside a block: get and stat
// need a file, a directory or a block.
func wholeBlock(arg string, res ipath.Result) (cid.Cid, error) {
	if res.InBlock {
		return cid.Undef, fmt.Errorf("path %s ends inside the block %s, at a value that is not a link (try 'hg dag get')", arg, res.CID)
	}
	return res.CID, nil
}

// getUnixFS writes the UnixFS file or directory c, as hg get does an hg
// file or tree.
func getUnixFS(ctx context.Context, g *globals, st cas.BlockReader, c cid.Cid, out string) error {
	n, err := unixfs.Load(ctx, st, c)
	if errors.Is(err, unixfs.ErrNotUnixFS) {
		return hinted{err, "'hg dag get " + c.String() + "' shows the block"}
	} else if err != nil {
		return err
	}
	switch {
	case n.IsDir():
		if out == "" {
			return usageError{fmt.Errorf("%s is a UnixFS directory: give -o DIR", c)}
		}
		info, err := unixfs.Stat(ctx, st, c)
		if err != nil {
			return err
		}
		update, finish := g.ui.progress("get", int64(info.Size))
		defer finish()
		return unixfs.WriteTree(ctx, st, c, out, &unixfs.WriteOptions{Progress: update})
	case n.IsFile():
		update, finish := g.ui.progress("get", int64(n.FileSize()))
		defer finish()
		return writeOut(out, g.ui.stdout, func(w io.Writer) error {
			_, err := unixfs.ReadFile(ctx, st, c, w, update)
			return err
		})
	case n.Type() == unixfs.TypeSymlink:
		return fmt.Errorf("%s is a UnixFS symlink to %q: nothing to write (a symlink is written only inside a directory)", c, n.FS.Data)
	}
	return fmt.Errorf("%s is a UnixFS %s: %w", c, n.Type(), unixfs.ErrUnsupported)
}

// dagPBValue decodes a dag-pb block strictly into the shape 'ipfs dag get'
// prints.
func dagPBValue(data []byte) (any, error) {
	n, err := unixfs.DecodePBNode(data)
	if err != nil {
		return nil, err
	}
	return n.Value(), nil
}

// resolveBlock turns an argument into the CID of a whole block: a CID, a
// pin name, or a path CID/a/b.
func resolveBlock(ctx context.Context, st cas.Store, arg string) (cid.Cid, error) {
	res, isPath, err := resolvePath(ctx, st, arg)
	if !isPath {
		return resolve(ctx, st, arg)
	}
	if err != nil {
		return cid.Undef, err
	}
	return wholeBlock(arg, res)
}
