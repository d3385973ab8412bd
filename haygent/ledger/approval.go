package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/sigcheck"
)

// TypeApproval is the type of a signed approval.
const TypeApproval = "hg/approval@1"

// Approval is a person's signed decision on a subject, good from IssuedAt
// until ExpiresAt. It reaches a Haygent as part of its input (JSON, the
// signature in unpadded base64url); the builtin step "approval" checks it
// and records what it found as approval evidence, which a verifier checks
// again on its own.
type Approval struct {
	Type      string `json:"type"`
	Approver  string `json:"approver"`   // ed25519:..., as FormatPublicKey writes it
	Subject   string `json:"subject"`    // sha256 (hex) of the approved value's JSON
	Decision  string `json:"decision"`   // approve or reject
	IssuedAt  string `json:"issued_at"`  // RFC 3339
	ExpiresAt string `json:"expires_at"` // RFC 3339
	Signature string `json:"signature"`  // over SigningBytes, unpadded base64url
}

// Approval decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// SubjectDigest is the subject of an approval of v: the sha256 of its
// JSON encoding (map keys sorted), in hex. The digest step uses the same.
func SubjectDigest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// SigningBytes is what an approval's signature covers: the canonical
// DAG-CBOR of every field but the signature.
func (a *Approval) SigningBytes() ([]byte, error) {
	return cas.EncodeNode(map[string]any{
		"type": a.Type, "approver": a.Approver, "subject": a.Subject, "decision": a.Decision,
		"issued_at": a.IssuedAt, "expires_at": a.ExpiresAt,
	})
}

// NewApproval returns an approval of subject by key, issued at now and
// good for ttl.
func NewApproval(key ed25519.PrivateKey, subject, decision string, now time.Time, ttl time.Duration) (*Approval, error) {
	if decision != DecisionApprove && decision != DecisionReject {
		return nil, fmt.Errorf("approval decision %q: want approve or reject", decision)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("approval lifetime %s: must be positive", ttl)
	}
	a := &Approval{
		Type: TypeApproval, Approver: FormatPublicKey(key.Public().(ed25519.PublicKey)), Subject: subject, Decision: decision,
		IssuedAt: Stamp(now), ExpiresAt: Stamp(now.Add(ttl)),
	}
	msg, err := a.SigningBytes()
	if err != nil {
		return nil, err
	}
	a.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
	return a, nil
}

// approvalFromValue reads an approval out of the run state.
func ApprovalFromValue(v any) (*Approval, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var a Approval
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("not an approval: %v", err)
	}
	return &a, nil
}

// approvalData is the evidence the approval step records: the approval
// as given, the subject the step saw, and what it found.
func ApprovalData(a *Approval, observed string, problem error) map[string]any {
	reason := ""
	if problem != nil {
		reason = problem.Error()
	}
	return map[string]any{
		"type": a.Type, "approver": a.Approver, "subject": a.Subject, "decision": a.Decision,
		"issued_at": a.IssuedAt, "expires_at": a.ExpiresAt, "signature": a.Signature,
		"observed_subject": observed,
		"valid":            problem == nil,
		"reason":           reason,
	}
}

// errApproval marks the ways an approval fails to count.
var errApproval = errors.New("approval does not count")

// checkApproval says whether a counts as an approval of the subject
// observed, at the instant used, by one of approvers. It is the same code
// for the runtime and for a verifier reading the evidence back.
func CheckApproval(a *Approval, observed string, used time.Time, approvers []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errApproval, fmt.Sprintf(format, args...))
	}
	if a.Type != TypeApproval {
		return bad("type %q, want %s", a.Type, TypeApproval)
	}
	pub, err := ParsePublicKey(a.Approver)
	if err != nil {
		return bad("approver: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(a.Signature)
	if err != nil {
		return bad("signature is not base64url")
	}
	msg, err := a.SigningBytes()
	if err != nil {
		return bad("%v", err)
	}
	if len(sig) != ed25519.SignatureSize || !sigcheck.Verify(pub, msg, sig) {
		return bad("signature by %s does not verify", a.Approver)
	}
	if !slices.Contains(approvers, a.Approver) {
		return bad("%s is not among the package's approvers", a.Approver)
	}
	issued, err1 := time.Parse(time.RFC3339Nano, a.IssuedAt)
	expires, err2 := time.Parse(time.RFC3339Nano, a.ExpiresAt)
	if err1 != nil || err2 != nil {
		return bad("issued_at and expires_at must be RFC 3339 times")
	}
	switch {
	case used.Before(issued):
		return bad("used at %s, before it was issued at %s", Stamp(used), a.IssuedAt)
	case !used.Before(expires):
		return bad("expired at %s, used at %s", a.ExpiresAt, Stamp(used))
	case a.Subject != observed:
		return bad("approves subject %s, but the step saw %s", a.Subject, observed)
	case a.Decision != DecisionApprove:
		return bad("decision is %q", a.Decision)
	}
	return nil
}

// approvalFromEvidence reads the approval back out of approval evidence.
func ApprovalFromEvidence(data map[string]any) (a *Approval, observed string, valid bool, ok bool) {
	str := func(k string) string { s, _ := data[k].(string); return s }
	valid, okValid := data["valid"].(bool)
	a = &Approval{
		Type: str("type"), Approver: str("approver"), Subject: str("subject"), Decision: str("decision"),
		IssuedAt: str("issued_at"), ExpiresAt: str("expires_at"), Signature: str("signature"),
	}
	return a, str("observed_subject"), valid, okValid
}
