package cas

import "context"

// Default batch bounds of a [Writer].
const (
	defaultBatchBytes  = 16 << 20
	defaultBatchBlocks = 4096
)

// Writer gathers blocks and stores them in few, large [BlockWriter.Put]
// calls, so that putting thousands of small blocks costs a handful of
// transactions.
// A full batch is stored in the background while the next one fills, so
// hashing and reading overlap the store's writes and syncs; at most one
// batch is in flight. A Writer is not safe for concurrent use. Blocks
// added are only stored once [Writer.Flush] returns nil: call it before
// handing out a root CID.
type Writer struct {
	st       BlockWriter
	pending  []Block
	bytes    int
	inflight chan error // the result of the batch being stored, or nil

	// MaxBytes and MaxBlocks bound a batch; zero means the defaults
	// (16 MiB, 4096 blocks).
	MaxBytes, MaxBlocks int

	// OnFlush, if set, is called with the blocks of each batch once they
	// are stored, so a caller may reuse their buffers. It may run on
	// another goroutine. While it is nil, a store that is an [Adopter]
	// takes the blocks over instead of copying them.
	OnFlush func(blocks []Block)
}

// Adopter is a [Store] that can keep blocks' bytes instead of copying them
// (an in-memory store). The caller hands the blocks over and never modifies
// their bytes again, as [NewBlock] already asks.
type Adopter interface {
	Adopt(blocks ...Block) error
}

// put stores one batch: handed over to an [Adopter] when nobody means to
// reuse the buffers, otherwise through Put, and then onFlush.
func (w *Writer) put(ctx context.Context, batch []Block, onFlush func([]Block)) error {
	if a, ok := w.st.(Adopter); ok && onFlush == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		return a.Adopt(batch...)
	}
	if err := w.st.Put(ctx, batch...); err != nil {
		return err
	}
	if onFlush != nil {
		onFlush(batch)
	}
	return nil
}

// NewWriter returns a Writer that stores into st.
func NewWriter(st BlockWriter) *Writer { return &Writer{st: st} }

// Add queues b. When the batch is full it starts storing it, after waiting
// for the batch before it; an error storing an earlier batch is returned
// here or by the next Flush. A block over [MaxBlockSize] is refused
// ([CheckBlockSizes]) and not queued.
func (w *Writer) Add(ctx context.Context, b Block) error {
	if len(b.data) > MaxBlockSize {
		return CheckBlockSizes(b)
	}
	w.pending = append(w.pending, b)
	w.bytes += len(b.data)
	maxBytes, maxBlocks := w.MaxBytes, w.MaxBlocks
	if maxBytes == 0 {
		maxBytes = defaultBatchBytes
	}
	if maxBlocks == 0 {
		maxBlocks = defaultBatchBlocks
	}
	if w.bytes < maxBytes && len(w.pending) < maxBlocks {
		return nil
	}
	if err := w.wait(); err != nil {
		return err
	}
	batch, onFlush := w.pending, w.OnFlush
	w.pending, w.bytes = make([]Block, 0, len(batch)), 0
	done := make(chan error, 1)
	w.inflight = done
	go func() { done <- w.put(ctx, batch, onFlush) }()
	return nil
}

// wait waits for the batch in flight, if any, and returns its error.
func (w *Writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	err := <-w.inflight
	w.inflight = nil
	return err
}

// Flush waits for the batch in flight and stores every queued block.
// When it returns nil, every block ever added is stored.
func (w *Writer) Flush(ctx context.Context) error {
	if err := w.wait(); err != nil {
		return err
	}
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.put(ctx, w.pending, w.OnFlush); err != nil {
		return err
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	w.bytes = 0
	return nil
}
