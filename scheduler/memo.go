package scheduler

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// memoKey is the key of a node's work in the memo cache: its package pkg
// (whose tree is pkgCID), the CID of its input's canonical encoding, its
// permissions, the adapter and the tree it is given, if any.
func (e *execution) memoKey(pkg *haygent.Package, pkgCID, input cid.Cid, given *wsTree) string {
	adapter := "none"
	if e.s.opts.Adapter != nil {
		adapter = e.s.opts.Adapter.Name() + "/" + e.s.opts.Adapter.Model()
	}
	h := sha256.New()
	fmt.Fprintf(h, "hg-memo/1\n%s\n%s\n%s\n%s\n", pkgCID, input, strings.Join(pkg.Permissions.Snapshot(), "\n"), adapter)
	if given != nil {
		// The tree the node starts from is part of its work; a node
		// given none keeps the key it always had.
		fmt.Fprintf(h, "workspace %s\n", given.root)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// reuse returns the memo hit of key this run may reuse instead of running
// the node, unless the cache is bypassed: one whose receipt no
// re-measurement took back and, if readers nodes work on its final
// workspace, that tree (base indexes the package's blocks).
func (e *execution) reuse(ctx context.Context, key string, readers int, base map[cid.Cid]cas.Block) (memoHit, *wsTree, bool) {
	if e.s.opts.NoCache {
		return memoHit{}, nil, false
	}
	e.mu.Lock()
	hit, ok := e.memoRun[key]
	stored, inStore := e.memoIndex[key]
	e.mu.Unlock()
	if !ok && inStore {
		hit, ok = e.memo(ctx, stored)
	}
	if !ok || e.regressed[hit.receipt] {
		return memoHit{}, nil, false
	}
	// A node that others work on hands on its final workspace: an entry
	// that cannot is not reused.
	var tree *wsTree
	if readers > 0 {
		if tree = e.memoTree(ctx, hit, base); tree == nil {
			return memoHit{}, nil, false
		}
	}
	return hit, tree, true
}

// loadMemoIndex reads every memo entry of the store, once per run, so that
// looking a node up costs a map access, not a transaction. Entries other
// processes add during the run are not seen; that only costs a rerun.
func (e *execution) loadMemoIndex(ctx context.Context) error {
	if e.s.opts.NoCache {
		return nil
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return err
	}
	defer st.Close()
	refs, err := st.Refs(ctx, MemoNamespace)
	if err != nil {
		return err
	}
	e.memoIndex = make(map[string]cid.Cid, len(refs))
	for _, r := range refs {
		e.memoIndex[r.Name] = r.CID
	}
	return nil
}

type memoHit struct {
	receipt, accept cid.Cid
	output          map[string]any
	final           cid.Cid    // the receipt's final workspace, if it records one
	blocks          cas.Packed // the work's blocks, for an entry this run made and has not stored yet
}

// memoTree returns the final workspace of a memo hit, from the blocks of
// work this run has not stored yet or from the store; nil if it has none
// or it cannot be read.
func (e *execution) memoTree(ctx context.Context, hit memoHit, base map[cid.Cid]cas.Block) *wsTree {
	if !hit.final.Defined() {
		return nil
	}
	if hit.blocks.Len() > 0 {
		t, err := treeFrom(hit.final, packedIndex(hit.blocks), base)
		if err != nil {
			return nil
		}
		return t
	}
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return nil
	}
	defer st.Close()
	t, err := storedTree(ctx, st, hit.final)
	if err != nil {
		return nil
	}
	return t
}

// memo reads the memo entry whose acceptance is c; a hit must still be an
// accepted PASS, signed by a key this scheduler trusts: an entry another
// run accepted under keys it trusted (a worker's, with hg run --trust) is
// not this run's to reuse unless this run trusts them too.
func (e *execution) memo(ctx context.Context, c cid.Cid) (memoHit, bool) {
	st, err := e.s.opts.Store.Open(ctx, true)
	if err != nil {
		return memoHit{}, false
	}
	defer st.Close()
	var acc Acceptance
	if err := st.View(ctx, c, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		return memoHit{}, false
	}
	if acc.Type != TypeAcceptance || acc.Verdict != Accepted || acc.Status != ledger.StatusPass {
		return memoHit{}, false
	}
	r, err := ledger.LoadReceipt(ctx, st, acc.Receipt.Cid)
	if err != nil || !slices.ContainsFunc(e.s.opts.Trusted, func(k ed25519.PublicKey) bool { return bytes.Equal(k, r.Signer) }) {
		return memoHit{}, false
	}
	out, err := receiptOutput(ctx, st, acc.Receipt.Cid, r)
	if err != nil {
		return memoHit{}, false
	}
	hit := memoHit{receipt: acc.Receipt.Cid, accept: c, output: out}
	if r.FinalWorkspace != nil {
		hit.final = r.FinalWorkspace.Cid
	}
	return hit, true
}

// memoStored moves the memo entries of a committed batch from memoRun,
// which holds their output documents, to memoIndex, which names them in
// the store: a run of 100,000 nodes kept every output in memory until it
// ended. The caller holds e.mu.
func (e *execution) memoStored(b *batch) {
	for _, r := range b.results {
		if hit, ok := e.memoRun[r.memoKey]; ok && hit.accept == r.accept {
			delete(e.memoRun, r.memoKey)
			if e.memoIndex == nil {
				e.memoIndex = map[string]cid.Cid{}
			}
			e.memoIndex[r.memoKey] = r.accept
		}
	}
}
