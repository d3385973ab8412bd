package ledger

import (
	"github.com/haygent/hg/cas"
)

// Type names of the objects the runtime writes.
const (
	TypePacket     = "hg/packet@1"
	TypeEvidence   = "hg/evidence@1"
	TypeTransition = "hg/transition@1"
	TypeGate       = "hg/gate@1"
	TypeSlotCall   = "hg/slotcall@1"
	TypeReceipt    = "hg/receipt@1"
)

// Packet is the only way data moves between steps: an immutable payload,
// validated by a contract where one applies. Payload holds data-model
// values only (see [cas.EncodeNode]).
type Packet struct {
	Type     string         `cbor:"type"`
	Schema   string         `cbor:"schema,omitempty"` // the contract it was validated against, if any
	Payload  map[string]any `cbor:"payload"`
	Upstream []cas.Link     `cbor:"upstream,omitempty"` // accepted receipts the payload was built from
}

// Coverage says what a piece of evidence establishes and what it does not.
type Coverage struct {
	Establishes      []string `cbor:"establishes"`
	DoesNotEstablish []string `cbor:"does_not_establish"`
}

// Evidence is an observation the runtime made itself: an exit status, a
// parsed test report, a digest, a file, an approval. Text a model wrote
// is never evidence.
type Evidence struct {
	Type       string         `cbor:"type"`
	Run        string         `cbor:"run"`
	Step       string         `cbor:"step"`
	Attempt    int64          `cbor:"attempt"`
	Kind       string         `cbor:"kind"`
	Subject    string         `cbor:"subject"`
	Data       map[string]any `cbor:"data"`
	ObservedAt string         `cbor:"observed_at"` // RFC 3339, UTC
	Coverage   Coverage       `cbor:"coverage"`
	// Workspace, on evidence a command gave, is the workspace it ran on,
	// and Scope the files of it the evidence covers (see freshness.go);
	// on "workspace" evidence, the workspace the gates saw.
	Workspace *cas.Link `cbor:"workspace,omitempty"`
	Scope     *Scope    `cbor:"scope,omitempty"`
	// Outputs, on exit evidence, links the command's stdout and stderr
	// (which Data names as CID strings for the gates), so that gc keeps
	// them and bundles carry them with the receipt.
	Outputs []cas.Link `cbor:"outputs,omitempty"`
}

// Denied is an operation the permission checker refused.
type Denied struct {
	Verb   string `cbor:"verb"`
	Kind   string `cbor:"kind"`
	Target string `cbor:"target"`
	Rule   string `cbor:"rule"`
}

// Transition is the record one step leaves. Transitions of a run form a
// chain through Prior; the first has none. Run and Seq bind a transition
// to its place, so one cannot be moved to another run or position.
type Transition struct {
	Type        string     `cbor:"type"`
	Run         string     `cbor:"run"`
	Seq         int64      `cbor:"seq"`
	Step        string     `cbor:"step"`
	Kind        string     `cbor:"kind"` // exec, builtin, slot, gates, repair
	Attempt     int64      `cbor:"attempt"`
	Input       cas.Link   `cbor:"input"`  // packet
	Output      cas.Link   `cbor:"output"` // packet
	Package     cas.Link   `cbor:"package"`
	Adapter     string     `cbor:"adapter,omitempty"`
	Permissions cas.Link   `cbor:"permissions"` // the permission snapshot block
	StartedAt   string     `cbor:"started_at"`
	FinishedAt  string     `cbor:"finished_at"`
	Status      string     `cbor:"status"` // a Step* status
	Evidence    []cas.Link `cbor:"evidence"`
	SlotCalls   []cas.Link `cbor:"slot_calls"`
	Gates       []cas.Link `cbor:"gates"`
	Denied      []Denied   `cbor:"denied"`
	Note        string     `cbor:"note,omitempty"`
	Prior       *cas.Link  `cbor:"prior,omitempty"`
}

// Step statuses: how a transition's step ended ([Transition].Status,
// [StepRun].Status).
const (
	StepOK       = "ok"
	StepFailed   = "failed"
	StepDenied   = "denied"   // an operation the permissions refuse ended it
	StepHalted   = "halted"   // the run halts at it
	StepFallback = "fallback" // a slot without an acceptable proposal kept its values
)

// Slot call verdicts ([SlotCall].Verdict).
const (
	SlotAccepted = "accepted" // a proposal the runtime took
	SlotRejected = "rejected" // a response that is not an acceptable proposal
	SlotError    = "error"    // the adapter gave no response
)

// GateResult is one gate's verdict and the evidence it read.
type GateResult struct {
	Type      string     `cbor:"type"`
	Gate      string     `cbor:"gate"`
	Predicate string     `cbor:"predicate"`
	Verdict   string     `cbor:"verdict"`
	Action    string     `cbor:"action"` // pass, fail, halt
	Reason    string     `cbor:"reason"`
	Read      []cas.Link `cbor:"read"`
	At        string     `cbor:"at"`
}

// SlotCall records one call of an intelligence slot: who was asked, with
// what (a digest of the prompt and projection), what came back (the raw
// response as a block) and what the runtime made of it.
type SlotCall struct {
	Type         string    `cbor:"type"`
	Slot         string    `cbor:"slot"`
	Adapter      string    `cbor:"adapter"`
	Model        string    `cbor:"model"`
	Try          int64     `cbor:"try"`
	PromptDigest string    `cbor:"prompt_digest"`
	Projection   cas.Link  `cbor:"projection"` // packet
	Response     cas.Link  `cbor:"response"`   // raw block
	Verdict      string    `cbor:"verdict"`    // a Slot* verdict
	Errors       []string  `cbor:"errors"`
	Proposal     *cas.Link `cbor:"proposal,omitempty"` // packet, when accepted
}
