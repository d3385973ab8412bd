// Package verify checks a receipt from its blocks and a list of trusted
// keys alone, as a verifier on another machine does: every block hashes to
// its CID and decodes canonically, the chain is whole and agrees with the
// receipt's index, the signature holds and its signer is trusted, every
// gate is recomputed from the recorded evidence (freshness included),
// approvals hold at their time of use, and the status follows. See
// [VerifyReceipt] for the full list and what is not checked, and
// [ChainVerifier] for a receipt with its upstream receipts.
package verify
