package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// setBulkChunk makes PutPacked write n blocks a transaction until the
// test ends.
func setBulkChunk(t *testing.T, n int) {
	old := bulkChunk
	bulkChunk = n
	t.Cleanup(func() { bulkChunk = old })
}

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

// A bulk put's blocks go in key order, in Puts of at most the chunk size
// whose key ranges follow one another, and all of them are stored.
func TestPutInKeyOrder(t *testing.T) {
	ctx := context.Background()
	var blocks []cas.Block
	for i := range 23 {
		blocks = append(blocks, cas.NewBlock(cas.Raw, []byte(fmt.Sprintf("block %d", i))))
	}
	s, _ := newStore(t)
	defer s.Close()
	rec := &putRecorder{Store: s}
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

// A bulk put of blocks across several packs, in many transactions and
// filling several pack files, stores all of those blocks and only them,
// each where it reads back whole, and leaves a store that checks clean.
func TestPutPacked(t *testing.T) {
	setPackMax(t, 1<<20)
	setBulkChunk(t, 50)
	ctx := context.Background()
	s, dir := newStore(t)
	defer s.Close()
	before := block("bulk-before", 3000)
	if err := s.Put(ctx, before); err != nil {
		t.Fatal(err)
	}
	var blocks []cas.Block
	for i := range 700 {
		size := 50 + i*97%4000
		if i%50 == 7 {
			size = 300 << 10 // written past the page cache
		}
		blocks = append(blocks, block(fmt.Sprint("bulk-", i), size))
	}
	packs := []cas.Packed{cas.Pack(blocks[:150]...), cas.Pack(), cas.Pack(append(blocks[150:500:500], blocks[3], before)...), cas.Pack(blocks[500:]...)}
	if err := s.PutPacked(ctx, packs...); err != nil {
		t.Fatal(err)
	}
	want := map[cid.Cid]bool{before.CID(): true}
	for _, b := range blocks {
		want[b.CID()] = true
	}
	got := allKeys(t, s)
	if len(got) != len(want) {
		t.Errorf("%d blocks stored, want %d", len(got), len(want))
	}
	for _, c := range got {
		if !want[c] {
			t.Errorf("%s stored, but no bulk put or Put had it", c)
		}
	}
	getsBack(t, s, append(blocks, before))
	if n := len(packFiles(t, dir)); n < 2 {
		t.Errorf("%d pack files, want the bulk put to fill several", n)
	}
	checkClean(t, s)
}

const (
	bulkCrashChunk  = 40 // blocks per transaction in the bulk crash child
	bulkCrashPacks  = 8  // packs per bulk put
	bulkCrashBlocks = 50 // blocks per pack
)

// bulkCrashBlock returns block i of pack p of bulk put n of the given
// run: the same bytes in the child that writes it and in the parent that
// checks it.
func bulkCrashBlock(run, n, p, i int) cas.Block {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[0:], uint64(run))
	binary.LittleEndian.PutUint64(seed[8:], uint64(n))
	binary.LittleEndian.PutUint64(seed[16:], uint64(p*bulkCrashBlocks+i))
	seed[24] = 'b'
	d := make([]byte, 64+(p*131+i*257)%3000)
	rand.NewChaCha8(seed).Read(d)
	return cas.NewBlock(cas.Raw, d)
}

// bulkCrashPut returns the packs of bulk put n of run.
func bulkCrashPut(run, n int) []cas.Packed {
	packs := make([]cas.Packed, bulkCrashPacks)
	blocks := make([]cas.Block, bulkCrashBlocks)
	for p := range packs {
		for i := range blocks {
			blocks[i] = bulkCrashBlock(run, n, p, i)
		}
		packs[p] = cas.Pack(blocks...)
	}
	return packs
}

// bulkCrashChild makes bulk put after bulk put into the store in dir,
// printing "bulk N" once PutPacked N has returned, until it is killed.
func bulkCrashChild(dir string, run int) error {
	bulkChunk = bulkCrashChunk
	return crashSteps(dir, "bulk", func(s *Store, n int) error {
		return s.PutPacked(context.Background(), bulkCrashPut(run, n)...)
	})
}

// TestBulkCrash kills a process in the middle of its bulk puts, several
// times, and checks that the database opens and passes bbolt's
// consistency check, that every block of every bulk put that returned is
// stored and verifies, and that of the bulk put a kill cut short the
// store holds whole transactions in key order: the first blocks in key
// order, a multiple of the chunk of them (or all), and nothing after.
func TestBulkCrash(t *testing.T) {
	const runs = 4
	s, returned := killRuns(t, "bulkcrash", "bulk", runs, func(run int) int { return 1 + run }, 150*time.Millisecond)
	defer s.Close()
	ctx := context.Background()
	stored := map[cid.Cid]bool{}
	err := s.AllKeys(ctx, func(c cid.Cid, size int) error {
		stored[c] = true
		return s.View(ctx, c, func([]byte) error { return nil })
	})
	if err != nil {
		t.Fatalf("verifying every block: %v", err)
	}
	want := 0
	for run, n := range returned {
		for b := range n {
			for _, pk := range bulkCrashPut(run, b) {
				for off := 0; ; {
					key, next, ok := pk.Next(off)
					if !ok {
						break
					}
					if c, _ := cas.CastCID(key); !stored[c] {
						t.Fatalf("run %d bulk put %d: block %s, whose bulk put returned, is missing", run, b, c)
					}
					off = next
				}
			}
			want += bulkCrashPacks * bulkCrashBlocks
		}
		// The bulk put the kill cut short, and the one after it, which
		// never began.
		cut := bulkCrashPut(run, n)
		have := 0
		for i, at := range keyOrder(cut) {
			key, _, _ := cut[at.pack].Next(at.off)
			c, _ := cas.CastCID(key)
			switch {
			case stored[c] && have < i:
				t.Fatalf("run %d bulk put %d: block %d in key order stored after one that is not", run, n, i)
			case stored[c]:
				have++
			}
		}
		if all := bulkCrashPacks * bulkCrashBlocks; have%bulkCrashChunk != 0 && have != all {
			t.Errorf("run %d bulk put %d: %d of its blocks stored, not whole transactions of %d", run, n, have, bulkCrashChunk)
		}
		t.Logf("run %d: %d blocks of the bulk put cut short stored", run, have)
		want += have
		for _, pk := range bulkCrashPut(run, n+1) {
			if key, _, ok := pk.Next(0); ok {
				if c, _ := cas.CastCID(key); stored[c] {
					t.Errorf("run %d: a block of bulk put %d, which never began, is stored", run, n+1)
				}
			}
		}
	}
	if len(stored) != want {
		t.Errorf("%d blocks after the crashes, want %d", len(stored), want)
	}
}
