package cas

import (
	"context"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
)

// Layout of files.
const (
	// ChunkSize is the size of every raw chunk of a file but the last.
	ChunkSize = 1 << 20
	// FanOut is the most links one hg/file@1 node holds.
	FanOut = 1024
	// maxHeight bounds the depth of a file index: 1024^8 MiB is far more
	// than any file.
	maxHeight = 8
)

// Type names of the objects this package defines.
const (
	TypeFile = "hg/file@1"
	TypeTree = "hg/tree@1"
)

// FileNode is one node of a file's index (hg/file@1). A node of height 0
// links raw chunks; a node of height h links nodes of height h-1. The tree
// is balanced: every path from the root to a chunk has the same length, and
// only the last node of each level may hold fewer than [FanOut] links.
type FileNode struct {
	Type   string `cbor:"type"`
	Size   uint64 `cbor:"size"`   // bytes of file content under this node
	Height uint64 `cbor:"height"` // 0 when Links are raw chunks
	Links  []Link `cbor:"links"`
}

// check validates a decoded node against the rules of hg/file@1.
func (n *FileNode) check(c cid.Cid) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("file node %s: %s: %w", c, fmt.Sprintf(format, args...), ErrInvalid)
	}
	switch {
	case n.Type != TypeFile:
		return bad("type %q, want %q", n.Type, TypeFile)
	case n.Height > maxHeight:
		return bad("height %d over %d", n.Height, maxHeight)
	case len(n.Links) > FanOut:
		return bad("%d links, at most %d", len(n.Links), FanOut)
	case n.Height > 0 && len(n.Links) == 0:
		return bad("no links at height %d", n.Height)
	}
	want := uint64(Raw)
	if n.Height > 0 {
		want = DagCBOR
	}
	for _, l := range n.Links {
		if l.Type() != want {
			return bad("link %s has codec 0x%x, want 0x%x", l.Cid, l.Type(), want)
		}
	}
	return nil
}

// PutOptions tune [PutFile]. A nil *PutOptions means the defaults.
type PutOptions struct {
	// Writer, if set, receives the blocks instead of a private Writer, so
	// that many files share batches; the caller flushes it. Without it,
	// PutFile flushes before it returns.
	Writer *Writer

	// Progress, if set, is called with the number of content bytes read
	// so far, after each chunk.
	Progress func(done int64)
}

// PutFile reads r to the end and stores it as raw chunks under an
// hg/file@1 index. It returns the root CID and the file size. Memory use is
// bounded by a few dozen chunks whatever the size of r: chunks are hashed
// on all cores while earlier ones are written.
func PutFile(ctx context.Context, st BlockWriter, r io.Reader, opts *PutOptions) (cid.Cid, uint64, error) {
	if opts == nil {
		opts = &PutOptions{}
	}
	w := opts.Writer
	own := w == nil
	if own {
		w = NewWriter(st)
	}
	pool := chunkPool
	prev := w.OnFlush
	w.OnFlush = func(blocks []Block) {
		for _, b := range blocks {
			if b.cid.Type() == Raw && cap(b.data) == ChunkSize {
				pool.put(b.data)
			}
		}
		if prev != nil {
			prev(blocks)
		}
	}
	defer func() { w.OnFlush = prev }()

	// Only the reader stops with readCtx: blocks go to the writer under
	// the caller's ctx, because a shared writer (PutTree's) may still be
	// storing them after PutFile returns.
	readCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := hashChunks(readCtx, r, pool)
	var (
		idx  = fileIndexBuilder{add: func(b Block) error { return w.Add(ctx, b) }}
		size uint64
	)
	for res := range chunks {
		if res.err != nil {
			cancel()
			for range chunks { // let the reader stop
			}
			return cid.Undef, 0, res.err
		}
		if err := w.Add(ctx, res.block); err != nil {
			cancel()
			for range chunks {
			}
			return cid.Undef, 0, err
		}
		size += uint64(len(res.block.data))
		if err := idx.addLeaf(Link{res.block.cid}, uint64(len(res.block.data))); err != nil {
			return cid.Undef, 0, err
		}
		if opts.Progress != nil {
			opts.Progress(int64(size))
		}
	}
	root, err := idx.finish()
	if err != nil {
		return cid.Undef, 0, err
	}
	if own {
		if err := w.Flush(ctx); err != nil {
			return cid.Undef, 0, err
		}
	}
	return root, size, nil
}

