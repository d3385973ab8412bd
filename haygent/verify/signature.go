package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// checkApprovals checks every approval the chain records again, with the
// runtime's own rule, at the instant the runtime used it: the signature,
// the approver among the package's, the subject, and the window from
// issue to expiry. What the runtime recorded must agree.
func (vr *verifier) checkApprovals(r *ledger.Receipt, chain []*ledger.ChainNode) error {
	var probs problems
	used := 0
	var approvers []string
	approversRead := false
	for _, n := range chain {
		for i, ev := range n.Evidence {
			if ev == nil || ev.Kind != evidence.KindApproval {
				continue
			}
			used++
			if !approversRead {
				approversRead = true
				var why string
				var err error
				if approvers, why, err = vr.packageApprovers(r.Package.Cid); err != nil {
					return err
				} else if why != "" {
					probs.add("the package's approvers cannot be read: %s", why)
				}
			}
			where := fmt.Sprintf("seq %d (step %s) evidence %s", n.T.Seq, n.T.Step, n.T.Evidence[i].Cid)
			a, observed, valid, ok := ledger.ApprovalFromEvidence(ev.Data)
			at, err := time.Parse(time.RFC3339Nano, ev.ObservedAt)
			if !ok || err != nil {
				probs.add("%s: approval evidence without a valid flag or time of use", where)
				continue
			}
			problem := ledger.CheckApproval(a, observed, at, approvers)
			switch {
			case valid && problem != nil:
				probs.add("%s: recorded as a valid approval, but %v", where, problem)
			case !valid && problem == nil:
				probs.add("%s: recorded as invalid, but the approval checks out", where)
			}
		}
	}
	vr.add(probs.check(CheckApprovals, fmt.Sprintf("%d approval(s) checked again (signature, approver, subject, window at the time of use): the record agrees", used)))
	return nil
}

// packageApprovers reads the approvers of the package's manifest.
func (vr *verifier) packageApprovers(pkg cid.Cid) ([]string, string, error) {
	data, why, err := vr.readPackageFile(pkg, "", haygent.ManifestFile)
	if err != nil || why != "" {
		return nil, why, err
	}
	var m struct {
		Approvers []string `json:"approvers"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, haygent.ManifestFile + ": " + err.Error(), nil
	}
	return m.Approvers, "", nil
}

func (vr *verifier) checkSignature(r *ledger.Receipt, trusted []ed25519.PublicKey) {
	signer := "(none)"
	if len(r.Signer) == ed25519.PublicKeySize {
		signer = ledger.FormatPublicKey(ed25519.PublicKey(r.Signer))
	}
	// The receipt decoded strictly and re-encodes to its block, so the
	// signing bytes are cut from the block rather than encoded again;
	// none are needed when a batch has verified this very block's.
	var err error
	if !vr.cache.sigs.ReceiptSigned(vr.v.Receipt) {
		err = r.VerifyEncodedSignature(vr.receiptData, vr.cache.sigs)
	}
	if err != nil {
		vr.add(fail(CheckSignature, "signature by %s: %v", signer, err))
	} else {
		vr.add(Check{Name: CheckSignature, OK: true, Detail: "signed by " + signer})
	}
	switch {
	case len(trusted) == 0:
		vr.add(fail(CheckTrust, "no trusted keys given (signer %s)", signer))
	case len(r.Signer) != ed25519.PublicKeySize:
		vr.add(fail(CheckTrust, "the receipt names no signer"))
	case slices.ContainsFunc(trusted, func(k ed25519.PublicKey) bool { return bytes.Equal(k, r.Signer) }):
		vr.add(Check{Name: CheckTrust, OK: true, Detail: signer + " is trusted"})
	default:
		vr.add(fail(CheckTrust, "signer %s is not among the %d trusted keys", signer, len(trusted)))
	}
}
