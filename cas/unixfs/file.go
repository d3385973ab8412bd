package unixfs

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// ReadFile writes the content of the UnixFS file c to w: a raw block's
// bytes, or a File node's Data followed by the content of its links in
// order. Every block is verified against its CID as it is read (raw
// leaves are fetched and verified on all cores, and written in order),
// and every size the DAG declares is checked against the bytes found: a
// child that holds more or fewer bytes than its parent's blocksize for
// it, or a tree deeper than [MaxFileDepth], stops the copy with an error
// wrapping [cas.ErrInvalid]. Bytes already written to w stay there: write
// to a temporary file and keep it only on success. progress, if not nil,
// is called with the bytes written so far.
func ReadFile(ctx context.Context, st cas.BlockReader, c cid.Cid, w io.Writer, progress func(done int64)) (int64, error) {
	n, err := Load(ctx, st, c)
	if err != nil {
		return 0, err
	}
	if !n.IsFile() {
		return 0, fmt.Errorf("%s is a UnixFS %s, not a file: %w", c, n.Type(), cas.ErrInvalid)
	}
	r := fileReader{ctx: ctx, st: st, w: w, progress: progress}
	err = r.copy(n)
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

// piece is a run of the file's bytes, in file order: ready (a node's
// Data), or a raw leaf being fetched until done closes.
type piece struct {
	data []byte
	err  error
	done chan struct{} // nil for a ready piece
}

// copy writes the file n. A walker goroutine reads the file's nodes in
// order, checking every declared size, and hands on pieces; raw leaves
// are fetched and verified by up to one goroutine a core, at most twice
// that many ahead of the writer, which writes the pieces in order.
func (r *fileReader) copy(n *Node) error {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	workers := max(2, runtime.GOMAXPROCS(0))
	w := walker{ctx: ctx, st: r.st, out: make(chan *piece, 2*workers), sem: make(chan struct{}, workers)}
	var walkErr error
	go func() {
		defer close(w.out)
		walkErr = w.node(n, n.FileSize(), 0)
	}()
	for p := range w.out {
		if p.done != nil {
			<-p.done
		}
		err := p.err
		if err == nil {
			err = r.write(p.data)
		}
		if err != nil {
			cancel()
			for range w.out { // let the walker end
			}
			for range cap(w.sem) { // and every fetch: none outlives copy
				w.sem <- struct{}{}
			}
			return err
		}
	}
	// The walker's error, if any, comes after every piece it handed on.
	if walkErr != nil {
		return walkErr
	}
	return r.ctx.Err()
}

type walker struct {
	ctx context.Context
	st  cas.BlockReader
	out chan *piece
	sem chan struct{}
}

func (w *walker) emit(p *piece) error {
	select {
	case w.out <- p:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// node hands on the content of n, which its parent says holds want bytes.
func (w *walker) node(n *Node, want uint64, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if got := n.FileSize(); got != want {
		return fmt.Errorf("file node %s holds %d bytes where its parent says %d: %w", n.CID, got, want, cas.ErrInvalid)
	}
	if n.FS == nil {
		return w.emit(&piece{data: n.Raw})
	}
	if depth >= MaxFileDepth {
		return fmt.Errorf("file node %s: deeper than %d levels: %w", n.CID, MaxFileDepth, cas.ErrInvalid)
	}
	if len(n.FS.Data) > 0 {
		if err := w.emit(&piece{data: n.FS.Data}); err != nil {
			return err
		}
	}
	for i, l := range n.PB.Links {
		if l.Hash.Type() == cas.Raw {
			if err := w.rawLeaf(l.Hash, n.FS.Blocksizes[i]); err != nil {
				return err
			}
			continue
		}
		child, err := Load(w.ctx, w.st, l.Hash)
		if err != nil {
			return fmt.Errorf("file node %s, link %d: %w", n.CID, i, err)
		}
		if !child.IsFile() {
			return fmt.Errorf("file node %s, link %d: a UnixFS %s inside a file: %w", n.CID, i, child.Type(), cas.ErrInvalid)
		}
		if err := w.node(child, n.FS.Blocksizes[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

// rawLeaf hands on the raw block c, which must hold want bytes, fetched
// and verified on a goroutine of its own.
func (w *walker) rawLeaf(c cid.Cid, want uint64) error {
	p := &piece{done: make(chan struct{})}
	if err := w.emit(p); err != nil {
		return err
	}
	select {
	case w.sem <- struct{}{}:
	case <-w.ctx.Done():
		p.err = w.ctx.Err()
		close(p.done)
		return w.ctx.Err()
	}
	go func() {
		defer func() { <-w.sem }()
		defer close(p.done)
		data, err := w.st.Get(w.ctx, c)
		switch {
		case err != nil:
			p.err = err
		case uint64(len(data)) != want:
			p.err = fmt.Errorf("file node %s holds %d bytes where its parent says %d: %w", c, len(data), want, cas.ErrInvalid)
		default:
			p.data = data
		}
	}()
	return nil
}
