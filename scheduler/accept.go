package scheduler

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// accept judges what an engine returned for a node's work w, whose input
// is input: the node is done only once its receipt is accepted, by this
// code, from the blocks alone; nothing the engine said is taken on trust.
// res is the node's result so far, pb its package, readers the number of
// nodes that work on its final workspace.
func (e *execution) accept(ctx context.Context, res result, out Outcome, pb pkgBlocks, w *work, input map[string]any, readers int) result {
	fail := func(state, format string, args ...any) result { return res.fail(ctx, state, format, args...) }
	// The engine's blocks are handed over, not copied: nothing else
	// holds them.
	stg := newStaging(pb.index)
	if err := stg.Adopt(out.Blocks...); err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.receipt = out.Receipt
	// The work is done: it is judged whatever happens to the run
	// meanwhile, so that a cancel arriving now does not leave a receipt
	// without a verdict.
	vctx := context.WithoutCancel(ctx)
	// The package tree was stored and hashed by this scheduler; every
	// other block of the receipt's closure is walked and re-hashed.
	v, err := verify.VerifyReceiptKnown(vctx, stg, out.Receipt, e.s.opts.Trusted, map[cid.Cid]bool{pb.root: true}, e.s.cache)
	if err != nil {
		return fail(dag.Failed, "verify: %v", err)
	}
	acc := Acceptance{Type: TypeAcceptance, Receipt: cas.Link{Cid: out.Receipt}, Status: v.Status,
		Verifier: VerifierName, At: e.s.stamp(), Verdict: Accepted}
	for _, c := range v.Checks {
		acc.Checks = append(acc.Checks, CheckRec{Name: c.Name, OK: c.OK, Detail: c.Detail})
	}
	if w.input, err = inputPacket(vctx, input, w.upstream); err != nil {
		w.why = fmt.Sprintf("the node's input packet cannot be made: %v", err)
	}
	acc.Checks = append(acc.Checks, sameWorkCheck(v, w))
	if !v.OK() || !acc.Checks[len(acc.Checks)-1].OK {
		acc.Verdict = Rejected
	}
	data, err := cas.Marshal(&acc)
	if err != nil {
		return fail(dag.Failed, "%v", err)
	}
	ab := cas.NewBlock(cas.DagCBOR, data)
	if err := stg.Put(vctx, ab); err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.accept = ab.CID()
	blocks, err := stg.blocks()
	if err != nil {
		return fail(dag.Failed, "%v", err)
	}
	res.blocks = cas.Pack(blocks...)
	switch {
	case acc.Verdict != Accepted:
		for _, c := range acc.Checks {
			if !c.OK {
				return fail(dag.Failed, "receipt rejected: %s: %s", c.Name, c.Detail)
			}
		}
		return fail(dag.Failed, "receipt rejected")
	case v.Status != ledger.StatusPass:
		r, err := ledger.LoadReceipt(vctx, stg, out.Receipt)
		if err != nil || r.Halt == nil {
			return fail(dag.Failed, "HALT")
		}
		return fail(dag.Failed, "HALT: %s %s: %s", r.Halt.FailedGate, r.Halt.Verdict, r.Halt.Reason)
	}
	if v.Output == nil {
		return fail(dag.Failed, "output: receipt %s has no output", out.Receipt)
	}
	res.output = v.Output.Payload
	if f := v.Object.FinalWorkspace; f != nil {
		res.final = f.Cid
		if readers > 0 {
			// Verified with the rest of the work: its blocks are there.
			if res.tree, err = treeFrom(f.Cid, packedIndex(res.blocks), pb.index); err != nil {
				return fail(dag.Failed, "final workspace: %v", err)
			}
		}
	}
	res.state = dag.Done
	return res
}

// sameWorkCheck is the acceptance's check that a verified receipt is the
// node's work w: its workspace snapshot is what the package's read grants
// let it see of the tree it was given.
func sameWorkCheck(v *verify.Verification, w *work) CheckRec {
	c := CheckRec{Name: "same work"}
	if c.Detail = sameWork(v, w, &acceptWords); c.Detail != "" {
		return c
	}
	c.OK, c.Detail = true, "package "+w.pkg.String()+" on the node's input"
	if w.workspace != emptyWorkspace {
		c.Detail += " and workspace " + w.workspace.String()
	}
	return c
}
