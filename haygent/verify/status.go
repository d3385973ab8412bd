package verify

import (
	"fmt"

	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
)

func (vr *verifier) checkStatus(r *ledger.Receipt, chain []*ledger.ChainNode, complete bool, specs []gate.Spec, pkgOK bool, final *finalVerdicts) {
	var probs problems
	switch r.Status {
	case ledger.StatusPass:
		if r.Halt != nil {
			probs.add("PASS with a halt record (%s: %s)", r.Halt.Verdict, r.Halt.Reason)
		}
		if r.Output == nil {
			probs.add("PASS without an output packet")
		} else if p, ok := vr.decoded[r.Output.Cid].(*ledger.Packet); ok && p.Schema != haygent.OutputSchema {
			probs.add("PASS with output packet %s checked against %q, not %s", r.Output.Cid, p.Schema, haygent.OutputSchema)
		}
		switch {
		case !complete:
			probs.add("PASS cannot be confirmed: the transition chain cannot be read in full")
		case !final.exists:
			probs.add("PASS but the chain holds no gate evaluation")
		default:
			if head := chain[len(chain)-1]; head != final.node {
				probs.add("PASS but transition seq %d (%s) ran after the final gate evaluation (seq %d)", head.T.Seq, head.T.Kind, final.node.T.Seq)
			}
			if !pkgOK {
				probs.add("PASS cannot be confirmed: the package's gates cannot be read")
			}
			if len(specs) == 0 && pkgOK {
				probs.add("PASS but the package defines no gates")
			}
			for _, s := range specs {
				rec, got := final.recorded[s.ID], final.verdicts[s.ID]
				switch {
				case rec == "":
					probs.add("PASS but gate %s has no recorded result in the final evaluation (seq %d)", s.ID, final.node.T.Seq)
				case got == "":
					probs.add("PASS but gate %s (recorded %s) could not be recomputed", s.ID, rec)
				case got != string(gate.Pass) || rec != string(gate.Pass):
					probs.add("PASS but gate %s is recorded %s and recomputed %s", s.ID, orDash(rec), got)
				}
			}
			if len(final.unusable) > 0 {
				probs.add("PASS cannot be confirmed: %s", final.unusable[0])
			}
		}
	case ledger.StatusHalt:
		if r.Halt == nil {
			probs.add("HALT without a halt record")
		}
		if r.Output != nil {
			probs.add("HALT with an output packet %s; only a PASS has one", r.Output.Cid)
		}
		if h := r.Halt; h != nil && h.FailedGate != "" {
			switch got, ok := final.verdicts[h.FailedGate]; {
			case !final.exists:
				probs.add("the halt names failed gate %s, but the chain holds no gate evaluation", h.FailedGate)
			case !ok:
				probs.add("the halt names failed gate %s (%s), which the final evaluation (seq %d) does not recompute", h.FailedGate, h.Verdict, final.node.T.Seq)
			case got != h.Verdict || got == string(gate.Pass):
				probs.add("the halt names failed gate %s with %s, but it is recomputed %s in the final evaluation (seq %d)", h.FailedGate, h.Verdict, got, final.node.T.Seq)
			}
		}
	default:
		probs.add("status %q is neither %s nor %s", r.Status, ledger.StatusPass, ledger.StatusHalt)
	}
	ok := fmt.Sprintf("%s is consistent with the recomputed gates", r.Status)
	if r.Status == ledger.StatusHalt && r.Halt != nil {
		ok = fmt.Sprintf("HALT (%s) is consistent with the recomputed gates", r.Halt.Verdict)
		if !final.exists {
			ok = fmt.Sprintf("HALT (%s) before any gate evaluation", r.Halt.Verdict)
		}
	}
	vr.add(probs.check(CheckStatus, ok))
}

func orDash(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}
