package cas

import "context"

// BulkPutter is a [Store] that stores many blocks at once better than
// Puts of them in the order given: a store keyed by CID, say, that writes
// them in the order of their keys, a range of keys at a time.
type BulkPutter interface {
	// PutPacked stores the blocks of packs; blocks already present are
	// skipped. It is not one atomic write: after a crash some of the
	// blocks may be stored and others not, so whatever refers to them (a
	// ref, a pin) is to be set once it has returned. A block over
	// [MaxBlockSize] is refused with an error, and blocks may have been
	// stored before it.
	PutPacked(ctx context.Context, packs ...Packed) error
}

// PutPacked stores the blocks of packs in st, as [BulkPutter.PutPacked]
// says: with st's own PutPacked if st is a BulkPutter, otherwise with the
// Puts of a [Writer], in the order packed.
func PutPacked(ctx context.Context, st BlockWriter, packs ...Packed) error {
	if b, ok := st.(BulkPutter); ok {
		return b.PutPacked(ctx, packs...)
	}
	w := NewWriter(st)
	for _, p := range packs {
		for off := 0; ; {
			_, next, ok := p.Next(off)
			if !ok {
				break
			}
			if err := w.Add(ctx, p.Block(off)); err != nil {
				return err
			}
			off = next
		}
	}
	return w.Flush(ctx)
}
