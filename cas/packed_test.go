package cas_test

import (
	"bytes"
	"testing"

	"github.com/haygent/hg/cas"
)

// unpack walks p with Next and returns its blocks and their offsets.
func unpack(t *testing.T, p cas.Packed) (blocks []cas.Block, offs []int) {
	t.Helper()
	for off := 0; ; {
		key, next, ok := p.Next(off)
		if !ok {
			return blocks, offs
		}
		b := p.Block(off)
		if string(key) != b.CID().KeyString() {
			t.Fatalf("at %d: Next gave key %x, Block a block of %s", off, key, b.CID())
		}
		blocks, offs = append(blocks, b), append(offs, off)
		off = next
	}
}

// Blocks come out of a Packed as they went in, in order, CIDs and data
// alike, the empty block and a block of the largest size included.
func TestPackedRoundTrip(t *testing.T) {
	in := []cas.Block{
		cas.NewBlock(cas.Raw, []byte("one")),
		cas.NewBlock(cas.Raw, nil),
		cas.NewBlock(cas.DagCBOR, []byte{0xa1, 0x61, 0x61, 0x01}),
		cas.NewBlock(cas.Raw, bytes.Repeat([]byte{7}, cas.MaxBlockSize)),
		cas.NewBlock(cas.Raw, []byte("one")), // the same block again
	}
	p := cas.Pack(in...)
	if p.Len() != len(in) {
		t.Fatalf("Len %d, want %d", p.Len(), len(in))
	}
	out, offs := unpack(t, p)
	if len(out) != len(in) {
		t.Fatalf("%d blocks out, want %d", len(out), len(in))
	}
	for i, b := range out {
		if b.CID() != in[i].CID() || !bytes.Equal(b.Data(), in[i].Data()) {
			t.Errorf("block %d: %s (%d bytes), want %s (%d bytes)", i, b.CID(), len(b.Data()), in[i].CID(), len(in[i].Data()))
		}
		if err := cas.Verify(b.CID(), b.Data()); err != nil {
			t.Errorf("block %d: %v", i, err)
		}
	}
	// Appending to a block taken out must not write into the next one.
	first := p.Block(0)
	_ = append(first.Data(), 'x')
	if got := p.Block(offs[1]); got.CID() != in[1].CID() {
		t.Fatalf("appending to block 0 changed block 1: %s", got.CID())
	}
	if p := cas.Pack(); p.Len() != 0 {
		t.Errorf("empty Packed: Len %d", p.Len())
	} else if out, _ := unpack(t, p); len(out) != 0 {
		t.Errorf("empty Packed: %d blocks", len(out))
	}
}

// The data of a packed block is a copy: changing what was packed does
// not change the pack.
func TestPackCopies(t *testing.T) {
	data := []byte("mutable")
	b := cas.NewBlock(cas.Raw, data)
	p := cas.Pack(b)
	data[0] = 'M'
	if got := p.Block(0); string(got.Data()) != "mutable" {
		t.Fatalf("packed data %q changed with its source", got.Data())
	}
}
