// Package metrics computes how dependably a store's Work Order runs did
// their work, from the ledger alone: the run records and the receipts,
// acceptances and events they link, each receipt verified again with the
// keys the caller trusts.
//
// # What is measured
//
// [Compute] walks every run of the store (every ref runs/RUN) started on
// or after [Options].Since and returns a [Report] with the same
// [Metrics] for the whole store, per Haygent (name@version and package
// CID) and per Work Order class:
//
//   - receipts verified and not: a receipt counts only by what the
//     verifier establishes (scheduler.VerifyRun for a run's current
//     receipts, verify.VerifyReceiptKnown for earlier attempts). One that
//     fails a check is counted as unverified, by the first check it
//     fails, and in nothing else: its PASS is never a PASS;
//   - PASS and HALT among the verified receipts: a PASS only where a run
//     stands behind it (a done node's receipt whose every check holds, in
//     a run whose own checks hold) and no one withdrew it; the others are
//     counted apart (withdrawn, not held). A receipt counts in a run only
//     as its node's work: an earlier attempt or the receipt of
//     a node not done must have run the node's package and name this run
//     and node, or be tied by the record to another run (a memo hit);
//   - runs per class by the status the verifier establishes: done only
//     when every check of the run holds;
//   - false PASS found by hg recheck: accepted PASS receipts a
//     re-measurement regressed (a regressed event of the run), apart from
//     those regressed because their signer is no longer trusted or their
//     replay diverged, which are counted on their own; and its rate, over
//     the receipts a re-measurement measured (the run's recheck log,
//     scheduler.Rechecks, and its regressed events);
//   - replay agreement: of the receipts hg recheck --replay replayed,
//     those whose every replay agreed;
//   - operations the permissions refused (a verified receipt's denied
//     list) and HALTs on a denial;
//   - repair convergence: repairs per verified PASS, PASS at the first
//     try and after repair, HALTs after an exhausted repair budget;
//   - HALT quality: HALTs whose receipt names the failed gate, the last
//     evidence and a restart point (attempts are always recorded);
//   - time to a verified result, per Haygent from the receipt's start
//     (the runner's clock) to its acceptance (the scheduler's), and per
//     class from a done run's start to its last acceptance (both the
//     scheduler's).
//
// What the store holds no record of is not measured, and
// [Report].NotMeasured says why: the rate of false PASS when no run counted
// was re-measured, replay agreement when none was replayed (hg replay
// alone records nothing). Single invocations (hg haygent run) belong to no
// run and are not counted. The unsigned records (run records, their
// events, the recheck log) count only in a run whose own checks hold, and
// only for that run's own receipts.
//
// Every string in a report is taken from the ledger as it is: a reader
// that shows one to a person escapes it (internal/textsafe for a
// terminal, html/template for a page).
package metrics
