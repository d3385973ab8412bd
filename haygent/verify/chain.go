package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// readChain reads the receipt's chain ([ledger.ReadChain]) and checks
// the packets and permission snapshot each transition links, which the
// checks that follow do not read.
func (vr *verifier) readChain(r *ledger.Receipt) ([]*ledger.ChainNode, problems, bool, error) {
	chain, list, complete, err := ledger.ReadChain(r, vr.object, func(n *ledger.ChainNode) error {
		for _, sc := range n.SlotCalls {
			if sc == nil {
				continue
			}
			if err := vr.packet(sc.Projection.Cid, "projection packet"); err != nil {
				return err
			}
			if sc.Proposal != nil {
				if err := vr.packet(sc.Proposal.Cid, "proposal packet"); err != nil {
					return err
				}
			}
		}
		for _, p := range []cas.Link{n.T.Input, n.T.Output} {
			if err := vr.packet(p.Cid, "packet"); err != nil {
				return err
			}
		}
		return vr.node(n.T.Permissions.Cid, "permission snapshot", "hg/permissions@1")
	})
	return chain, problems{list}, complete, err
}

// packet checks the packet c, which the checks that follow do not read.
func (vr *verifier) packet(c cid.Cid, what string) error {
	return vr.checkObject(c, what, ledger.TypePacket, (*ledger.Packet)(nil))
}

// readReceiptLinks decodes the objects the receipt links directly.
func (vr *verifier) readReceiptLinks(r *ledger.Receipt) error {
	// The input and output packets are decoded: the verification
	// returns them.
	var in, out ledger.Packet
	if _, err := vr.object(r.Input.Cid, "input packet", ledger.TypePacket, &in); err != nil {
		return err
	}
	if r.Output != nil {
		if _, err := vr.object(r.Output.Cid, "output packet", ledger.TypePacket, &out); err != nil {
			return err
		}
	}
	if err := vr.node(r.Permissions.Cid, "permission snapshot", "hg/permissions@1"); err != nil {
		return err
	}
	if err := vr.finalTree(r); err != nil {
		return err
	}
	for _, l := range r.Evidence {
		var ev ledger.Evidence
		if _, err := vr.object(l.Cid, "evidence", ledger.TypeEvidence, &ev); err != nil {
			return err
		}
	}
	for _, l := range r.Gates {
		var g ledger.GateResult
		if _, err := vr.object(l.Cid, "gate result", ledger.TypeGate, &g); err != nil {
			return err
		}
	}
	for _, l := range r.SlotCalls {
		var sc ledger.SlotCall
		if _, err := vr.object(l.Cid, "slot call", ledger.TypeSlotCall, &sc); err != nil {
			return err
		}
	}
	return nil
}

// finalTree checks that the root of the receipt's final workspace, which
// a Work Order hands on, decodes strictly as an hg/tree@1. The empty
// tree, the final workspace of every run given none, is known by its
// CID.
func (vr *verifier) finalTree(r *ledger.Receipt) error {
	if r.FinalWorkspace == nil || r.FinalWorkspace.Cid == haygent.EmptyTree() {
		return nil
	}
	c := r.FinalWorkspace.Cid
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("final workspace %s cannot be read: %s", c, why)
		return nil
	}
	_, err := cas.LoadTree(vr.ctx, vr.st, c)
	if err == nil {
		return nil
	}
	if cerr := vr.ctx.Err(); cerr != nil {
		return cerr
	}
	why, ok := blockProblem(err)
	switch {
	case !ok:
		return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
	case errors.Is(err, cas.ErrNotFound) || errors.Is(err, cas.ErrCorrupt):
		vr.markBad(c, why)
		vr.canon.add("final workspace %s cannot be read: %s", c, why)
	default:
		vr.canon.add("final workspace %s is not an hg/tree@1: %v", c, err)
	}
	return nil
}

