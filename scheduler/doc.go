// Package scheduler runs Work Orders: it turns a validated [dag.WorkOrder]
// into Haygent invocations and advances only on accepted receipts.
//
// # Acceptance
//
// When a node's Haygent returns, the node is concluded, not done: the
// scheduler verifies the receipt with its own code ([verify.VerifyReceipt]:
// every block's hash, canonical form, the transition chain, the signature
// by a trusted runner key, every gate re-evaluated from the stored
// evidence, and the status against the gates), checks that it is the
// node's work (its package, run, input packet and workspace: the same
// check [VerifyRun] makes again from the stored run), and stores an
// hg/acceptance@1 with the checks and the verdict. A node is done only when
// its receipt is accepted and PASS. A HALT fails the node and blocks
// everything downstream of it; independent branches go on.
//
// # Inputs
//
// A node's input is built from its Work Order input, with every
// {"from", "pointer"} reference replaced by the value at that pointer in
// the output packet of the upstream node's accepted receipt. The runtime
// is handed the accepted receipts of the nodes the node needs, which its
// input packet records; a receipt is the node's work only if its input
// packet is the one the scheduler makes of the node's input and those
// receipts, compared by CID.
//
// # Workspaces
//
// A node the Work Order gives a workspace ([dag.Workspace]) works on a
// tree: [Scheduler.Start] stores a workspace directory as a tree and
// resolves a pin, so the stored Work Order names every workspace by its
// tree or its upstream node, and the run, its resumption and its
// verification need the store alone. A node whose workspace is
// {"from": NODE} starts from the final workspace that NODE's accepted
// receipt records ([ledger.Receipt].FinalWorkspace), and from nothing
// else. The engine is handed the tree's blocks ([Invocation].Workspace)
// and writes it out into a new directory; the receipt's workspace
// snapshot must be what the package's read grants let it see of that
// tree ([WorkspaceView]), or the receipt is not the node's work.
//
// # Memo cache
//
// The key of an invocation is the package CID, the CID of the input's
// canonical encoding (not of its packet, which records the upstream
// receipts: work redone upstream with the same outputs hits), the
// permission snapshot, the adapter reference and, for a node given a
// workspace, the CID of the tree it starts from. A key that has an
// accepted receipt is reused without running anything (like Bazel's
// action cache); [Options.NoCache] bypasses it.
//
// # Durability
//
// A run's state is an hg/run@1 record in the store, under the ref
// runs/RUN. Each node runs against a private staging store; once accepted,
// its blocks, its acceptance and the new run record are written in one
// short transaction, so other hg commands can use the store while a run is
// in progress, and a run killed at any moment resumes ([Scheduler.Resume])
// without running an accepted node again: a node that was active when the
// process died simply runs again.
//
// # The circuit breaker
//
// A node's attempts are counted in the run record, over every process,
// resume and retry: one started as often as [Plan.MaxAttempts] allows is
// blocked with its breaker open, never started again, until [ResetBreaker].
//
// # Events and re-measurement
//
// What moves a node outside the scheduler's forward moves is recorded in
// the run as a [RunEvent], with who and why: breakers opened and reset, a
// done node whose receipt no longer holds under today's trust or on replay
// ([Remeasure], [Regress]: failed, with what depends on it blocked), a node
// a person rewrote ([Supersede]) or withdrew ([Withdraw]). No receipt is
// ever changed, and [VerifyRun] checks the nodes against their events.
package scheduler
