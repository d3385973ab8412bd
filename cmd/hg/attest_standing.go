package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// What hg attest requires besides verification: that the work it signs
// is what the store's runs stand on now. A recheck can regress a receipt
// (in any run that accepted it, its own or one that took it from the
// memo), a person can withdraw or supersede a node's work; the receipt
// itself never changes and still verifies.

// regressedError refuses work that stands on receipt c, which regressed
// as g says.
func regressedError(what string, c cid.Cid, g scheduler.Regression) error {
	return textsafeError("attest refused: %s receipt %s, which regressed in run %s at %s (node %s): %s: %s",
		what, c, g.Run, g.Event.At, g.Event.Node, g.Event.Check, g.Event.Reason)
}

// recordStanding refuses the run record rec, at c, unless it is its run's
// latest record in st (an older one still says done what the run has
// taken back since; a run st does not have is no run of this store's), and
// no receipt a done node holds regressed in another run (a regression in
// its own fails verification).
func recordStanding(ctx context.Context, st cas.Store, c cid.Cid, rec *scheduler.Record) error {
	switch latest, err := latestOf(ctx, st, rec.Run); {
	case err != nil:
		return err
	case !latest.Defined():
		return textsafeError("attest refused: run %s is not a run of this store (no ref %s/%s): hg attests a run from its latest record here", rec.Run, scheduler.RefNamespace, rec.Run)
	case latest != c:
		return textsafeError("attest refused: record %s is not the latest record of run %s (%s is): 'hg attest %s' attests the run as it stands", c, rec.Run, latest, rec.Run)
	}
	regs, err := scheduler.Regressions(ctx, st)
	if err != nil {
		return err
	}
	for _, n := range rec.Nodes {
		if n.State != dag.Done || n.Receipt == nil {
			continue
		}
		g, ok, err := regs.Of(ctx, st, n.Receipt.Cid)
		if err != nil {
			return err
		}
		if ok {
			return textsafeError("attest refused: node %s of run %s is done with receipt %s, which regressed in run %s at %s: %s: %s: 'hg recheck %s' re-measures the run",
				n.Name, rec.Run, n.Receipt.Cid, g.Run, g.Event.At, g.Event.Check, g.Event.Reason, rec.Run)
		}
	}
	return nil
}

// receiptStanding refuses receipt c, of run (the receipt's own
// "RUN/NODE"), built from the upstream receipts chain (at any depth),
// unless its run stands on it (nodeStanding, in the run's latest record)
// and neither it nor any receipt of chain regressed in a run of st. A
// receipt of no run needs no run; one of a run st does not have passes
// only withoutRun.
func receiptStanding(ctx context.Context, st cas.Store, c cid.Cid, run string, chain []cid.Cid, withoutRun bool) error {
	id, node, ok := strings.Cut(run, "/")
	ofRun := ok && scheduler.CheckRunID(id) == nil
	var latest cid.Cid
	if ofRun {
		var err error
		if latest, err = latestOf(ctx, st, id); err != nil {
			return err
		}
		if !latest.Defined() && !withoutRun {
			return hinted{textsafeError("attest refused: receipt %s is of run %s, which is not a run of this store: whether that run still stands on it is not known here", c, id),
				"to attest it on its own verification all the same, say so: --without-run"}
		}
	}
	if latest.Defined() {
		if err := nodeStanding(ctx, st, c, id, node, latest); err != nil {
			return err
		}
	}
	regs, err := scheduler.Regressions(ctx, st)
	if err != nil {
		return err
	}
	if g, ok, err := regs.Of(ctx, st, c); err != nil {
		return err
	} else if ok {
		return regressedError("the", c, g)
	}
	for _, u := range chain {
		g, ok, err := regs.Of(ctx, st, u)
		if err != nil {
			return err
		}
		if ok && u != c {
			return regressedError(textsafe.Sprintf("receipt %s is built from the", c), u, g)
		}
	}
	return nil
}

// nodeStanding refuses receipt c of node of run unless, in the run's
// latest record (at latest), no event names c as work regressed,
// withdrawn or rewritten, and the node is done with c, accepted.
func nodeStanding(ctx context.Context, st cas.Store, c cid.Cid, id, node string, latest cid.Cid) error {
	rec, err := scheduler.LoadRecordAt(ctx, st, latest)
	if err != nil {
		return fmt.Errorf("run %s: %w", textsafe.Escape(id), err)
	}
	for _, ev := range rec.Events {
		if ev.Receipt == nil || ev.Receipt.Cid != c {
			continue
		}
		switch ev.Kind {
		case scheduler.EventRegressed:
			return regressedError("the", c, scheduler.Regression{Run: id, Event: ev})
		case scheduler.EventDeleted:
			return textsafeError("attest refused: receipt %s of node %s of run %s was withdrawn at %s by %s: %s", c, ev.Node, id, ev.At, ev.Who, ev.Reason)
		case scheduler.EventRewritten:
			return textsafeError("attest refused: receipt %s of node %s of run %s was superseded at %s by %s", c, ev.Node, id, ev.At, ev.ByNode)
		}
	}
	for _, n := range rec.Nodes {
		if n.Name != node {
			continue
		}
		switch {
		case n.Receipt == nil || n.Receipt.Cid != c:
			return textsafeError("attest refused: receipt %s is not the one node %s of run %s holds now (it is %s): an earlier attempt is not attested", c, node, id, n.State)
		case n.State != dag.Done || n.Acceptance == nil:
			return textsafeError("attest refused: node %s of run %s is %s, not accepted: receipt %s is not attested", node, id, n.State, c)
		}
		return nil
	}
	return textsafeError("attest refused: run %s has no node %q, which receipt %s names", id, node, c)
}
