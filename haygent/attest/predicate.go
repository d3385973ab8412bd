package attest

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
)

// PredicateType names the predicate of an hg receipt attestation
// (SPEC.md, "Attestations").
const PredicateType = "https://haygent.dev/hg/receipt/v1"

// Predicate is what an attestation says of its subjects: the verified
// receipt's record, field for field, with the CIDs as strings. Every list
// is present, empty when there is nothing in it, so that a reader can
// tell "none" from "not said".
type Predicate struct {
	Receipt       string         `json:"receipt"`       // the receipt's CID
	ReceiptSigner string         `json:"receiptSigner"` // the key that signed the receipt, ed25519:...
	Run           string         `json:"run"`           // the receipt's own run id
	Haygent       string         `json:"haygent"`       // name@version
	Package       string         `json:"package"`       // the package tree's CID
	Objective     string         `json:"objective"`
	Status        string         `json:"status"` // always PASS
	Input         string         `json:"input"`  // the input packet's CID
	Upstream      []string       `json:"upstream"`
	Output        string         `json:"output"` // the output packet's CID
	Workspace     Workspace      `json:"workspace"`
	Gates         []Gate         `json:"gates"`
	Evidence      Evidence       `json:"evidence"`
	Denied        []Denied       `json:"denied"`
	Limitations   []string       `json:"limitations"`
	Repairs       int64          `json:"repairs"`
	RepairBudget  int64          `json:"repairBudget"`
	StartedAt     string         `json:"startedAt"`
	FinishedAt    string         `json:"finishedAt"`
	WorkOrder     *WorkOrderNode `json:"workOrder,omitempty"`
	Verification  Verification   `json:"verification"`
}

// Workspace names the workspace the run started from and the one it
// left, by CID ("" when the receipt records none).
type Workspace struct {
	Initial string `json:"initial,omitempty"`
	Final   string `json:"final,omitempty"`
}

// Gate is one gate's final verdict as the receipt records it and the
// verifier recomputed it.
type Gate struct {
	ID        string   `json:"id"`
	Predicate string   `json:"predicate"`
	Verdict   string   `json:"verdict"`
	Action    string   `json:"action"`
	Read      []string `json:"read"` // the evidence it read, by CID
	At        string   `json:"at"`
}

// Evidence sums up the receipt's evidence: how many of each kind, and
// each one's CID, kind, subject, step and attempt, in chain order.
type Evidence struct {
	Count  int            `json:"count"`
	ByKind map[string]int `json:"byKind"`
	Items  []EvidenceItem `json:"items"`
}

// EvidenceItem is one piece of evidence.
type EvidenceItem struct {
	CID     string `json:"cid"`
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
	Step    string `json:"step"`
	Attempt int64  `json:"attempt"`
}

// Denied is an operation the permission checker refused.
type Denied struct {
	Verb   string `json:"verb"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Rule   string `json:"rule"`
}

// WorkOrderNode places a receipt in a Work Order run, for a receipt
// attested as a node the scheduler accepted.
type WorkOrderNode struct {
	Run        string `json:"run"`
	Node       string `json:"node"`
	Record     string `json:"record"`     // the run record's CID
	Acceptance string `json:"acceptance"` // the hg/acceptance@1 that accepted it
	Memo       bool   `json:"memo"`       // accepted from the memo: made by an earlier run
}

// Verification says what established the predicate: the checks that
// held, by name, and the keys trusted to sign receipts.
type Verification struct {
	Checks      []string `json:"checks"`
	TrustedKeys []string `json:"trustedKeys"`
}

// predicate builds the predicate of a verified receipt, reading its gate
// results from st; evidence is the receipt's evidence, read in its order,
// and checks the checks that held.
func predicate(ctx context.Context, st cas.Store, v *verify.Verification, evidence []*ledger.Evidence, checks []verify.Check, trusted []ed25519.PublicKey) (*Predicate, error) {
	r := v.Object
	p := &Predicate{
		Receipt:       v.Receipt.String(),
		ReceiptSigner: ledger.FormatPublicKey(ed25519.PublicKey(r.Signer)),
		Run:           r.Run,
		Haygent:       r.Haygent,
		Package:       r.Package.String(),
		Objective:     r.Objective,
		Status:        r.Status,
		Input:         r.Input.String(),
		Upstream:      []string{},
		Gates:         []Gate{},
		Evidence:      Evidence{ByKind: map[string]int{}, Items: []EvidenceItem{}},
		Denied:        []Denied{},
		Limitations:   append([]string{}, r.Limitations...),
		Repairs:       r.Repairs,
		RepairBudget:  r.RepairBudget,
		StartedAt:     r.StartedAt,
		FinishedAt:    r.FinishedAt,
		Verification:  Verification{Checks: []string{}, TrustedKeys: []string{}},
	}
	if r.Output != nil {
		p.Output = r.Output.String()
	}
	if v.Input != nil {
		for _, u := range v.Input.Upstream {
			p.Upstream = append(p.Upstream, u.String())
		}
	}
	if r.Workspace != nil {
		p.Workspace.Initial = r.Workspace.String()
	}
	if r.FinalWorkspace != nil {
		p.Workspace.Final = r.FinalWorkspace.String()
	}
	for _, l := range r.Gates {
		var g ledger.GateResult
		if err := ledger.LoadTyped(ctx, st, l.Cid, &g); err != nil {
			return nil, fmt.Errorf("gate result %s: %w", l.Cid, err)
		}
		if g.Type != ledger.TypeGate {
			return nil, fmt.Errorf("gate result %s is a %q: %w", l.Cid, g.Type, ErrNotVerified)
		}
		read := make([]string, len(g.Read))
		for i, e := range g.Read {
			read[i] = e.String()
		}
		p.Gates = append(p.Gates, Gate{ID: g.Gate, Predicate: g.Predicate, Verdict: g.Verdict, Action: g.Action, Read: read, At: g.At})
	}
	for i, e := range evidence {
		p.Evidence.Items = append(p.Evidence.Items, EvidenceItem{CID: r.Evidence[i].Cid.String(), Kind: e.Kind, Subject: e.Subject, Step: e.Step, Attempt: e.Attempt})
		p.Evidence.ByKind[e.Kind]++
	}
	p.Evidence.Count = len(p.Evidence.Items)
	for _, d := range r.Denied {
		p.Denied = append(p.Denied, Denied(d))
	}
	for _, c := range checks {
		p.Verification.Checks = append(p.Verification.Checks, c.Name)
	}
	for _, k := range trusted {
		p.Verification.TrustedKeys = append(p.Verification.TrustedKeys, ledger.FormatPublicKey(k))
	}
	slices.Sort(p.Verification.TrustedKeys)
	p.Verification.TrustedKeys = slices.Compact(p.Verification.TrustedKeys)
	return p, nil
}
