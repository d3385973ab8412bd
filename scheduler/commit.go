package scheduler

import (
	"context"
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
	// are written, so running nodes go on. They go in one bulk put, which
	// a store keyed by CID makes in key order, a range of keys a
	// transaction (cas.BulkPutter). The refs go last, so a crash between
	// two of its transactions leaves only unreferenced blocks, which gc
	// drops.
	var refs []cas.Ref
	packs := []cas.Packed{cas.Pack(b.pages...)}
	for _, r := range b.results {
		packs = append(packs, r.blocks)
		if r.state == dag.Done && !r.memo && r.memoKey != "" {
			refs = append(refs, cas.Ref{NS: MemoNamespace, Name: r.memoKey, CID: r.accept})
		}
	}
	if err := cas.PutPacked(ctx, st, packs...); err != nil {
		return err
	}
	return st.SetRefs(ctx, append(refs, b.ref)...)
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
