package haygent

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Ledger is a receipt with everything it links to, read back from the
// store: the material of a report, and of verification.
type Ledger struct {
	ReceiptCID  cid.Cid
	Receipt     *Receipt
	Transitions []*Transition // in order, first to head
	Evidence    map[cid.Cid]*Evidence
	Gates       map[cid.Cid]*GateResult
	SlotCalls   map[cid.Cid]*SlotCall
}

// LoadReceipt reads and strictly decodes a receipt.
func LoadReceipt(ctx context.Context, st cas.Store, c cid.Cid) (*Receipt, error) {
	var r Receipt
	if err := loadTyped(ctx, st, c, &r); err != nil {
		return nil, err
	}
	if r.Type != TypeReceipt {
		return nil, fmt.Errorf("%s is a %q, not a receipt: %w", c, r.Type, cas.ErrInvalid)
	}
	return &r, nil
}

func loadTyped(ctx context.Context, st cas.Store, c cid.Cid, v any) error {
	if c.Type() != cas.DagCBOR {
		return fmt.Errorf("%s is not a DAG-CBOR object: %w", c, cas.ErrInvalid)
	}
	err := st.View(ctx, c, func(data []byte) error { return cas.Unmarshal(data, v) })
	if err != nil {
		return fmt.Errorf("read %s: %w", c, err)
	}
	return nil
}

// LoadLedger reads a receipt and its transition chain, evidence, gate
// results and slot calls.
func LoadLedger(ctx context.Context, st cas.Store, c cid.Cid) (*Ledger, error) {
	r, err := LoadReceipt(ctx, st, c)
	if err != nil {
		return nil, err
	}
	l := &Ledger{ReceiptCID: c, Receipt: r, Evidence: map[cid.Cid]*Evidence{}, Gates: map[cid.Cid]*GateResult{}, SlotCalls: map[cid.Cid]*SlotCall{}}
	next := &r.Head
	for next != nil {
		var t Transition
		if err := loadTyped(ctx, st, next.Cid, &t); err != nil {
			return nil, err
		}
		if t.Type != TypeTransition {
			return nil, fmt.Errorf("%s is not a transition: %w", next.Cid, cas.ErrInvalid)
		}
		l.Transitions = append(l.Transitions, &t)
		if int64(len(l.Transitions)) > r.Transitions {
			return nil, fmt.Errorf("receipt %s: the chain is longer than the %d transitions it claims: %w", c, r.Transitions, cas.ErrInvalid)
		}
		next = t.Prior
		for _, e := range t.Evidence {
			var ev Evidence
			if err := loadTyped(ctx, st, e.Cid, &ev); err != nil {
				return nil, err
			}
			l.Evidence[e.Cid] = &ev
		}
		for _, g := range t.Gates {
			var gr GateResult
			if err := loadTyped(ctx, st, g.Cid, &gr); err != nil {
				return nil, err
			}
			l.Gates[g.Cid] = &gr
		}
		for _, s := range t.SlotCalls {
			var sc SlotCall
			if err := loadTyped(ctx, st, s.Cid, &sc); err != nil {
				return nil, err
			}
			l.SlotCalls[s.Cid] = &sc
		}
	}
	for i, j := 0, len(l.Transitions)-1; i < j; i, j = i+1, j-1 {
		l.Transitions[i], l.Transitions[j] = l.Transitions[j], l.Transitions[i]
	}
	return l, nil
}

// WriteReport renders the ledger for people. Every line comes from the
// ledger: nothing is said that the stored records do not hold.
func WriteReport(w io.Writer, l *Ledger) error {
	r := l.Receipt
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("receipt    %s", l.ReceiptCID)
	p("haygent    %s  (package %s)", r.Haygent, r.Package)
	p("objective  %s", r.Objective)
	p("run        %s  %s .. %s", r.Run, r.StartedAt, r.FinishedAt)
	p("input      %s", r.Input)
	if r.Workspace != nil {
		p("workspace  %s", r.Workspace)
	}
	p("status     %s", r.Status)
	if h := r.Halt; h != nil {
		if h.FailedGate != "" {
			p("  failed gate    %s (%s)", h.FailedGate, h.Verdict)
		} else {
			p("  stopped        %s", h.Verdict)
		}
		p("  reason         %s", h.Reason)
		p("  attempts       %d of %d repairs", h.Attempts, r.RepairBudget)
		p("  restart point  %s", h.RestartPoint)
		for _, e := range h.LastEvidence {
			p("  last evidence  %s", e)
		}
	}
	p("")
	p("permissions (snapshot %s)", r.Permissions)
	for _, u := range r.Used {
		p("  used    %s", u)
	}
	for _, d := range r.Denied {
		p("  DENIED  %s:%s:%s  (%s)", d.Verb, d.Kind, d.Target, d.Rule)
	}
	p("")
	p("steps (%d transitions, %d repairs)", len(l.Transitions), r.Repairs)
	for _, t := range l.Transitions {
		line := fmt.Sprintf("  %3d  %-12s %-8s attempt %d  %s", t.Seq, t.Step, t.Kind, t.Attempt, t.Status)
		if t.Note != "" {
			line += "  — " + t.Note
		}
		p("%s", line)
		for _, e := range t.Evidence {
			if ev := l.Evidence[e.Cid]; ev != nil {
				p("         evidence %-11s %-22s %s", ev.Kind, ev.Subject, summarize(ev))
			}
		}
		for _, s := range t.SlotCalls {
			if sc := l.SlotCalls[s.Cid]; sc != nil {
				model := sc.Model
				if model == "" {
					model = "-"
				}
				line := fmt.Sprintf("         slot %s try %d via %s (model %s): %s", sc.Slot, sc.Try, sc.Adapter, model, sc.Verdict)
				if len(sc.Errors) > 0 {
					line += ": " + strings.Join(sc.Errors, "; ")
				}
				p("%s", line)
			}
		}
		for _, g := range t.Gates {
			if gr := l.Gates[g.Cid]; gr != nil {
				p("         gate %-14s %-13s %s", gr.Gate, gr.Verdict, gr.Reason)
			}
		}
		for _, d := range t.Denied {
			p("         denied %s:%s:%s (%s)", d.Verb, d.Kind, d.Target, d.Rule)
		}
	}
	if len(r.Artifacts) > 0 {
		p("")
		p("artifacts")
		for _, a := range r.Artifacts {
			p("  %s  %s", a.File, a.Path)
		}
	}
	if len(r.Limitations) > 0 {
		p("")
		p("limitations")
		for _, s := range r.Limitations {
			p("  %s", s)
		}
	}
	if r.Replay != "" {
		p("")
		p("replay     %s", r.Replay)
	}
	return nil
}

// summarize is a one-line view of evidence data for the report.
func summarize(ev *Evidence) string {
	d := ev.Data
	switch ev.Kind {
	case "exit":
		s := fmt.Sprintf("code %v", d["code"])
		if d["timed_out"] == true {
			s += " (timed out)"
		}
		return s
	case "test_report":
		return fmt.Sprintf("%v total, %v passed, %v failed, %v skipped", d["total"], d["passed"], d["failed"], d["skipped"])
	case "digest":
		if eq, ok := d["equal"]; ok {
			return fmt.Sprintf("equal=%v", eq)
		}
		return fmt.Sprintf("sha256 %v", d["sha256"])
	case "mutation":
		return fmt.Sprintf("%v -> %v", short(d["before"]), short(d["after"]))
	case "read":
		return fmt.Sprintf("sha256 %v", short(d["sha256"]))
	}
	return ""
}

func short(v any) string {
	s, _ := v.(string)
	if s == "" {
		return "(none)"
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