type chunkResult struct {
	block Block
	err   error
}

// hashChunks reads r in chunks and hashes them on all cores. It returns
// the results in file order; the channel closes after the last chunk or
// the first error.
func hashChunks(ctx context.Context, r io.Reader, pool *bufPool) <-chan chunkResult {
	o := newOrdered[chunkResult](ctx, 4)
	go func() {
		defer o.done()
		for {
			buf := pool.get()
			n, err := io.ReadFull(r, buf)
			if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
				o.ready(chunkResult{err: fmt.Errorf("read: %w", err)})
				return
			}
			if n == 0 { // end of input; an empty file has no chunks
				pool.put(buf)
				return
			}
			data := buf[:n]
			if n < len(buf) {
				// A short last chunk gets a buffer of its own size: a tree of
				// many small files must not pin a 1 MiB buffer per file.
				data = append([]byte(nil), data...)
				pool.put(buf)
			}
			if !o.submit(func() chunkResult { return chunkResult{block: NewBlock(Raw, data)} }) {
				return
			}
			if n < ChunkSize {
				return
			}
		}
	}()
	return o.results
}

// fileIndexBuilder builds the balanced index of a file as its chunks
// arrive, emitting each full node as soon as it is complete.
type fileIndexBuilder struct {
	add    func(Block) error
	levels [][]Link
	sizes  []uint64
}

func (b *fileIndexBuilder) addLeaf(l Link, size uint64) error {
	return b.push(0, l, size)
}

func (b *fileIndexBuilder) push(level int, l Link, size uint64) error {
	for len(b.levels) <= level {
		b.levels = append(b.levels, nil)
		b.sizes = append(b.sizes, 0)
	}
	b.levels[level] = append(b.levels[level], l)
	b.sizes[level] += size
	if len(b.levels[level]) == FanOut {
		c, sz, err := b.emit(level)
		if err != nil {
			return err
		}
		return b.push(level+1, Link{c}, sz)
	}
	return nil
}

// emit stores the node of the given level and empties the level.
func (b *fileIndexBuilder) emit(level int) (cid.Cid, uint64, error) {
	n := FileNode{Type: TypeFile, Size: b.sizes[level], Height: uint64(level), Links: b.levels[level]}
	data, err := Marshal(&n)
	if err != nil {
		return cid.Undef, 0, err
	}
	blk := NewBlock(DagCBOR, data)
	if err := b.add(blk); err != nil {
		return cid.Undef, 0, err
	}
	b.levels[level] = nil
	b.sizes[level] = 0
	return blk.cid, n.Size, nil
}

// finish closes every level and returns the root.
func (b *fileIndexBuilder) finish() (cid.Cid, error) {
	if len(b.levels) == 0 {
		b.levels, b.sizes = [][]Link{nil}, []uint64{0}
	}
	for i := 0; ; i++ {
		top := i == len(b.levels)-1
		if top && i > 0 && len(b.levels[i]) == 1 {
			return b.levels[i][0].Cid, nil
		}
		if top {
			c, _, err := b.emit(i)
			return c, err
		}
		if len(b.levels[i]) > 0 {
			c, sz, err := b.emit(i)
			if err != nil {
				return cid.Undef, err
			}
			if err := b.push(i+1, Link{c}, sz); err != nil {
				return cid.Undef, err
			}
		}
	}
}

// bufPool recycles chunk buffers so that a long put or get touches the
// same few dozen MiB of memory over and over. A sync.Pool would not do:
// its buffers die at every garbage collection, and faulting fresh pages in
// for every chunk cost more than reading the file.
type bufPool struct {
	size int
	free chan []byte
}

// poolBuffers bounds the buffers a pool keeps; more may be in use.
const poolBuffers = 64

// chunkPool is shared by every put and get in the process.
var chunkPool = newBufPool(ChunkSize)

func newBufPool(size int) *bufPool {
	return &bufPool{size: size, free: make(chan []byte, poolBuffers)}
}

func (p *bufPool) get() []byte {
	select {
	case b := <-p.free:
		return b[:p.size]
	default:
		return make([]byte, p.size)
	}
}

func (p *bufPool) put(b []byte) {
	if cap(b) != p.size {
		return
	}
	select {
	case p.free <- b[:p.size]:
	default:
	}
}
