// Package haygent is a Haygent: a deterministic, contract-bound process
// with narrow slots where a model may propose values.
//
// A package directory ([Load]) holds the manifest, contracts (JSON
// Schemas), permissions, the spine of steps, and gates; its lint refuses
// what cannot be enforced or cannot fail. [Run] invokes it on an input:
// ordinary code owns the order of steps, the permissions (exec steps run
// confined, see haygent/sandbox), the state, the evidence and the repair
// budget; a slot's answer is accepted only when it is one declared,
// schema-valid, verifier-checked object. PASS comes only from the gates
// (haygent/gate) over evidence the runtime observed; anything else ends in
// a HALT that says why and where to restart.
//
// Every step leaves a transition, chained to the one before; the receipt
// is built from that ledger alone, signed with the runner's key and
// stored, and its CID is the result. The record lives in packages of its
// own, so that the checker does not live inside what it checks:
// haygent/ledger (the objects, receipts, keys, approvals, reading a
// chain back), haygent/verify (checking a receipt from its blocks and
// trusted keys alone), haygent/replay (running it again with the recorded
// slot answers) and haygent/report (rendering a ledger for people).
//
// Files of one concept: run.go (Options, Run, the walk of the spine and
// its repair loop), record.go (what a run writes to its ledger: packets,
// transitions, evidence), exec.go (exec steps: the scratch copy, the
// sandbox, the evidence of the exit, the test report and the changes),
// builtin.go (the builtin steps: one table of ops, which the lint and the
// runtime both read), slots.go (asking the adapter, verifying proposals),
// gates.go (evaluating the gates), finish.go (the receipt: built, signed,
// stored; the halt), snapshot.go (the workspace as the run stores it),
// isolation.go and gocache.go (what exec steps are given),
// reportorigin.go (a report only its step wrote), largevalue.go (packets
// over the block limit), package.go and steplint.go (the package and its
// lint).
package haygent
