package scheduler

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// Finding is a done node whose work no longer holds when it is measured
// again.
type Finding struct {
	Node    string
	Receipt cid.Cid
	// Check is what no longer holds: the name of a verification check,
	// or "replay"; Detail, why.
	Check  string
	Detail string
}

// CheckReplay names a finding of a replay that diverged.
const CheckReplay = "replay"

// Remeasure verifies the run record at c again, against trusted (today's
// trust, which may not be what the run was accepted under), and returns
// the verification, the Work Order, and a finding for each done node
// (only the node named by only, if it is not empty) one of whose checks
// no longer holds: the first of its own checks that fails (else its
// upstream receipts). A node below a finding is not one, whatever its own
// checks: it is blocked below that node's regression, which is the cause
// to fix. A record or Work Order that cannot be read is an
// error wrapping [cas.ErrInvalid]: nothing can be re-measured in it.
func Remeasure(ctx context.Context, st cas.Store, c cid.Cid, trusted []ed25519.PublicKey, only string) (*RunVerification, *dag.WorkOrder, []Finding, error) {
	v, err := VerifyRun(ctx, st, c, trusted, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, rc := range v.Checks {
		if !rc.OK && (rc.Name == CheckRecord || rc.Name == CheckWorkOrder) {
			return v, nil, nil, fmt.Errorf("%s: %s: %w", rc.Name, rc.Detail, cas.ErrInvalid)
		}
	}
	rec, err := LoadRecordAt(ctx, st, c)
	if err != nil {
		return nil, nil, nil, err
	}
	_, wo, err := LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, nil, nil, err
	}
	byName := make(map[string]*NodeVerification, len(v.Nodes))
	for i := range v.Nodes {
		byName[v.Nodes[i].Node] = &v.Nodes[i]
	}
	var found []Finding
	falls := map[string]bool{} // nodes found, and the nodes below them
	for _, wave := range wo.Waves() {
		for _, name := range wave {
			n := byName[name]
			below := false
			for _, up := range wo.Upstream(name) {
				below = below || falls[up]
			}
			if n == nil || n.State != dag.Done {
				continue
			}
			// The first of its own checks that fails, else the first.
			var first, own *verify.Check
			for i := range n.Checks {
				if ch := &n.Checks[i]; !ch.OK {
					if first == nil {
						first = ch
					}
					if own == nil && ch.Name != verify.CheckUpstream {
						own = ch
					}
				}
			}
			if own != nil {
				first = own
			}
			switch {
			case below:
				// Blocked below its upstream's regression, whatever its
				// own checks say: what it rests on no longer stands.
				falls[name] = true
			case first == nil:
			case only == "" || name == only:
				found = append(found, Finding{Node: name, Receipt: n.Receipt, Check: first.Name, Detail: first.Detail})
				falls[name] = true
			}
		}
	}
	return v, wo, found, nil
}

// RegressResult is what [Regress] did.
type RegressResult struct {
	Record    *Record
	Root      cid.Cid  // the record's new root (the old one if nothing moved)
	Regressed []string // nodes moved from done to failed
	Blocked   []string // nodes blocked below them
	// MemoDropped counts the memo entries that named a regressed
	// receipt's acceptance, now removed, so that no later run reuses the
	// work.
	MemoDropped int
}

// ErrRecordMoved is returned by [Regress] when the run's record is not
// the one that was measured.
var ErrRecordMoved = errors.New("the run's record changed since it was measured")

