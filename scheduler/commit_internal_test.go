package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// putRecorder notes the CIDs of each Put, in the order given.
type putRecorder struct {
	cas.Store
	puts [][]string
}

func (p *putRecorder) Put(ctx context.Context, blocks ...cas.Block) error {
	var keys []string
	for _, b := range blocks {
		keys = append(keys, b.CID().KeyString())
	}
	p.puts = append(p.puts, keys)
	return p.Store.Put(ctx, blocks...)
}

// A commit's blocks go in key order, in Puts of at most the chunk size
// whose key ranges follow one another, and all of them are stored.
func TestPutInKeyOrder(t *testing.T) {
	ctx := context.Background()
	var blocks []cas.Block
	for i := range 23 {
		blocks = append(blocks, cas.NewBlock(cas.Raw, []byte(fmt.Sprintf("block %d", i))))
	}
	rec := &putRecorder{Store: memstore.New()}
	packs := []cas.Packed{cas.Pack(blocks[:4]...), cas.Pack(), cas.Pack(blocks[4:]...)}
	if err := putInKeyOrder(ctx, rec, packs, 5); err != nil {
		t.Fatal(err)
	}
	if len(rec.puts) != 5 {
		t.Fatalf("%d Puts for 23 blocks in chunks of 5, want 5", len(rec.puts))
	}
	last := ""
	for i, keys := range rec.puts {
		if len(keys) > 5 {
			t.Errorf("Put %d has %d blocks, more than the chunk", i, len(keys))
		}
		for _, k := range keys {
			if strings.Compare(k, last) <= 0 {
				t.Fatalf("Put %d: keys out of order", i)
			}
			last = k
		}
	}
	for _, b := range blocks {
		if ok, err := rec.Has(ctx, b.CID()); err != nil || !ok {
			t.Fatalf("block %s not stored (%v)", b.CID(), err)
		}
	}
}

// keyOrder orders blocks as comparing whole keys does, also where keys
// share their first 16 bytes or are shorter than that.
func TestKeyOrder(t *testing.T) {
	var blocks []cas.Block
	for i := range 200 {
		blocks = append(blocks, cas.NewBlock(cas.Raw, []byte(fmt.Sprintf("block %d", i))), cas.NewBlock(cas.DagCBOR, []byte{0x18, byte(i)}))
	}
	// Identity CIDs carry their data in the key: these share the first
	// 16 bytes or end before them.
	for _, data := range []string{"same twelve bytes, then a", "same twelve bytes, then b", "same twelve bytes", "same twelve", "", "s", "same twelve bytes, then a\x00"} {
		mh, err := multihash.Sum([]byte(data), multihash.IDENTITY, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := cas.NewBlockWithCID(cid.NewCidV1(cas.Raw, mh), []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	rand.Shuffle(len(blocks), func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	want := slices.Clone(blocks)
	slices.SortFunc(want, func(a, b cas.Block) int { return strings.Compare(a.CID().KeyString(), b.CID().KeyString()) })
	packs := []cas.Packed{cas.Pack(blocks[:100]...), cas.Pack(blocks[100:]...)}
	order := keyOrder(packs)
	if len(order) != len(want) {
		t.Fatalf("%d blocks in order, want %d", len(order), len(want))
	}
	for i, at := range order {
		if got := packs[at.pack].Block(at.off); got.CID() != want[i].CID() || string(got.Data()) != string(want[i].Data()) {
			t.Fatalf("position %d: %s, want %s", i, got.CID(), want[i].CID())
		}
	}
}
