package web

import (
	"context"
	"runtime"

	"github.com/haygent/hg/scheduler"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// Verdict kinds, as pages show them.
const (
	Verified   = "verified"
	Untrusted  = "signer not trusted"
	BrokenKind = "broken"
)

// Verdict is what hg's verifier says of a receipt now.
type Verdict struct {
	Kind string // Verified, Untrusted or BrokenKind
	// Text is the verdict as shown: "verified", "signer not trusted", or
	// "broken: CHECK: DETAIL" for the first check that failed.
	Text string
	// Status is the receipt's status as a page may show it: PASS only
	// for a verified receipt that no recheck regressed; a receipt that
	// does not verify and says PASS shows "not established", one a
	// recheck regressed "taken back".
	Status string
	// Regressed says where and why a recheck regressed the receipt, in
	// a run of the store ("" if none did).
	Regressed string
}

// OK reports whether the receipt verified.
func (v Verdict) OK() bool { return v.Kind == Verified }

// notEstablished is what stands in for the PASS of a receipt that does
// not verify.
const notEstablished = "not established (the receipt does not verify)"

// takenBack is what stands in for the PASS of a receipt that verifies
// but that a recheck regressed: it no longer holds.
const takenBack = "taken back (a recheck regressed this PASS)"

// takenBackUpstream stands in for the PASS of a receipt built from one a
// recheck took back.
const takenBackUpstream = "taken back (built from a PASS a recheck took back)"

// builtOn is the verdict d of a receipt built from the upstream receipt
// up, whose verdict is ud: a PASS built from a PASS taken back is taken
// back too.
func builtOn(d Verdict, up cid.Cid, ud Verdict) Verdict {
	if d.Status != ledger.StatusPass || (ud.Status != takenBack && ud.Status != takenBackUpstream) {
		return d
	}
	d.Status = takenBackUpstream
	d.Regressed = "built from " + up.String() + ", " + ud.Regressed
	return d
}

// unknownStanding stands in for the PASS of a receipt that verifies while
// a run's record cannot be read: whether a recheck regressed it there is
// not known.
const unknownStanding = "not established (a run's record cannot be read: whether a recheck took this PASS back is not known)"

// verdictOf judges a verification. The signer's trust counts only when
// every other check holds: a receipt with a broken chain is broken,
// whoever signed it.
func verdictOf(v *verify.Verification) Verdict {
	if v == nil || len(v.Checks) == 0 {
		return Verdict{Kind: BrokenKind, Text: "broken: not verified", Status: notEstablished}
	}
	var trust *verify.Check
	for i := range v.Checks {
		c := &v.Checks[i]
		if c.OK {
			continue
		}
		if c.Name == verify.CheckTrust {
			trust = c
			continue
		}
		return Verdict{Kind: BrokenKind, Text: "broken: " + c.Name + ": " + c.Detail, Status: shownStatus(v.Status, false)}
	}
	if trust != nil {
		return Verdict{Kind: Untrusted, Text: Untrusted, Status: shownStatus(v.Status, false)}
	}
	return Verdict{Kind: Verified, Text: Verified, Status: shownStatus(v.Status, true)}
}

// shownStatus is a receipt's status as a page shows it: PASS only when
// it verified.
func shownStatus(status string, verified bool) string {
	switch {
	case status == ledger.StatusPass && verified:
		return ledger.StatusPass
	case status == ledger.StatusHalt:
		return ledger.StatusHalt // a HALT claims no success
	case status == "":
		return "unknown (the receipt cannot be read)"
	}
	return notEstablished
}

// verifier verifies the receipts of one page, each with its upstream
// receipts and each once, with the keys trusted now and the server's
// cache of signatures and compiled gates.
type verifier struct {
	cv       *verify.ChainVerifier
	verdicts *verify.Verdicts
	// standing is what the store's runs say of receipts since: which a
	// recheck regressed.
	standing standing
	st       cas.Store
}

// remembered says, for a page, how many upstream receipts its verifier
// took as verified from the server's earlier verifications instead of
// verifying them again, and since when it holds them (zero: none).
func (p *verifier) remembered() (n int, since string) {
	if n = p.cv.Remembered(); n == 0 {
		return 0, ""
	}
	return n, p.verdicts.Since().UTC().Format("2006-01-02 15:04:05Z")
}

func (s *Server) newVerifier(ctx context.Context, st cas.Store) (*verifier, error) {
	return s.newVerifierKnown(ctx, st, nil)
}

// newVerifierKnown is newVerifier for a page whose receipts link package
// trees it walked already (known, as verify.NewChainVerifier takes it).
func (s *Server) newVerifierKnown(ctx context.Context, st cas.Store, known map[cid.Cid]bool) (*verifier, error) {
	trusted, err := s.cfg.Trusted()
	if err != nil {
		return nil, err
	}
	standing, err := s.regressions.standing(ctx, st)
	if err != nil {
		return nil, err
	}
	cv := verify.NewChainVerifier(st, trusted, known, s.cache)
	cv.Remember(s.verdicts)
	cv.Ahead(runtime.GOMAXPROCS(0))
	cv.Budget(verifyByOf(ctx))
	return &verifier{cv: cv, verdicts: s.verdicts, standing: standing, st: st}, nil
}

// maxPackagesWalked bounds the package trees a page walks ahead.
const maxPackagesWalked = 64

// packagesKnown walks, for this page, the package trees of a run's Work
// Order (each block read back and hashed, as every verification's walk
// does), so that the verification of each receipt need not walk the
// same tree again: as scheduler.VerifyRun does. A tree that does not
// walk whole is left out, and every receipt's own walk names what is
// wrong with it. A Work Order of more than maxPackagesWalked packages
// gets none walked ahead.
func packagesKnown(ctx context.Context, st cas.Store, shape *runShape) (map[cid.Cid]bool, error) {
	if len(shape.packages) > maxPackagesWalked {
		return nil, nil
	}
	known := make(map[cid.Cid]bool, len(shape.packages))
	for _, pkg := range shape.packages {
		err := cas.Walk(ctx, st, []cid.Cid{pkg}, nil, func(cid.Cid, []byte) error { return nil })
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		known[pkg] = err == nil
	}
	return known, nil
}

// verdict verifies receipt and returns its verdict with the checks: a
// PASS that a recheck regressed in a run of the store reads taken back.
func (p *verifier) verdict(ctx context.Context, receipt cid.Cid) (Verdict, *verify.Verification, error) {
	v, err := p.cv.Verify(ctx, receipt)
	if err != nil {
		return Verdict{}, nil, err
	}
	d, err := p.standing.apply(ctx, p.st, receipt, verdictOf(v))
	return d, v, err
}

// nodeVerdict is the verdict of a node's receipt in its run: the
// receipt's own (receipt), unless a check of the node in the run fails
// (its acceptance, its place in the run, its events, its earlier
// attempts, or the run's record, Work Order and events): then the node's
// receipt is not shown as this node's accepted work, whatever it is
// alone. v is the scheduler's verification of the node (VerifyNode) or
// of its run (VerifyRun); nv the node's part of it.
func nodeVerdict(v *scheduler.RunVerification, nv *scheduler.NodeVerification, receipt Verdict) Verdict {
	if c := runProblem(v); c != "" {
		return Verdict{Kind: BrokenKind, Text: "broken: " + c, Status: shownStatus(receiptStatus(receipt), false), Regressed: receipt.Regressed}
	}
	if nv == nil {
		return receipt
	}
	var trust bool
	for _, c := range nv.Checks {
		switch {
		case c.OK:
		case c.Name == verify.CheckTrust:
			trust = true
		default:
			return Verdict{Kind: BrokenKind, Text: "broken: " + c.Name + ": " + c.Detail, Status: shownStatus(receiptStatus(receipt), false), Regressed: receipt.Regressed}
		}
	}
	if trust && receipt.OK() {
		return Verdict{Kind: Untrusted, Text: Untrusted, Status: shownStatus(receiptStatus(receipt), false), Regressed: receipt.Regressed}
	}
	return receipt
}

// runProblem is the first failed check of the run itself that a node's
// verdict depends on (its record, Work Order and events; not its
// outcome, which is about the other nodes), as "CHECK: DETAIL", or "".
func runProblem(v *scheduler.RunVerification) string {
	for _, c := range v.Checks {
		if !c.OK && c.Name != scheduler.CheckOutcome {
			return c.Name + ": " + c.Detail
		}
	}
	return ""
}

// receiptStatus recovers the receipt's own status from its verdict's
// shown status: PASS when shown, HALT when shown, else unknown.
func receiptStatus(v Verdict) string {
	switch v.Status {
	case ledger.StatusPass, notEstablished, takenBack, takenBackUpstream, unknownStanding:
		return ledger.StatusPass
	case ledger.StatusHalt:
		return ledger.StatusHalt
	}
	return ""
}
