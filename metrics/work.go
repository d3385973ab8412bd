package metrics

import (
	"fmt"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// Whose work is a receipt a run's record holds? A done node's receipt
// whose place in the run verifies is the node's (scheduler.VerifyRun).
// The verifier does not place the others, the receipts of nodes not done
// and of earlier attempts: one counts in the run only if what it records
// itself makes it the node's work (its package, its run and node). An
// earlier attempt of another run (a memo hit a regression or a retry
// took back) counts with that run, not this one; a node's receipt of
// another run is a memo hit, or no work of the node. A receipt the
// node's acceptance rejects, the scheduler refused: it counts in no run.

// tie is whose work a receipt is.
type tie int

const (
	nodesWork tie = iota // the node's: counted in the run
	otherRuns            // another run's, of the same package: counted there
	notWork              // no work of the node: the run is named
)

// tieOf says whose work receipt r is (nil: it cannot be read, and its
// checks say so), held by node of run, whose Work Order names package
// pkg. reused is whether the record ties it to another run: a memo hit,
// or a regressed event of the node that names it. why says what is not
// the node's, for notWork.
func tieOf(r *ledger.Receipt, pkg cid.Cid, run, node string, reused bool) (t tie, why string) {
	switch {
	case r == nil:
		return nodesWork, ""
	case r.Package.Cid != pkg:
		return notWork, fmt.Sprintf("it ran package %s, the work order names %s", r.Package.Cid, pkg)
	case r.Run == scheduler.NodeRunID(run, node) || reused:
		return nodesWork, ""
	}
	return otherRuns, ""
}
