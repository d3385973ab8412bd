package attest

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// StatementType is the in-toto Statement version hg writes.
const StatementType = "https://in-toto.io/Statement/v1"

// WorkspaceSubject is the subject name of the workspace a run left: "."
// names the workspace's root, and no artifact path can be ".".
const WorkspaceSubject = "."

// Errors of [Build]. Each is wrapped with the receipt and the reason.
var (
	// ErrNotVerified: the verification has a failed check, or none.
	ErrNotVerified = errors.New("the receipt does not verify")
	// ErrNotPass: the receipt verifies but is a HALT.
	ErrNotPass = errors.New("the receipt is not a PASS")
	// ErrArtifact: an artifact's content, its recorded digest and the
	// mutation evidence of its path disagree.
	ErrArtifact = errors.New("an artifact does not match what the run observed")
	// ErrNoSubject: the receipt records neither artifacts nor a final
	// workspace (a receipt made before final workspaces were recorded).
	ErrNoSubject = errors.New("the receipt names nothing to attest")
)

// Statement is an in-toto Statement v1 as hg writes it. It is encoded
// with encoding/json, whose output for it is deterministic: struct fields
// in order, map keys sorted.
type Statement struct {
	Type          string     `json:"_type"`
	Subject       []Subject  `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     *Predicate `json:"predicate"`
}

// Subject is an in-toto ResourceDescriptor naming one thing attested:
// a file by its path in the workspace and the sha256 of its content, or
// the workspace by "." and the sha256 of its root block. Annotations hold
// its hg CID.
type Subject struct {
	Name        string            `json:"name"`
	Digest      map[string]string `json:"digest"`
	Annotations map[string]string `json:"annotations"`
}

// Target is one receipt to attest.
type Target struct {
	// Verification is the receipt's, by [verify.VerifyReceipt] or a
	// run's verification; every check must have held.
	Verification *verify.Verification
	// Trusted are the keys the verification trusted.
	Trusted []ed25519.PublicKey
	// Checks, if not nil, are all the checks that held for it, when
	// there were more than the receipt's own (a run's: acceptance,
	// place in the run); each must have held.
	Checks []verify.Check
	// Node places the receipt in a Work Order run whose verification
	// held and whose scheduler accepted it (nil: a receipt alone).
	Node *WorkOrderNode
}

// Build makes the statement of t's receipt, reading what it needs from
// st. It refuses (errors wrapping [ErrNotVerified], [ErrNotPass],
// [ErrArtifact], [ErrNoSubject]) a receipt that did not verify, is not a
// PASS, or whose artifacts disagree with the run's evidence; any other
// error is the store's.
func Build(ctx context.Context, st cas.Store, t Target) (*Statement, error) {
	v := t.Verification
	if v == nil {
		return nil, ErrNotVerified
	}
	if f := v.FirstFailure(); f != nil || !v.OK() || v.Object == nil {
		why := "no checks"
		if f != nil {
			why = f.Name + ": " + f.Detail
		}
		return nil, fmt.Errorf("receipt %s: %w: %s", v.Receipt, ErrNotVerified, why)
	}
	for _, c := range t.Checks {
		if !c.OK {
			return nil, fmt.Errorf("receipt %s: %w: %s: %s", v.Receipt, ErrNotVerified, c.Name, c.Detail)
		}
	}
	r := v.Object
	if r.Status != ledger.StatusPass {
		return nil, fmt.Errorf("receipt %s: %w: it is a %s", v.Receipt, ErrNotPass, r.Status)
	}
	evs := make([]*ledger.Evidence, len(r.Evidence))
	for i, l := range r.Evidence {
		var e ledger.Evidence
		if err := ledger.LoadTyped(ctx, st, l.Cid, &e); err != nil {
			return nil, fmt.Errorf("receipt %s: evidence %s: %w", v.Receipt, l.Cid, err)
		}
		if e.Type != ledger.TypeEvidence {
			return nil, fmt.Errorf("receipt %s: evidence %s is a %q: %w", v.Receipt, l.Cid, e.Type, ErrNotVerified)
		}
		evs[i] = &e
	}
	subjects, err := subjectsOf(ctx, st, v.Receipt, r, evs)
	if err != nil {
		return nil, err
	}
	checks := v.Checks
	if t.Checks != nil {
		checks = t.Checks
	}
	p, err := predicate(ctx, st, v, evs, checks, t.Trusted)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: %w", v.Receipt, err)
	}
	p.WorkOrder = t.Node
	return &Statement{Type: StatementType, Subject: subjects, PredicateType: PredicateType, Predicate: p}, nil
}

// subjectsOf returns the subjects of receipt r: every artifact, checked
// against the evidence, and the final workspace, sorted by name.
func subjectsOf(ctx context.Context, st cas.Store, rc cid.Cid, r *ledger.Receipt, evs []*ledger.Evidence) ([]Subject, error) {
	var out []Subject
	seen := map[string]bool{}
	for _, a := range r.Artifacts {
		if err := checkPath(a.Path); err != nil || seen[a.Path] {
			if err == nil {
				err = errors.New("named twice")
			}
			return nil, fmt.Errorf("receipt %s: artifact %q: %v: %w", rc, a.Path, err, ErrArtifact)
		}
		seen[a.Path] = true
		sum, err := fileSHA256(ctx, st, a.File.Cid)
		if err != nil {
			return nil, fmt.Errorf("receipt %s: artifact %q: %w", rc, a.Path, err)
		}
		if why := artifactProblem(a, sum, evs); why != "" {
			return nil, fmt.Errorf("receipt %s: artifact %q: %s: %w", rc, a.Path, why, ErrArtifact)
		}
		out = append(out, Subject{Name: a.Path, Digest: map[string]string{"sha256": sum},
			Annotations: map[string]string{"hg.cid": a.File.Cid.String(), "hg.kind": "file"}})
	}
	if f := r.FinalWorkspace; f != nil {
		data, err := st.Get(ctx, f.Cid)
		if err != nil {
			return nil, fmt.Errorf("receipt %s: final workspace %s: %w", rc, f.Cid, err)
		}
		sum := sha256.Sum256(data)
		out = append(out, Subject{Name: WorkspaceSubject, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])},
			Annotations: map[string]string{"hg.cid": f.Cid.String(), "hg.kind": "tree"}})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("receipt %s: %w", rc, ErrNoSubject)
	}
	slices.SortFunc(out, func(a, b Subject) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// checkPath accepts a clean relative slash path, each element one a tree
// may hold.
func checkPath(p string) error {
	for _, e := range strings.Split(p, "/") {
		if err := cas.CheckName(e); err != nil {
			return err
		}
	}
	return nil
}

// fileSHA256 reads the hg/file@1 c through st (every block verified) and
// returns the sha256 of its content, in lower-case hex.
func fileSHA256(ctx context.Context, st cas.Store, c cid.Cid) (string, error) {
	h := sha256.New()
	if _, err := cas.ReadFile(ctx, st, c, h, nil); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// artifactProblem says what is wrong with artifact a, whose content has
// the sha256 sum, or "": its recorded digest must be sum, and the last
// mutation evidence of its path must have observed sum and stored the
// same file.
func artifactProblem(a ledger.Artifact, sum string, evs []*ledger.Evidence) string {
	if a.Digest != sum {
		return fmt.Sprintf("its content has sha256 %s, the receipt records %s", sum, a.Digest)
	}
	var last *ledger.Evidence
	for _, e := range evs {
		if e.Kind == evidence.KindMutation && e.Subject == "file:"+a.Path {
			last = e
		}
	}
	if last == nil {
		return "no mutation evidence of the run wrote it"
	}
	after, _ := last.Data["after"].(string)
	file, _ := last.Data["file"].(string)
	switch {
	case after != sum:
		return fmt.Sprintf("the last mutation of it observed sha256 %q, its content has %s", after, sum)
	case file != a.File.Cid.String():
		return fmt.Sprintf("the last mutation of it stored file %q, the receipt names %s", file, a.File.Cid)
	}
	return ""
}
