package unixfs

import (
	"context"
	"fmt"
	"io"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// ReadFile writes the content of the UnixFS file c to w: a raw block's
// bytes, or a File node's Data followed by the content of its links in
// order. Every block is verified against its CID as it is read, and every
// size the DAG declares is checked against the bytes found: a child that
// holds more or fewer bytes than its parent's blocksize for it, or a tree
// deeper than [MaxFileDepth], stops the copy with an error wrapping
// [cas.ErrInvalid]. Bytes already written to w stay there: write to a
// temporary file and keep it only on success. progress, if not nil, is
// called with the bytes written so far.
func ReadFile(ctx context.Context, st cas.BlockReader, c cid.Cid, w io.Writer, progress func(done int64)) (int64, error) {
	n, err := Load(ctx, st, c)
	if err != nil {
		return 0, err
	}
	if !n.IsFile() {
		return 0, fmt.Errorf("%s is a UnixFS %s, not a file: %w", c, n.Type(), cas.ErrInvalid)
	}
	r := fileReader{ctx: ctx, st: st, w: w, progress: progress}
	err = r.node(n, n.FileSize(), 0)
	return r.done, err
}

type fileReader struct {
	ctx      context.Context
	st       cas.BlockReader
	w        io.Writer
	progress func(int64)
	done     int64
}

func (r *fileReader) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	k, err := r.w.Write(p)
	r.done += int64(k)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if r.progress != nil {
		r.progress(r.done)
	}
	return nil
}

// node writes the content of n, which its parent says holds want bytes.
func (r *fileReader) node(n *Node, want uint64, depth int) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if got := n.FileSize(); got != want {
		return fmt.Errorf("file node %s holds %d bytes where its parent says %d: %w", n.CID, got, want, cas.ErrInvalid)
	}
	if n.FS == nil {
		return r.write(n.Raw)
	}
	if depth >= MaxFileDepth {
		return fmt.Errorf("file node %s: deeper than %d levels: %w", n.CID, MaxFileDepth, cas.ErrInvalid)
	}
	if err := r.write(n.FS.Data); err != nil {
		return err
	}
	for i, l := range n.PB.Links {
		if l.Hash.Type() == cas.Raw {
			if err := r.rawLeaf(l.Hash, n.FS.Blocksizes[i]); err != nil {
				return fmt.Errorf("file node %s, link %d: %w", n.CID, i, err)
			}
			continue
		}
		child, err := Load(r.ctx, r.st, l.Hash)
		if err != nil {
			return fmt.Errorf("file node %s, link %d: %w", n.CID, i, err)
		}
		if !child.IsFile() {
			return fmt.Errorf("file node %s, link %d: a UnixFS %s inside a file: %w", n.CID, i, child.Type(), cas.ErrInvalid)
		}
		if err := r.node(child, n.FS.Blocksizes[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// rawLeaf writes the raw block c, which must hold want bytes, straight
// from the store's verified bytes.
func (r *fileReader) rawLeaf(c cid.Cid, want uint64) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	return r.st.View(r.ctx, c, func(data []byte) error {
		if uint64(len(data)) != want {
			return fmt.Errorf("file node %s holds %d bytes where its parent says %d: %w", c, len(data), want, cas.ErrInvalid)
		}
		return r.write(data)
	})
}
