// Package haygent is a Haygent: a deterministic, contract-bound process
// with narrow slots where a model may propose values, and the record it
// leaves.
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
// Every step leaves a transition, chained to the one before; the
// [Receipt] is built from that ledger alone, signed with the runner's key
// ([LoadKey]) and stored, and its CID is the result. [VerifyReceipt] and
// [ChainVerifier] check a receipt from its blocks and trusted keys alone,
// recomputing every gate; [Replay] runs it again with the recorded slot
// answers and compares; [LoadLedger] and [WriteReport] read it for people.
//
// Files of one concept: run.go (the runtime), isolation.go and gocache.go
// (what exec steps are given), freshness.go (evidence against the
// workspace it vouches for), reportorigin.go (a report only its step
// wrote), receipt.go and objects.go (the ledger's objects), verify.go,
// replay.go, report.go, package.go and steplint.go (the package and its
// lint).
package haygent
