package cas

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
)

// LoadFileNode reads, verifies and strictly decodes an hg/file@1 node.
func LoadFileNode(ctx context.Context, st BlockReader, c cid.Cid) (*FileNode, error) {
	if c.Type() != DagCBOR {
		return nil, fmt.Errorf("%s is not a file: codec 0x%x: %w", c, c.Type(), ErrInvalid)
	}
	var n FileNode
	err := st.View(ctx, c, func(data []byte) error { return Unmarshal(data, &n) })
	if err != nil {
		return nil, fmt.Errorf("read file node %s: %w", c, err)
	}
	if err := n.check(c); err != nil {
		return nil, err
	}
	return &n, nil
}

// ReadFile writes the content of the file whose index root is c to w.
// Every block is verified before its bytes reach w, chunks are fetched and
// verified on all cores, and the sizes recorded in the index are checked
// against the chunks: any mismatch stops the copy with an error. progress,
// if not nil, is called with the bytes written so far.
func ReadFile(ctx context.Context, st BlockReader, c cid.Cid, w io.Writer, progress func(done int64)) (int64, error) {
	root, err := LoadFileNode(ctx, st, c)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	items := make(chan fileItem, 64)
	walkErr := make(chan error, 1)
	go func() {
		defer close(items)
		var end uint64
		walkErr <- walkFileNode(ctx, st, c, root, &end, items)
	}()

	pool := chunkPool
	results := fetchChunks(ctx, st, items, pool)
	var written int64
	for r := range results {
		if r.err != nil {
			cancel()
			for range results {
			}
			return written, r.err
		}
		if r.data == nil { // a checkpoint: the end of a height-0 node
			if uint64(written) != r.end {
				cancel()
				for range results {
				}
				return written, fmt.Errorf("file %s: chunks hold %d bytes where the index says %d: %w", c, written, r.end, ErrInvalid)
			}
			continue
		}
		n, err := w.Write(r.data)
		written += int64(n)
		pool.put(r.data)
		if err != nil {
			cancel()
			for range results {
			}
			return written, fmt.Errorf("write: %w", err)
		}
		if progress != nil {
			progress(written)
		}
	}
	if err := <-walkErr; err != nil {
		return written, err
	}
	if uint64(written) != root.Size {
		return written, fmt.Errorf("file %s: %d bytes where the index says %d: %w", c, written, root.Size, ErrInvalid)
	}
	return written, nil
}

// fileItem is a chunk to fetch, or (chunk undefined) a checkpoint saying
// how many bytes the file must have produced so far.
type fileItem struct {
	chunk cid.Cid
	end   uint64
}

// walkFileNode emits the chunks under n in order, checking that each
// child's height and the sizes of internal nodes add up.
func walkFileNode(ctx context.Context, st BlockReader, c cid.Cid, n *FileNode, end *uint64, out chan<- fileItem) error {
	send := func(it fileItem) error {
		select {
		case out <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if n.Height == 0 {
		for _, l := range n.Links {
			if err := send(fileItem{chunk: l.Cid}); err != nil {
				return err
			}
		}
		*end += n.Size
		return send(fileItem{end: *end})
	}
	var sum uint64
	for _, l := range n.Links {
		child, err := LoadFileNode(ctx, st, l.Cid)
		if err != nil {
			return err
		}
		if child.Height != n.Height-1 {
			return fmt.Errorf("file node %s: child %s has height %d under height %d: %w", c, l.Cid, child.Height, n.Height, ErrInvalid)
		}
		sum += child.Size
		if err := walkFileNode(ctx, st, l.Cid, child, end, out); err != nil {
			return err
		}
	}
	if sum != n.Size {
		return fmt.Errorf("file node %s: children hold %d bytes where it says %d: %w", c, sum, n.Size, ErrInvalid)
	}
	return nil
}

type fetched struct {
	data []byte // nil for a checkpoint
	end  uint64
	err  error
}

// fetchChunks reads and verifies chunks on all cores and delivers them in
// order.
func fetchChunks(ctx context.Context, st BlockReader, items <-chan fileItem, pool *bufPool) <-chan fetched {
	o := newOrdered[fetched](ctx, 2)
	fetch := func(c cid.Cid) fetched {
		var f fetched
		f.err = st.View(ctx, c, func(data []byte) error {
			if len(data) > ChunkSize {
				return fmt.Errorf("chunk %s: %d bytes, over %d: %w", c, len(data), ChunkSize, ErrInvalid)
			}
			buf := pool.get()[:len(data)]
			copy(buf, data)
			f.data = buf
			return nil
		})
		if f.err == nil && f.data == nil {
			f.err = errors.New("chunk " + c.String() + ": no data")
		}
		return f
	}
	go func() { // dispatch in order
		defer o.done()
		for it := range items {
			var ok bool
			if !it.chunk.Defined() {
				ok = o.ready(fetched{end: it.end})
			} else {
				c := it.chunk
				ok = o.submit(func() fetched { return fetch(c) })
			}
			if !ok {
				return
			}
		}
	}()
	return o.results
}
