package scheduler

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Invocation is one node's work, complete in itself: the package (its
// tree's blocks), the input and the upstream receipts. An engine runs it
// and returns the blocks of what came back; the scheduler never trusts an
// engine's word and verifies those blocks itself.
type Invocation struct {
	Run, Node     string
	Package       cid.Cid     // the package tree
	PackageBlocks []cas.Block // every block of that tree
	Input         map[string]any
	Upstream      []cid.Cid // accepted receipts the input was built from
	// Workspace is the tree the node works on, written out into a new
	// directory (undefined: a new empty directory), and WorkspaceBlocks
	// every block of it. The receipt's workspace snapshot must be what
	// the package's read grants let it see of that tree.
	Workspace       cid.Cid
	WorkspaceBlocks []cas.Block
	// Signatures is the scheduler's signature cache, for an engine that
	// brings receipts back several at a time: it may check their
	// signatures as one batch into it ([ledger.Signatures.PrecheckReceipts],
	// which remembers a batch that verifies and decides nothing else), so
	// that the scheduler's own check of each finds it done. It never
	// leaves the process.
	Signatures *ledger.Signatures
}

// Outcome is what an engine returns: a receipt and every block of its
// closure that the engine wrote (the package blocks may be left out). The
// scheduler takes the blocks over: the engine must not modify their bytes
// afterwards.
type Outcome struct {
	Receipt cid.Cid
	Blocks  []cas.Block
}

// Engine runs invocations: in this process ([Local]) or on workers
// elsewhere. Invoke returns an error only when the invocation could not be
// carried out at all; a HALT is an Outcome like a PASS.
type Engine interface {
	Invoke(ctx context.Context, inv Invocation) (Outcome, error)
}

// Local runs invocations in this process, each against a private staging
// store.
type Local struct {
	Key ed25519.PrivateKey
	// Signatures, when not nil, remembers the signatures of the receipts
	// this engine's runtime makes (haygent.Options.Signatures): the
	// scheduler's cache, whose acceptance then need not check them again.
	Signatures *ledger.Signatures
	Adapter    haygent.Adapter
	// StoreDir is the directory of the hg store the run belongs to: if a
	// node's workspace holds it, no step sees or changes it
	// (haygent.Options.StoreDir).
	StoreDir string
	// Package returns the loaded package of a node's invocation.
	Package func(inv Invocation) (*haygent.Package, error)
}

// Invoke implements [Engine].
func (l *Local) Invoke(ctx context.Context, inv Invocation) (Outcome, error) {
	var wsIndex map[cid.Cid]cas.Block
	if inv.Workspace.Defined() {
		wsIndex = blockIndex(inv.WorkspaceBlocks)
	}
	return l.invoke(ctx, inv, blockIndex(inv.PackageBlocks), wsIndex)
}

// invoke runs inv with its package's blocks, and its workspace's, indexed
// by CID in pkgIndex and wsIndex.
func (l *Local) invoke(ctx context.Context, inv Invocation, pkgIndex, wsIndex map[cid.Cid]cas.Block) (Outcome, error) {
	pkg, err := l.Package(inv)
	if err != nil {
		return Outcome{}, err
	}
	stg := newStaging(pkgIndex)
	ws := ""
	if inv.Workspace.Defined() {
		dir, remove, err := materialize(ctx, inv.Workspace, wsIndex)
		if err != nil {
			return Outcome{}, fmt.Errorf("workspace: %w", err)
		}
		defer remove()
		ws = dir
	}
	out, err := haygent.Run(ctx, pkg, inv.Input, haygent.Options{
		Store: stg, Key: l.Key, Signatures: l.Signatures, Adapter: l.Adapter, Workspace: ws, StoreDir: l.StoreDir, PackageCID: inv.Package,
		RunID: NodeRunID(inv.Run, inv.Node), Upstream: inv.Upstream,
	})
	if err != nil {
		return Outcome{}, err
	}
	blocks, err := stg.blocks()
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Receipt: out.ReceiptCID, Blocks: blocks}, nil
}

// NodeRunID is the run id of a node's invocation, as its receipt records
// it: the run's id and the node's name.
func NodeRunID(run, node string) string { return run + "/" + node }
