package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"math"
	"slices"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

// batch is one commit's work: the results accepted since the last commit
// and the run record's changed pages and new root, encoded when the
// results were taken.
type batch struct {
	results []result
	pages   []cas.Block
	ref     cas.Ref
}

// commitEvery is the pause after each commit of accepted work before the
// next. A crash loses at most the work accepted since the last commit
// began, which the resumed run does again.
const commitEvery = 100 * time.Millisecond

// commitPauseFactor: the pause after a commit is at least this many times
// what the commit took. A store keyed by CID puts a batch's blocks on
// leaves all over its index, so a commit costs up to the whole index
// whatever its size, and on a big store (a million blocks at 100,000
// nodes) pauses of commitEvery made most commits rewrite a leaf for
// nearly every block. Pausing in proportion gathers bigger batches there,
// so the writes stay within a third of one core's time; on a small store
// commits are quick and the pause stays commitEvery.
const commitPauseFactor = 2

// commitChunk is how many blocks of a commit, in key order, go in one
// transaction. A transaction over a range of keys touches only that part
// of the index, so the leaves a store materializes in memory at once stay
// bounded however big the batch.
var commitChunk = 16384 // tests lower it

// commit writes out finished nodes: their blocks and the changed pages of
// the run record in as few transactions as the writer's batches allow,
// then every memo entry and the run's new root in one more.
func (e *execution) commit(ctx context.Context, b *batch) error {
	ctx = context.WithoutCancel(ctx)
	st, err := e.s.opts.Store.Open(ctx, false)
	if err != nil {
		return err
	}
	defer st.Close()
	// The batch's blocks are the main loop's alone: no lock while they
	// are written, so running nodes go on. They go in key order, in
	// transactions of commitChunk blocks: a store keyed by CID puts a
	// batch's blocks on pages all over its index, so each transaction of
	// blocks in random order rewrites up to the whole index (batches of
	// the writer's default size in the order made, made a big commit cost
	// twenty times what one transaction does), while consecutive key
	// ranges share no leaf. The refs go last, so a crash between two of
	// these transactions leaves only unreferenced blocks, which gc drops.
	var refs []cas.Ref
	packs := []cas.Packed{cas.Pack(b.pages...)}
	for _, r := range b.results {
		packs = append(packs, r.blocks)
		if r.state == dag.Done && !r.memo && r.memoKey != "" {
			refs = append(refs, cas.Ref{NS: MemoNamespace, Name: r.memoKey, CID: r.accept})
		}
	}
	if err := putInKeyOrder(ctx, st, packs, commitChunk); err != nil {
		return err
	}
	return st.SetRefs(ctx, append(refs, b.ref)...)
}

// putInKeyOrder stores the blocks of packs in the order of their CIDs'
// bytes, in Puts of at most chunk blocks each, the next chunk gathered
// while one is written. Only the blocks of the chunks being written are
// taken out of their packs at a time.
func putInKeyOrder(ctx context.Context, st cas.Store, packs []cas.Packed, chunk int) error {
	w := cas.NewWriter(st)
	w.MaxBlocks, w.MaxBytes = chunk, math.MaxInt
	for _, at := range keyOrder(packs) {
		if err := w.Add(ctx, packs[at.pack].Block(at.off)); err != nil {
			return err
		}
	}
	return w.Flush(ctx)
}

// packedAt is where a block lies in a list of packs.
type packedAt struct {
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
func keyOrder(packs []cas.Packed) []packedAt {
	n := 0
	for _, p := range packs {
		n += p.Len()
	}
	order := make([]packedAt, 0, n)
	for i, p := range packs {
		for off := 0; ; {
			key, next, ok := p.Next(off)
			if !ok {
				break
			}
			var k [16]byte
			copy(k[:], key)
			order = append(order, packedAt{binary.BigEndian.Uint64(k[:8]), binary.BigEndian.Uint64(k[8:]), i, off})
			off = next
		}
	}
	slices.SortFunc(order, func(a, b packedAt) int {
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

// encodeRecord encodes the pages of the run record that changed since the
// last call and returns them with the ref to the record's new root. The
// caller holds e.mu.
func (e *execution) encodeRecord(ctx context.Context) ([]cas.Block, cas.Ref, error) {
	if e.pages == nil {
		e.pages = &pageCache{}
		e.pages.markAll(len(e.rec.Nodes))
	}
	blocks, root, err := encodeRecord(ctx, e.rec, e.pages)
	if err != nil {
		return nil, cas.Ref{}, err
	}
	return blocks, cas.Ref{NS: RefNamespace, Name: e.rec.Run, CID: root}, nil
}

// saveRecord stores the run record. The caller holds e.mu.
func (e *execution) saveRecord(ctx context.Context, st cas.Store) error {
	blocks, ref, err := e.encodeRecord(ctx)
	if err != nil {
		return err
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return err
	}
	return st.SetRefs(ctx, ref)
}