// Regress records, in the run whose record was measured at at, one
// regression event per finding: the done node moves back to failed with
// the check that no longer holds as its reason, what depends on it is
// blocked, and a run recorded done whose outcome no longer holds is
// halted. No receipt or acceptance is changed; the memo entries that
// name a regressed node's acceptance are removed. The run's ref must
// still name at (or be absent: a record imported from a bundle, which
// then gets its ref). The caller makes sure no process executes the run.
func Regress(ctx context.Context, st cas.Store, at cid.Cid, findings []Finding, by Actor, now string) (*RegressResult, error) {
	rec, err := LoadRecordAt(ctx, st, at)
	if err != nil {
		return nil, err
	}
	res := &RegressResult{Record: rec, Root: at}
	if len(findings) == 0 {
		return res, nil
	}
	switch cur, err := st.GetRef(ctx, RefNamespace, rec.Run); {
	case errors.Is(err, cas.ErrNotFound):
	case err != nil:
		return nil, err
	case cur != at:
		return nil, fmt.Errorf("run %s: %w (measured %s, now %s): measure it again", rec.Run, ErrRecordMoved, at, cur)
	}
	_, wo, err := LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, fmt.Errorf("run %s: work order: %w", rec.Run, err)
	}
	var accepts []cid.Cid
	for _, f := range findings {
		n := rec.node(f.Node)
		if n == nil || n.State != dag.Done || n.Receipt == nil || n.Receipt.Cid != f.Receipt {
			return nil, fmt.Errorf("run %s: node %s is not done with receipt %s", rec.Run, f.Node, f.Receipt)
		}
		n.State = dag.Failed
		n.Reason = "regressed: " + f.Check + ": " + f.Detail
		rec.Events = append(rec.Events, RunEvent{Kind: EventRegressed, Node: f.Node, From: dag.Done, To: dag.Failed,
			Receipt: n.Receipt, Check: f.Check, Reason: f.Detail, Attempts: n.Attempts, Who: by.Who, Key: by.Key, At: now})
		res.Regressed = append(res.Regressed, f.Node)
		if n.Acceptance != nil {
			accepts = append(accepts, n.Acceptance.Cid)
		}
	}
	for _, f := range findings {
		n := rec.node(f.Node)
		res.Blocked = append(res.Blocked, blockBelowDone(rec, wo, f.Node, n.Receipt, "upstream "+f.Node+" regressed")...)
	}
	resettle(rec, wo)
	rec.Updated = now
	blocks, root, err := encodeRecord(ctx, rec, nil)
	if err != nil {
		return nil, err
	}
	if err := st.Put(ctx, blocks...); err != nil {
		return nil, err
	}
	// The memo entries go with the record's ref, in one transaction.
	refs := []cas.Ref{{NS: RefNamespace, Name: rec.Run, CID: root}}
	memo, err := st.Refs(ctx, MemoNamespace)
	if err != nil {
		return nil, err
	}
	drop := map[cid.Cid]bool{}
	for _, a := range accepts {
		drop[a] = true
	}
	var dropped []string
	for _, r := range memo {
		if drop[r.CID] {
			dropped = append(dropped, r.Name)
		}
	}
	if err := st.SetRefs(ctx, refs...); err != nil {
		return nil, err
	}
	for _, name := range dropped {
		if err := st.DeleteRef(ctx, MemoNamespace, name); err != nil && !errors.Is(err, cas.ErrNotFound) {
			return nil, err
		}
	}
	res.Root, res.MemoDropped = root, len(dropped)
	return res, nil
}

// acceptedWork returns the receipt of node of run, which must be done:
// accepted by its scheduler, a PASS, and verified now against trusted.
func acceptedWork(ctx context.Context, st cas.Store, run, node string, trusted []ed25519.PublicKey) (cid.Cid, error) {
	rec, _, err := LoadRecord(ctx, st, run)
	if err != nil {
		return cid.Undef, err
	}
	n := rec.node(node)
	switch {
	case n == nil:
		return cid.Undef, fmt.Errorf("run %s has no node %q", run, node)
	case n.State != dag.Done || n.Receipt == nil || n.Acceptance == nil:
		return cid.Undef, fmt.Errorf("node %s of run %s is %s: only a done node's accepted receipt supersedes work", node, run, n.State)
	}
	var acc Acceptance
	if err := st.View(ctx, n.Acceptance.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		return cid.Undef, fmt.Errorf("node %s of run %s: acceptance %s: %w", node, run, n.Acceptance.Cid, err)
	}
	if acc.Type != TypeAcceptance || acc.Verdict != Accepted || acc.Receipt.Cid != n.Receipt.Cid {
		return cid.Undef, fmt.Errorf("node %s of run %s: its receipt %s was not accepted", node, run, n.Receipt.Cid)
	}
	v, err := verify.VerifyReceipt(ctx, st, n.Receipt.Cid, trusted)
	if err != nil {
		return cid.Undef, err
	}
	if f := v.FirstFailure(); f != nil {
		return cid.Undef, fmt.Errorf("node %s of run %s: receipt %s does not verify: %s: %s", node, run, n.Receipt.Cid, f.Name, f.Detail)
	}
	if v.Status != ledger.StatusPass {
		return cid.Undef, fmt.Errorf("node %s of run %s: receipt %s is a %s", node, run, n.Receipt.Cid, v.Status)
	}
	return n.Receipt.Cid, nil
}

