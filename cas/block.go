package cas

import (
	"fmt"

	"github.com/ipfs/go-cid"
)

// MaxBlockSize bounds the bytes of one block. File chunks are [ChunkSize];
// the limit leaves room for large tree nodes and for blocks made by other
// tools.
const MaxBlockSize = 4 << 20

// Block is a CID together with bytes that hash to it. The fields are
// unexported so that a Block can only be made by [NewBlock], which hashes,
// or by [NewBlockWithCID], which verifies: a store may trust any Block it is
// handed without hashing it again.
type Block struct {
	cid  cid.Cid
	data []byte
}

// NewBlock hashes data and returns it as a block of the given codec.
// The block keeps data: the caller must not modify it afterwards.
func NewBlock(codec uint64, data []byte) Block {
	return Block{cid: Sum(codec, data), data: data}
}

// NewBlockWithCID checks that data hashes to c and returns the block.
// The error wraps [ErrCorrupt] on a mismatch and [ErrTooLarge] for data
// over [MaxBlockSize].
func NewBlockWithCID(c cid.Cid, data []byte) (Block, error) {
	if len(data) > MaxBlockSize {
		return Block{}, fmt.Errorf("block %s: %d bytes: %w", c, len(data), ErrTooLarge)
	}
	if err := Verify(c, data); err != nil {
		return Block{}, err
	}
	return Block{cid: c, data: data}, nil
}

// CID returns the block's CID.
func (b Block) CID() cid.Cid { return b.cid }

// Data returns the block's bytes. The caller must not modify them.
func (b Block) Data() []byte { return b.data }

// Clone returns the block with a private copy of its bytes.
func (b Block) Clone() Block {
	return Block{cid: b.cid, data: append(make([]byte, 0, len(b.data)), b.data...)}
}
