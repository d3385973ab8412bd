package ledger

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/haygent/hg/cas"
)

// Receipt statuses. There are exactly two: PASS, which only the gates can
// produce, and HALT, a truthful failure.
const (
	StatusPass = "PASS"
	StatusHalt = "HALT"
)

// Receipt is the Return of one invocation, built from the ledger alone and
// signed by the runner. Its CID is the result of the invocation.
type Receipt struct {
	Type         string     `cbor:"type"`
	Run          string     `cbor:"run"`
	Objective    string     `cbor:"objective"`
	Haygent      string     `cbor:"haygent"` // name@version
	Package      cas.Link   `cbor:"package"` // the package tree: the code version
	Input        cas.Link   `cbor:"input"`   // the input packet
	Workspace    *cas.Link  `cbor:"workspace,omitempty"`
	Permissions  cas.Link   `cbor:"permissions"`
	Used         []string   `cbor:"used"`   // grants some step exercised
	Denied       []Denied   `cbor:"denied"` // every refused operation
	Steps        []StepRun  `cbor:"steps"`
	SlotCalls    []cas.Link `cbor:"slot_calls"`
	Evidence     []cas.Link `cbor:"evidence"`
	Gates        []cas.Link `cbor:"gates"` // the final verdicts
	Repairs      int64      `cbor:"repairs"`
	RepairBudget int64      `cbor:"repair_budget"`
	Artifacts    []Artifact `cbor:"artifacts"`
	Output       *cas.Link  `cbor:"output,omitempty"` // output packet, on PASS
	Limitations  []string   `cbor:"limitations"`
	Head         cas.Link   `cbor:"head"` // the last transition
	Transitions  int64      `cbor:"transitions"`
	Status       string     `cbor:"status"`
	Halt         *Halt      `cbor:"halt,omitempty"`
	Replay       string     `cbor:"replay"`
	StartedAt    string     `cbor:"started_at"`
	FinishedAt   string     `cbor:"finished_at"`
	Signer       []byte     `cbor:"signer"`
	Signature    []byte     `cbor:"signature,omitempty"`

	// FinalWorkspace is the workspace as the run left it, stored as
	// Workspace (the workspace as the run found it) is: what the read
	// grants let the Haygent see. It is the tree a Work Order hands on
	// along a workspace edge. Receipts made before it was recorded have
	// none.
	FinalWorkspace *cas.Link `cbor:"final_workspace,omitempty"`
}

// StepRun is one executed step in the order it ran.
type StepRun struct {
	Step    string `cbor:"step"`
	Kind    string `cbor:"kind"`
	Attempt int64  `cbor:"attempt"`
	Status  string `cbor:"status"`
}

// Artifact is a file a run produced and applied to the workspace.
type Artifact struct {
	Path   string   `cbor:"path"`
	File   cas.Link `cbor:"file"` // hg/file@1
	Digest string   `cbor:"digest"`
}

// Halt verdicts besides a gate's own (gate.Verdict: FAIL, MISSING, STALE,
// INVALID, CONTRADICTORY, TIMEOUT), which a halt on a gate carries.
const (
	HaltDenied   = "DENIED"   // an operation the permissions refuse
	HaltRejected = "REJECTED" // a slot without an acceptable proposal, whose fallback is to halt
	HaltUnknown  = "UNKNOWN"  // the gates did not all pass, and none is named
)

// Halt is why a run stopped short of PASS, and how to pick it up.
type Halt struct {
	FailedGate   string     `cbor:"failed_gate"`
	Verdict      string     `cbor:"verdict"`
	Reason       string     `cbor:"reason"`
	Attempts     int64      `cbor:"attempts"`
	LastEvidence []cas.Link `cbor:"last_evidence"`
	Preserved    []Artifact `cbor:"preserved"`
	RestartPoint string     `cbor:"restart_point"` // the step a rerun may start from
}

// ErrBadSignature is returned when a receipt's signature does not verify.
var ErrBadSignature = errors.New("receipt signature does not verify")

// signingBytes is what the signature covers: the canonical encoding of the
// receipt without its signature.
func (r *Receipt) signingBytes() ([]byte, error) {
	c := *r
	c.Signature = nil
	return cas.Marshal(&c)
}

// Sign sets Signer and Signature with key, remembering the signature in
// sigs (nil: nowhere).
func (r *Receipt) Sign(key ed25519.PrivateKey, sigs *Signatures) error {
	r.Signer = key.Public().(ed25519.PublicKey)
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	r.Signature = sigs.sign(key, b)
	return nil
}

// signEncoded signs the receipt like Sign and returns its encoding, the
// signature included: the signing bytes with the signature's entry added,
// which is what encoding the signed receipt gives, without encoding it a
// second time.
func (r *Receipt) SignEncoded(key ed25519.PrivateKey, sigs *Signatures) ([]byte, error) {
	r.Signer = key.Public().(ed25519.PublicKey)
	b, err := r.signingBytes()
	if err != nil {
		return nil, err
	}
	r.Signature = sigs.sign(key, b)
	sig, err := cas.Marshal(r.Signature)
	if err != nil {
		return nil, err
	}
	if data, ok := cas.WithEntry(b, "signature", sig); ok {
		return data, nil
	}
	return cas.Marshal(r)
}

// VerifySignature checks the signature against the receipt's own Signer.
// Whether that signer is trusted is the caller's question. sigs, when not
// nil, answers for a signature it made or checked before.
func (r *Receipt) VerifySignature(sigs *Signatures) error {
	b, err := r.signingBytes()
	if err != nil {
		return err
	}
	return r.verifySignatureOver(b, sigs)
}

// verifyEncodedSignature is VerifySignature for a receipt decoded from
// data, its canonical encoding: the signing bytes are data less the
// signature's entry, which is what encoding the receipt without its
// signature gives.
func (r *Receipt) VerifyEncodedSignature(data []byte, sigs *Signatures) error {
	if b, ok := cas.WithoutEntry(data, "signature"); ok && len(r.Signature) > 0 {
		return r.verifySignatureOver(b, sigs)
	}
	return r.VerifySignature(sigs)
}

func (r *Receipt) verifySignatureOver(signing []byte, sigs *Signatures) error {
	if len(r.Signer) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: no signer", ErrBadSignature)
	}
	if !sigs.Verify(ed25519.PublicKey(r.Signer), signing, r.Signature) {
		return ErrBadSignature
	}
	return nil
}
