// Package ledger is the record a Haygent run leaves: packets, evidence,
// transitions, gate results, slot calls and the signed receipt (objects.go,
// receipt.go), the runner's keys (keys.go), approvals (approval.go), the
// rule that marks evidence stale when the workspace it vouched for changed
// (freshness.go), the signatures a verifier remembers as good (signatures.go),
// and reading a receipt's chain and logs back from a store (load.go,
// logs.go, outlined.go).
//
// The runtime (package haygent) writes these objects; package verify checks
// them; package replay runs them again; package report renders them. This
// package decides nothing about whether a receipt is to be believed.
package ledger