// blockBelowDone blocks everything downstream of node that still stands
// or waits: done, pending, ready, and the active and concluded nodes a
// dead process left. Failed, blocked, cancelled, rewritten and deleted
// nodes keep their state. It returns the nodes it blocked, in the Work
// Order's order.
func blockBelowDone(rec *Record, wo *dag.WorkOrder, node string, cause *cas.Link, reason string) []string {
	below := map[string]bool{}
	for _, d := range wo.Downstream(node) {
		below[d] = true
	}
	var blocked []string
	for _, name := range wo.Order {
		if !below[name] {
			continue
		}
		d := rec.node(name)
		switch d.State {
		case dag.Done, dag.Pending, dag.Ready, dag.Active, dag.Concluded:
			d.State, d.BlockedBy, d.Reason = dag.Blocked, cause, reason
			blocked = append(blocked, name)
		}
	}
	return blocked
}

// resettle recomputes the status of a run whose nodes an event moved: a
// run recorded done whose outcome no longer holds is halted, with the
// reason. Any other status stays (a halted run stays halted; a running or
// cancelled one is settled by its resume).
func resettle(rec *Record, wo *dag.WorkOrder) {
	held, reason := outcome(rec.Nodes, wo)
	if rec.Status == StatusDone && !held {
		rec.Status, rec.Reason = StatusHalted, reason
	} else if rec.Status == StatusHalted {
		rec.Reason = reason
	}
}

// Withdraw deletes node from run (hg withdraw): a person withdraws it,
// saying why. The node is deleted, for good: no retry runs it again, and
// what depends on it is blocked. Its receipt stays in the record. The
// caller makes sure no process executes the run.
func Withdraw(ctx context.Context, st cas.Store, run, node string, by Actor, why string, now string) (*Record, []string, error) {
	rec, _, err := LoadRecord(ctx, st, run)
	if err != nil {
		return nil, nil, err
	}
	n := rec.node(node)
	if n == nil {
		return nil, nil, fmt.Errorf("run %s has no node %q", run, node)
	}
	if !dag.CanReopen(n.State, dag.Deleted) {
		return nil, nil, fmt.Errorf("node %s of run %s is %s already: %w", node, run, n.State, ErrNotAllowed)
	}
	_, wo, err := LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: work order: %w", run, err)
	}
	from := n.State
	n.State, n.Breaker = dag.Deleted, false
	n.Reason = fmt.Sprintf("withdrawn by %s: %s", by.Who, why)
	rec.Events = append(rec.Events, RunEvent{Kind: EventDeleted, Node: node, From: from, To: dag.Deleted,
		Receipt: n.Receipt, Reason: why, Attempts: n.Attempts, Who: by.Who, Key: by.Key, At: now})
	blocked := blockBelowDone(rec, wo, node, n.Receipt, "upstream "+node+" was withdrawn")
	resettle(rec, wo)
	rec.Updated = now
	return rec, blocked, saveRecord(ctx, st, rec)
}

// Supersede marks node of run rewritten (hg supersede): a person names a
// later accepted receipt that supersedes its work, the done node byNode
// of run byRun, whose receipt must verify against trusted and be a PASS
// its scheduler accepted. What depends on the node is blocked, and no
// retry runs it again: its work goes on where the later receipt is. The
// caller makes sure no process executes the run.
func Supersede(ctx context.Context, st cas.Store, run, node, byRun, byNode string, trusted []ed25519.PublicKey, by Actor, why string, now string) (*Record, []string, error) {
	if byRun == run && byNode == node {
		return nil, nil, fmt.Errorf("node %s of run %s cannot supersede itself", node, run)
	}
	rec, _, err := LoadRecord(ctx, st, run)
	if err != nil {
		return nil, nil, err
	}
	n := rec.node(node)
	if n == nil {
		return nil, nil, fmt.Errorf("run %s has no node %q", run, node)
	}
	if !dag.CanReopen(n.State, dag.Rewritten) {
		return nil, nil, fmt.Errorf("node %s of run %s is %s: %w", node, run, n.State, ErrNotAllowed)
	}
	later, err := acceptedWork(ctx, st, byRun, byNode, trusted)
	if err != nil {
		return nil, nil, err
	}
	_, wo, err := LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: work order: %w", run, err)
	}
	from := n.State
	n.State, n.Breaker = dag.Rewritten, false
	n.Reason = fmt.Sprintf("rewritten by %s/%s (receipt %s), said %s: %s", byRun, byNode, later, by.Who, why)
	rec.Events = append(rec.Events, RunEvent{Kind: EventRewritten, Node: node, From: from, To: dag.Rewritten,
		Receipt: n.Receipt, By: &cas.Link{Cid: later}, ByNode: byRun + "/" + byNode, Reason: why,
		Attempts: n.Attempts, Who: by.Who, Key: by.Key, At: now})
	blocked := blockBelowDone(rec, wo, node, n.Receipt, "upstream "+node+" was rewritten")
	resettle(rec, wo)
	rec.Updated = now
	return rec, blocked, saveRecord(ctx, st, rec)
}