func (vr *verifier) checkChain(r *ledger.Receipt, chain []*ledger.ChainNode, probs problems, complete bool) {
	for i, n := range chain {
		t := n.T
		if complete {
			switch {
			case i == 0 && t.Seq != 0:
				probs.add("the first transition %s has seq %d, want 0", n.CID, t.Seq)
			case i > 0:
				prev := chain[i-1].T.Seq
				switch {
				case t.Seq == prev:
					probs.add("seq %d is repeated (transition %s)", t.Seq, n.CID)
				case t.Seq < prev:
					probs.add("seq %d (transition %s) follows seq %d: out of order", t.Seq, n.CID, prev)
				case t.Seq > prev+1:
					probs.add("seq %d (transition %s) follows seq %d: a gap", t.Seq, n.CID, prev)
				}
			}
		}
		if t.Run != r.Run {
			probs.add("transition seq %d (%s) belongs to run %q, not %q", t.Seq, n.CID, t.Run, r.Run)
		}
		for j, ev := range n.Evidence {
			l := t.Evidence[j].Cid
			switch {
			case ev == nil:
				probs.add("evidence %s of transition seq %d cannot be read, so its run, step and attempt cannot be checked", l, t.Seq)
			case ev.Run != r.Run:
				probs.add("evidence %s in transition seq %d belongs to run %q, not %q", l, t.Seq, ev.Run, r.Run)
			case ev.Step != t.Step || ev.Attempt != t.Attempt:
				probs.add("evidence %s in transition seq %d was observed by step %q attempt %d, not step %q attempt %d", l, t.Seq, ev.Step, ev.Attempt, t.Step, t.Attempt)
			}
		}
		if t.Kind == "gates" && !ledger.OnlyWorkspace(n.Evidence) {
			probs.add("gates transition seq %d (%s) records evidence other than one observation of the workspace; gates only read it", t.Seq, n.CID)
		}
		if t.Kind != "gates" && len(t.Gates) > 0 {
			probs.add("transition seq %d (%s) of kind %q records gate results; only gates transitions do", t.Seq, n.CID, t.Kind)
		}
	}
	if complete {
		if int64(len(chain)) != r.Transitions {
			probs.add("the chain holds %d transitions, the receipt counts %d", len(chain), r.Transitions)
		}
		if len(chain) > 0 {
			if head := chain[len(chain)-1].T; head.Seq != r.Transitions-1 {
				probs.add("the head transition %s has seq %d, want %d (the receipt counts %d transitions)", r.Head.Cid, head.Seq, r.Transitions-1, r.Transitions)
			}
		}
	}
	vr.add(probs.check(CheckChain, fmt.Sprintf("%d transitions, seq %d down to 0, all of run %q", len(chain), len(chain)-1, r.Run)))
}

// diffList describes the first difference between the receipt's list and
// the chain's, or "" if they are equal.
func diffList[T comparable](what string, receipt, chain []T, format func(T) string) string {
	for i := 0; i < min(len(receipt), len(chain)); i++ {
		if receipt[i] != chain[i] {
			return fmt.Sprintf("%s[%d] is %s, the chain has %s", what, i, format(receipt[i]), format(chain[i]))
		}
	}
	if len(receipt) != len(chain) {
		return fmt.Sprintf("the receipt lists %d %s, the chain records %d", len(receipt), what, len(chain))
	}
	return ""
}

func linkString(l cas.Link) string { return l.String() }

func linkStrings(l []cas.Link) []string {
	out := make([]string, len(l))
	for i, c := range l {
		out[i] = c.String()
	}
	return out
}

// stepString and deniedString describe a step and a denial as the index
// lists them.
func stepString(s ledger.StepRun) string {
	return fmt.Sprintf("%s/%s attempt %d %s", s.Step, s.Kind, s.Attempt, s.Status)
}

func deniedString(d ledger.Denied) string {
	return d.Verb + ":" + d.Kind + ":" + d.Target + " by " + d.Rule
}

