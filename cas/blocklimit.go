package cas

import "fmt"

// CheckBlockSizes returns nil when every block is at most [MaxBlockSize]
// bytes, and otherwise an error wrapping [ErrTooLarge] that names the
// first block over it, its size and the limit. Every store and
// [Writer] refuses such a block rather than keep it: no bundle could
// carry it (a CAR section holds at most MaxBlockSize bytes of data, see
// [MaxCARSectionSize]), so a store that held one could never be moved.
// Data over the limit is stored as a file ([PutFile]), a value inside
// an object as an outlined value ([Outline]), and a whole object under
// an envelope ([PutObject]).
func CheckBlockSizes(blocks ...Block) error {
	for _, b := range blocks {
		if len(b.data) > MaxBlockSize {
			return fmt.Errorf("block %s of %d bytes is over the block limit of %d bytes: %w", b.cid, len(b.data), MaxBlockSize, ErrTooLarge)
		}
	}
	return nil
}
