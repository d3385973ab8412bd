package cas

import "context"

// Default batch bounds of a [Writer].
const (
	defaultBatchBytes  = 16 << 20
	defaultBatchBlocks = 4096
)

// Writer gathers blocks and stores them in few, large [Store.Put] calls, so
// that putting thousands of small blocks costs a handful of transactions.
// It is not safe for concurrent use. Blocks added are only stored once the
// Writer flushes: call [Writer.Flush] before handing out a root CID.
type Writer struct {
	st      Store
	pending []Block
	bytes   int

	// MaxBytes and MaxBlocks bound a batch; zero means the defaults
	// (16 MiB, 4096 blocks).
	MaxBytes, MaxBlocks int

	// OnFlush, if set, is called with the blocks of each batch once they
	// are stored, so a caller may reuse their buffers.
	OnFlush func(blocks []Block)
}

// NewWriter returns a Writer that stores into st.
func NewWriter(st Store) *Writer { return &Writer{st: st} }

// Add queues b and flushes when the batch is full.
func (w *Writer) Add(ctx context.Context, b Block) error {
	w.pending = append(w.pending, b)
	w.bytes += len(b.data)
	maxBytes, maxBlocks := w.MaxBytes, w.MaxBlocks
	if maxBytes == 0 {
		maxBytes = defaultBatchBytes
	}
	if maxBlocks == 0 {
		maxBlocks = defaultBatchBlocks
	}
	if w.bytes >= maxBytes || len(w.pending) >= maxBlocks {
		return w.Flush(ctx)
	}
	return nil
}

// Flush stores every queued block in one [Store.Put].
func (w *Writer) Flush(ctx context.Context) error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.st.Put(ctx, w.pending...); err != nil {
		return err
	}
	if w.OnFlush != nil {
		w.OnFlush(w.pending)
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	w.bytes = 0
	return nil
}