func (vr *verifier) checkIndex(r *ledger.Receipt, chain []*ledger.ChainNode, complete bool) {
	if !complete {
		vr.add(fail(CheckIndex, "not checked: the transition chain cannot be read in full"))
		return
	}
	var probs problems
	var steps []ledger.StepRun
	var evidence, slotCalls, gates []cas.Link
	var denied []ledger.Denied
	var otherPkg, otherPerm []string
	for _, n := range chain {
		t := n.T
		steps = append(steps, ledger.StepRun{Step: t.Step, Kind: t.Kind, Attempt: t.Attempt, Status: t.Status})
		evidence = append(evidence, t.Evidence...)
		slotCalls = append(slotCalls, t.SlotCalls...)
		denied = append(denied, t.Denied...)
		if t.Kind == "gates" {
			gates = t.Gates
		}
		if t.Package.Cid != r.Package.Cid {
			otherPkg = append(otherPkg, fmt.Sprintf("seq %d ran package %s", t.Seq, t.Package.Cid))
		}
		if t.Permissions.Cid != r.Permissions.Cid {
			otherPerm = append(otherPerm, fmt.Sprintf("seq %d ran under permissions %s", t.Seq, t.Permissions.Cid))
		}
	}
	if len(otherPkg) > 0 {
		probs.add("the receipt names package %s, but transition %s", r.Package.Cid, summarizeList(otherPkg))
	}
	if len(otherPerm) > 0 {
		probs.add("the receipt names permissions %s, but transition %s", r.Permissions.Cid, summarizeList(otherPerm))
	}
	for _, d := range []string{
		diffList("steps", r.Steps, steps, stepString),
		diffList("evidence", r.Evidence, evidence, linkString),
		diffList("slot calls", r.SlotCalls, slotCalls, linkString),
		diffList("denials", r.Denied, denied, deniedString),
	} {
		if d != "" {
			probs.add("%s", d)
		}
	}
	if len(r.Gates) > 0 {
		if d := diffList("gates", r.Gates, gates, linkString); d != "" {
			probs.add("%s (the last gates transition)", d)
		}
	}
	if len(chain) > 0 {
		if head := chain[len(chain)-1].T; r.Repairs != head.Attempt {
			probs.add("the receipt counts %d repairs, the head transition is attempt %d", r.Repairs, head.Attempt)
		}
	}
	if r.Halt != nil {
		for _, l := range r.Halt.LastEvidence {
			if !slices.Contains(evidence, l) {
				probs.add("halt.last_evidence %s is not evidence of this run's chain", l.Cid)
			}
		}
	}
	if why := finalWorkspaceProblem(r, chain); why != "" {
		probs.add("%s", why)
	}
	vr.add(probs.check(CheckIndex, fmt.Sprintf("steps, %d evidence, %d slot calls, %d denials and the final gates agree with the chain", len(evidence), len(slotCalls), len(denied))))
}

// finalWorkspaceProblem says how the receipt's final workspace disagrees
// with its chain, or "" if it does not. The runtime stores the final
// workspace as it stores every snapshot: when the head of the chain is an
// evaluation of the gates that observed the workspace, nothing has
// changed it since, so it is that observation; when no step applied a
// change (no mutation evidence) and no evaluation observed the
// workspace, it is the workspace the run started from. A receipt without
// one (made before it was recorded) has nothing to check.
func finalWorkspaceProblem(r *ledger.Receipt, chain []*ledger.ChainNode) string {
	if r.FinalWorkspace == nil || len(chain) == 0 {
		return ""
	}
	head := chain[len(chain)-1]
	if head.T.Kind == "gates" {
		for _, ev := range head.Evidence {
			if ev != nil && ev.Kind == ledger.KindWorkspace && ev.Workspace != nil {
				if ev.Workspace.Cid != r.FinalWorkspace.Cid {
					return fmt.Sprintf("the final workspace is %s, but the head transition (seq %d, the last evaluation of the gates) observed %s", r.FinalWorkspace.Cid, head.T.Seq, ev.Workspace.Cid)
				}
				return ""
			}
		}
	}
	for _, n := range chain {
		for _, ev := range n.Evidence {
			if ev == nil || ev.Kind == evidence.KindMutation || ev.Kind == ledger.KindWorkspace {
				return "" // a change was applied, or observed: checked above or not at all
			}
		}
	}
	if r.Workspace == nil || r.Workspace.Cid != r.FinalWorkspace.Cid {
		start := "none"
		if r.Workspace != nil {
			start = r.Workspace.Cid.String()
		}
		return fmt.Sprintf("the final workspace is %s, but no step applied a change to the workspace the run started from (%s)", r.FinalWorkspace.Cid, start)
	}
	return ""
}

// summarizeList joins the first items of list, saying how many more.
func summarizeList(list []string) string {
	if len(list) <= 2 {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s, %s and %d more", list[0], list[1], len(list)-2)
}
