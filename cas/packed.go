package cas

import (
	"encoding/binary"

	"github.com/ipfs/go-cid"
)

// Packed holds blocks in one byte slice: for each block, in the order
// packed, the length of its binary CID, the CID, the length of its data
// and the data, lengths as unsigned varints.
//
// A block kept as a [Block] is two objects for the garbage collector (its
// CID and its data); a scheduler holding the blocks of tens of thousands
// of accepted nodes until it stores them made the collector visit a
// million objects at every cycle. Packed, the blocks of a node are one.
//
// A Packed is made only by [Pack]: its blocks were whole, hashed blocks,
// and reading them back does not hash them again.
type Packed struct {
	buf []byte
	n   int
}

// Pack copies blocks into a Packed.
func Pack(blocks ...Block) Packed {
	size := 0
	for _, b := range blocks {
		size += 2*binary.MaxVarintLen64 + b.cid.ByteLen() + len(b.data)
	}
	buf := make([]byte, 0, size)
	for _, b := range blocks {
		key := b.cid.KeyString()
		buf = binary.AppendUvarint(buf, uint64(len(key)))
		buf = append(buf, key...)
		buf = binary.AppendUvarint(buf, uint64(len(b.data)))
		buf = append(buf, b.data...)
	}
	return Packed{buf: buf, n: len(blocks)}
}

// Len returns the number of blocks.
func (p Packed) Len() int { return p.n }

// Next returns the binary CID of the block that starts at offset off (the
// first at 0) and the offset of the block after it, len of the buffer
// after the last; ok is false at the end. key aliases the Packed.
func (p Packed) Next(off int) (key []byte, next int, ok bool) {
	if off >= len(p.buf) {
		return nil, off, false
	}
	key, rest := p.field(off)
	_, next = p.field(rest)
	return key[:len(key):len(key)], next, true
}

// Block returns the block that starts at offset off, an offset Next gave.
// Its data aliases the Packed, which must not be modified.
func (p Packed) Block(off int) Block {
	key, rest := p.field(off)
	data, _ := p.field(rest)
	c, err := cid.Cast(key)
	if err != nil {
		panic("cas: corrupt Packed: " + err.Error()) // Pack wrote a valid CID here
	}
	return Block{cid: c, data: data[:len(data):len(data)]}
}

// field reads one length-prefixed field at off.
func (p Packed) field(off int) (field []byte, next int) {
	n, w := binary.Uvarint(p.buf[off:])
	if w <= 0 || uint64(len(p.buf)-off-w) < n {
		panic("cas: corrupt Packed") // only Pack writes one
	}
	start := off + w
	return p.buf[start : start+int(n)], start + int(n)
}
