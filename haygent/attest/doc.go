// Package attest turns verified, accepted hg receipts into in-toto
// attestations: one in-toto Statement v1 per receipt, whose subjects are
// the files the run produced and the workspace it left, by sha256, and
// whose predicate (type [PredicateType]) is what the verified receipt
// says, in a DSSE envelope signed with an ed25519 key.
//
// # What is attested
//
// Only what a verifier established. [Build] takes a receipt's
// [verify.Verification] and refuses one whose checks did not all pass, or
// whose status is not PASS: hg attests nothing it could not verify. The
// predicate carries the receipt's own record (gates and their verdicts,
// the evidence, the denials, the limitations) and leaves out what no
// check covers, such as the reason text of a gate. The artifacts, which
// the receipt's verification does not check, are checked here: each
// file's content is read through the store (every block re-hashed), its
// sha256 must be the digest the receipt records and the one the last
// mutation evidence of its path observed, and that evidence must name
// the same file.
//
// # Signing
//
// The envelope is signed by the key given to [Sign], a store's runner
// key, which need not be the key that signed the receipt (a worker's): the
// predicate names the receipt's signer, and the envelope's keyid the key
// that signed the envelope. DSSE's encoding and pre-authentication
// encoding are those of github.com/secure-systems-lab/go-securesystemslib.
//
// Files: statement.go (the statement and its subjects), predicate.go (the
// predicate), envelope.go (signing and JSON Lines).
package attest
