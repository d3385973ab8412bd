package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// The store itself; a memstore wrapped to be damaged is in storetest's
// own tests (storetest.Corruptible).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) cas.Store { return memstore.New() })
}

// TestArena fills the arena across many chunks, with blocks of every size
// class and a CID too long for the fixed-size index, and checks that bytes
// once handed out never change while blocks are added and deleted.
func TestArena(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	var blocks []cas.Block
	for i := range 3000 {
		size := i % 700
		switch i % 500 {
		case 7:
			size = 300 << 10 // a chunk of its own
		case 11:
			size = cas.MaxBlockSize - 2 // the block is size+2 bytes: the limit
		}
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2+1)
		blocks = append(blocks, cas.NewBlock(cas.Raw, data))
	}
	long, err := cid.V1Builder{Codec: cid.Raw, MhType: multihash.SHA2_512}.Sum([]byte("long"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := cas.NewBlockWithCID(long, []byte("long"))
	if err != nil {
		t.Fatal(err)
	}
	blocks = append(blocks, lb)

	held := map[cid.Cid][]byte{}
	for i, b := range blocks {
		if err := st.Adopt(b); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := st.View(ctx, b.CID(), func(d []byte) error {
				held[b.CID()] = d
				_ = append(d, 0xff) // must not write into the arena
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Put(ctx, blocks[:10]...); err != nil { // already there: no new copy
		t.Fatal(err)
	}
	for i, b := range blocks {
		if i%2 == 1 {
			if err := st.Delete(ctx, b.CID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, b := range blocks {
		got, err := st.Get(ctx, b.CID())
		if i%2 == 1 {
			if !errors.Is(err, cas.ErrNotFound) {
				t.Fatalf("block %d after Delete: %v", i, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, b.Data()) {
			t.Fatalf("block %d: %d bytes, %v; want %d bytes", i, len(got), err, len(b.Data()))
		}
	}
	for c, d := range held {
		if err := cas.Verify(c, d); err != nil {
			t.Fatalf("bytes handed out earlier changed: %v", err)
		}
	}
	n := 0
	if err := st.AllKeys(ctx, func(c cid.Cid, size int) error {
		n++
		if c == long && size != 4 {
			t.Errorf("size of the long CID's block = %d", size)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := (len(blocks) + 1) / 2; n != want {
		t.Fatalf("AllKeys listed %d blocks, want %d", n, want)
	}
}
