package boltstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"math"
	"slices"

	"github.com/haygent/hg/cas"
)

// bulkChunk is how many blocks of a PutPacked, in key order, go in one
// transaction. A transaction over a range of keys touches only that part
// of the index, so the leaves bbolt materializes in memory at once stay
// bounded however big the batch.
var bulkChunk = 16384 // tests lower it

var _ cas.BulkPutter = (*Store)(nil)

// PutPacked implements [cas.BulkPutter]: the blocks of packs go in key
// order, in transactions of bulkChunk blocks, each a Put. The index is
// keyed by CID, so a batch's blocks land on pages all over it, and each
// transaction of blocks in random order rewrites up to the whole index
// (batches of a cas.Writer's default size in the order made made a big
// commit cost twenty times what one transaction does), while consecutive
// key ranges share no leaf. A crash between two transactions leaves the
// blocks of the chunks committed, whole: the caller sets what refers to
// them once PutPacked has returned.
func (s *Store) PutPacked(ctx context.Context, packs ...cas.Packed) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	end() // each Put begins again
	return putInKeyOrder(ctx, s, packs, bulkChunk)
}

// putInKeyOrder stores the blocks of packs in the order of their CIDs'
// bytes, in Puts of at most chunk blocks each, the next chunk gathered
// while one is written. Only the blocks of the chunks being written are
// taken out of their packs at a time.
func putInKeyOrder(ctx context.Context, st cas.BlockWriter, packs []cas.Packed, chunk int) error {
	w := cas.NewWriter(st)
	w.MaxBlocks, w.MaxBytes = chunk, math.MaxInt
	for _, at := range keyOrder(packs) {
		if err := w.Add(ctx, packs[at.pack].Block(at.off)); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// keyAt is where a block lies in a list of packs.
type keyAt struct {
	hi, lo uint64 // the first 16 bytes of its CID, zero-padded
	pack   int
	off    int
}

// keyOrder returns where the blocks of packs lie, in the order of their
// CIDs' bytes. It sorts the first 16 bytes of each key, side by side in
// one slice, and compares whole keys only on a tie: comparing the keys
// where they lie, all over the heap, missed the processor's cache at
// nearly every step, and a commit of 600,000 blocks spent a second
// sorting them.
func keyOrder(packs []cas.Packed) []keyAt {
	n := 0
	for _, p := range packs {
		n += p.Len()
	}
	order := make([]keyAt, 0, n)
	for i, p := range packs {
		for off := 0; ; {
			key, next, ok := p.Next(off)
			if !ok {
				break
			}
			var k [16]byte
			copy(k[:], key)
			order = append(order, keyAt{binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint64(k[8:]), i, off})
			off = next
		}
	}
	slices.SortFunc(order, func(a, b keyAt) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		ka, _, _ := packs[a.pack].Next(a.off)
		kb, _, _ := packs[b.pack].Next(b.off)
		return bytes.Compare(ka, kb)
	})
	return order
}
