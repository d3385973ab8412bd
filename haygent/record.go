package haygent

import (
	"bytes"
	"fmt"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/perm"
)

// put stores a typed object and returns its link.
func (r *runner) put(v any) (cas.Link, error) {
	data, err := cas.Marshal(v)
	if err != nil {
		return cas.Link{}, err
	}
	if len(data) > cas.MaxBlockSize {
		// A packet goes within the limit with values stored apart
		// (largevalue.go); anything else over it is refused.
		if data, err = r.fitBlock(v, data); err != nil {
			return cas.Link{}, err
		}
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := r.w.Add(r.ctx, b); err != nil {
		return cas.Link{}, err
	}
	return cas.Link{Cid: b.CID()}, nil
}

// putRaw stores bytes the runner did not make (a step's output, an
// adapter's response). It stores a copy: an in-memory store keeps the
// blocks it is handed, and whoever made the bytes may use them again.
func (r *runner) putRaw(data []byte) (cas.Link, error) {
	if len(data) > cas.ChunkSize {
		c, _, err := cas.PutFile(r.ctx, r.st, bytes.NewReader(data), nil)
		return cas.Link{Cid: c}, err
	}
	b := cas.NewBlock(cas.Raw, bytes.Clone(data))
	return cas.Link{Cid: b.CID()}, r.w.Add(r.ctx, b)
}

func (r *runner) packet(payload map[string]any, schema string) (cas.Link, error) {
	// The packet is encoded at once and dropped: a payload already in
	// data-model form needs no normalized copy.
	if !cas.IsNormal(payload) {
		payload = cas.FromJSON(payload).(map[string]any)
	}
	return r.put(&ledger.Packet{Type: ledger.TypePacket, Schema: schema, Payload: payload})
}

// stepRecord is what a step hands to the ledger.
type stepRecord struct {
	step      Step
	kind      string
	input     cas.Link // the state the step started from
	started   time.Time
	status    string
	evidence  []cas.Link
	slotCalls []cas.Link
	gates     []cas.Link
	denied    []ledger.Denied
	adapter   string
	note      string
}

// record writes the transition of a step, chained to the one before.
func (r *runner) record(rec stepRecord) error {
	out, err := r.packet(r.state, "")
	if err != nil {
		return err
	}
	t := ledger.Transition{
		Type: ledger.TypeTransition, Run: r.opts.RunID, Seq: r.seq, Step: rec.step.ID, Kind: rec.kind,
		Attempt: r.attempt, Input: rec.input, Output: out, Package: cas.Link{Cid: r.pkgCID},
		Adapter: rec.adapter, Permissions: cas.Link{Cid: r.permCID},
		StartedAt: ledger.Stamp(rec.started), FinishedAt: ledger.Stamp(r.now()), Status: rec.status,
		Evidence: orEmpty(rec.evidence), SlotCalls: orEmpty(rec.slotCalls), Gates: orEmpty(rec.gates),
		Denied: rec.denied, Note: rec.note, Prior: r.prior,
	}
	if t.Denied == nil {
		t.Denied = []ledger.Denied{}
	}
	link, err := r.put(&t)
	if err != nil {
		return err
	}
	r.prior = &link
	r.seq++
	r.transitions++
	r.steps = append(r.steps, ledger.StepRun{Step: rec.step.ID, Kind: rec.kind, Attempt: r.attempt, Status: rec.status})
	r.denied = append(r.denied, rec.denied...)
	r.opts.Log("  %s: %s", rec.step.ID, rec.status)
	return nil
}

// begin starts the record of a step. The state it starts from is stored
// as a packet at once, so no copy of the state is kept meanwhile.
func (r *runner) begin(step Step, kind string) (stepRecord, error) {
	in, err := r.packet(r.state, "")
	return stepRecord{step: step, kind: kind, input: in, started: r.now(), status: ledger.StepOK}, err
}

func orEmpty(l []cas.Link) []cas.Link {
	if l == nil {
		return []cas.Link{}
	}
	return l
}

// observe stores one piece of evidence and keeps it for the gates.
func (r *runner) observe(step, kind, subject string, data map[string]any) (cas.Link, error) {
	return r.observeAt(step, kind, subject, data, r.now())
}

// observeAt records evidence observed at a given instant. The gates judge
// the data exactly as stored: it goes through the canonical encoding
// first, so what the runtime evaluates and what a verifier reads back are
// the same values.
func (r *runner) observeAt(step, kind, subject string, data map[string]any, at time.Time) (cas.Link, error) {
	return r.observeOn(step, kind, subject, data, at, nil)
}

// observeOn records evidence; with on, evidence that vouches for the
// workspace on.workspace, within on.scope (see freshness.go).
func (r *runner) observeOn(step, kind, subject string, data map[string]any, at time.Time, on *ledger.Vouching, outputs ...cas.Link) (cas.Link, error) {
	enc, err := cas.EncodeNode(cas.FromJSON(data))
	if err != nil {
		return cas.Link{}, fmt.Errorf("evidence %s: %w", kind, err)
	}
	stored, err := cas.DecodeNode(enc)
	if err != nil {
		return cas.Link{}, fmt.Errorf("evidence %s: %w", kind, err)
	}
	cov := evidence.CoverageOf(kind)
	ev := ledger.Evidence{
		Type: ledger.TypeEvidence, Run: r.opts.RunID, Step: step, Attempt: r.attempt, Kind: kind, Subject: subject,
		Data: stored.(map[string]any), ObservedAt: ledger.Stamp(at),
		Coverage: ledger.Coverage{Establishes: orEmptyS(cov.Establishes), DoesNotEstablish: orEmptyS(cov.DoesNotEstablish)},
	}
	if len(outputs) > 0 {
		ev.Outputs = outputs
	}
	if on != nil {
		ev.Workspace = &cas.Link{Cid: on.Workspace}
		if kind != ledger.KindWorkspace {
			ev.Scope = &ledger.Scope{Covers: orEmptyS(on.Scope.Covers), Excludes: orEmptyS(on.Scope.Excludes)}
		}
	}
	link, err := r.put(&ev)
	if err != nil {
		return cas.Link{}, err
	}
	if on != nil && kind != ledger.KindWorkspace {
		r.vouchings = append(r.vouchings, ledger.Vouching{Ref: link.String(), Step: step, Workspace: on.Workspace, Scope: *ev.Scope})
	}
	r.evidence = append(r.evidence, gate.Evidence{Ref: link.String(), Kind: kind, Subject: subject, Data: ev.Data, ObservedAt: at})
	r.evLinks = append(r.evLinks, link)
	return link, nil
}

func orEmptyS(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (r *runner) deny(d perm.Denial) ledger.Denied {
	return ledger.Denied{Verb: d.Op.Verb, Kind: d.Op.Kind, Target: d.Op.Target, Rule: d.Rule}
}

// afterDenial decides what a step's denials do to the run.
func (r *runner) afterDenial(s Step, denied []ledger.Denied) *ledger.Halt {
	if len(denied) == 0 || s.OnDenied == "continue" {
		return nil
	}
	d := denied[0]
	return &ledger.Halt{
		Verdict:      ledger.HaltDenied,
		Reason:       fmt.Sprintf("step %s: %s:%s:%s denied by %s", s.ID, d.Verb, d.Kind, d.Target, d.Rule),
		RestartPoint: s.ID,
	}
}
