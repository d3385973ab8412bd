package haygent

import (
	"fmt"
	"sort"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
)

// finish builds the receipt from the ledger, signs and stores it. PASS is
// set in one place only: when the final gate evaluation exists and every
// gate in it passed.
func (r *runner) finish(halt *ledger.Halt, results []gateOutcome, ws *cas.Link) (*Result, error) {
	if r.prior == nil {
		// A receipt is the head of a chain; with no step recorded there is
		// nothing to sign for.
		reason := "no step ran"
		if halt != nil {
			reason = halt.Reason
		}
		return nil, fmt.Errorf("haygent: the run ended before its first step: %s", reason)
	}
	rc := &ledger.Receipt{
		Type: ledger.TypeReceipt, Run: r.opts.RunID, Objective: r.pkg.Manifest.Objective,
		Haygent: r.pkg.Manifest.Name + "@" + r.pkg.Manifest.Version,
		Package: cas.Link{Cid: r.pkgCID}, Input: cas.Link{Cid: r.inputCID}, Workspace: ws,
		Permissions: cas.Link{Cid: r.permCID}, Used: sortedTrue(r.used), Denied: r.denied,
		Steps: r.steps, SlotCalls: orEmpty(r.slotCalls), Evidence: orEmpty(r.evLinks), Gates: []cas.Link{},
		Repairs: r.attempt, RepairBudget: int64(r.pkg.Manifest.RepairBudget),
		Limitations: orEmptyS(r.limitations), Head: *r.prior, Transitions: r.transitions,
		Replay: r.opts.Replay, StartedAt: ledger.Stamp(r.started), FinishedAt: ledger.Stamp(r.now()),
	}
	final, err := r.finalWorkspace(ws)
	if err != nil {
		return nil, fmt.Errorf("snapshot the final workspace: %w", err)
	}
	rc.FinalWorkspace = final
	if rc.Denied == nil {
		rc.Denied = []ledger.Denied{}
	}
	for _, o := range results {
		rc.Gates = append(rc.Gates, o.link)
	}
	var paths []string
	for p := range r.artifacts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		rc.Artifacts = append(rc.Artifacts, r.artifacts[p])
	}
	if rc.Artifacts == nil {
		rc.Artifacts = []ledger.Artifact{}
	}
	if halt == nil && allPassed(results) {
		// pointerSet keeps the output an object; the check here is so a
		// broken state halts the run rather than panicking it.
		output, isObject := r.state["output"].(map[string]any)
		if err := validate(r.pkg.Output, r.state["output"]); err != nil {
			halt = &ledger.Halt{Verdict: string(gate.Invalid), Reason: "output breaks the output contract: " + err.Error(), Attempts: r.attempt, RestartPoint: r.restartPoint()}
		} else if !isObject {
			halt = &ledger.Halt{Verdict: string(gate.Invalid), Reason: "the output is not a JSON object, which an output packet must be", Attempts: r.attempt, RestartPoint: r.restartPoint()}
		} else {
			out, err := r.packet(output, OutputSchema)
			if err != nil {
				return nil, err
			}
			rc.Output = &out
			rc.Status = ledger.StatusPass
		}
	}
	if rc.Status != ledger.StatusPass {
		if halt == nil {
			halt = &ledger.Halt{Verdict: ledger.HaltUnknown, Reason: "the gates did not all pass", Attempts: r.attempt}
		}
		rc.Status = ledger.StatusHalt
		halt.Preserved = rc.Artifacts
		if halt.LastEvidence == nil {
			halt.LastEvidence = lastN(r.evLinks, 3)
		}
		rc.Halt = halt
	}
	data, err := rc.SignEncoded(r.opts.Key, r.opts.Signatures)
	if err != nil {
		return nil, err
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := r.w.Add(r.ctx, b); err != nil {
		return nil, err
	}
	link := cas.Link{Cid: b.CID()}
	// The receipt is the last block; once the flush returns, the whole
	// ledger is stored.
	if err := r.w.Flush(r.ctx); err != nil {
		return nil, err
	}
	return &Result{Receipt: rc, ReceiptCID: link.Cid}, nil
}

func allPassed(results []gateOutcome) bool {
	if len(results) == 0 {
		return false
	}
	for _, o := range results {
		if o.res.Verdict != gate.Pass {
			return false
		}
	}
	return true
}

func lastN(l []cas.Link, n int) []cas.Link {
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return append([]cas.Link{}, l...)
}

func sortedTrue(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
