// Package verify checks a receipt from its blocks and a list of trusted
// keys alone, as a verifier on another machine does: every block hashes to
// its CID and decodes canonically, the chain is whole and agrees with the
// receipt's index, the signature holds and its signer is trusted, every
// gate is recomputed from the recorded evidence (freshness included),
// approvals hold at their time of use, and the status follows. See
// [VerifyReceipt] for the full list and what is not checked, and
// [ChainVerifier] for a receipt with its upstream receipts.
//
// Files of one concept: verify.go (the API, the table and the order of the
// checks), blocks.go (walking and strictly decoding the closure), chain.go
// (the chain and the receipt's index of it), signature.go (signature, trust,
// approvals), gates.go (the package's gates recomputed over the recorded
// evidence), status.go, chainverifier.go (upstream receipts), outlined.go
// (values stored out of line), cache.go (what verifications share).
package verify
