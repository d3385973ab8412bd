package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/internal/textsafe"
)

// WriteReport renders the ledger for people. Every line comes from the
// ledger: nothing is said that the stored records do not hold. Every
// string taken from the ledger is printed escaped ([textsafe.Escape]), so
// that no record can clear, rewrite or add a line of the report. The
// status line holds the status and the receipt's limitations; it does not
// say whether the receipt verifies ([WriteVerifiedReport] does).
func WriteReport(w io.Writer, l *ledger.Ledger) error { return WriteVerifiedReport(w, l, nil) }

// WriteVerifiedReport is [WriteReport] with the receipt's verification v
// (as [verify.VerifyReceiptChain] makes it, with the reader's trusted keys) on
// the status line: a receipt whose signer is not trusted, or that fails
// any other check, is "NOT VERIFIED" there, with the first failed check,
// whatever status it claims. v nil is no verification.
func WriteVerifiedReport(w io.Writer, l *ledger.Ledger, v *verify.Verification) error {
	r := l.Receipt
	p := func(format string, args ...any) { textsafe.Fprintf(w, format+"\n", args...) }
	p("receipt    %s", l.ReceiptCID)
	p("haygent    %s  (package %s)", r.Haygent, r.Package)
	p("objective  %s", r.Objective)
	p("run        %s  %s .. %s", r.Run, r.StartedAt, r.FinishedAt)
	p("input      %s", r.Input)
	if r.Workspace != nil {
		p("workspace  %s", r.Workspace)
	}
	p("status     %s", StatusLine(r, v))
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
		line := textsafe.Sprintf("  %3d  %-12s %-8s attempt %d  %s", t.Seq, t.Step, t.Kind, t.Attempt, t.Status)
		if t.Note != "" {
			line += "  — " + textsafe.Escape(t.Note)
		}
		p("%s", line)
		for _, e := range t.Evidence {
			if ev := l.Evidence[e.Cid]; ev != nil {
				p("         evidence %-11s %-22s %s", ev.Kind, ev.Subject, summarize(ev))
				writeTail(w, l.Tails[e.Cid])
			}
		}
		for _, s := range t.SlotCalls {
			if sc := l.SlotCalls[s.Cid]; sc != nil {
				model := sc.Model
				if model == "" {
					model = "-"
				}
				line := textsafe.Sprintf("         slot %s try %d via %s (model %s): %s", sc.Slot, sc.Try, sc.Adapter, model, sc.Verdict)
				if len(sc.Errors) > 0 {
					line += ": " + joinEscaped(sc.Errors, "; ")
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

// StatusLine is a receipt's status as a report or hg verify prints it,
// escaped, with what a reader must not miss beside it: that v, the
// receipt's verification (nil: none was made), failed, naming its first
// failed check ("NOT VERIFIED: signer not trusted: ..."), and the
// receipt's limitations ("(2 limitations: ...)"), protections the run
// went without.
func StatusLine(r *ledger.Receipt, v *verify.Verification) string {
	s := textsafe.Escape(r.Status)
	if f := v.FirstFailure(); f != nil {
		what := f.Name
		if f.Name == verify.CheckTrust {
			what = "signer not trusted"
		}
		s += "  NOT VERIFIED: " + what + ": " + textsafe.Escape(f.Detail)
	}
	if note := LimitationsNote(r); note != "" {
		s += "  " + note
	}
	return s
}

// LimitationsNote is "(N limitations: ...)", every limitation of the
// receipt escaped, or "" for a receipt without any.
func LimitationsNote(r *ledger.Receipt) string {
	n := len(r.Limitations)
	if n == 0 {
		return ""
	}
	unit := "limitations"
	if n == 1 {
		unit = "limitation"
	}
	return fmt.Sprintf("(%d %s: %s)", n, unit, joinEscaped(r.Limitations, "; "))
}

// joinEscaped joins the escaped strings of list with sep.
func joinEscaped(list []string, sep string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = textsafe.Escape(s)
	}
	return strings.Join(out, sep)
}

// summarize is a one-line view of evidence data for the report.
func summarize(ev *ledger.Evidence) string {
	d := ev.Data
	switch ev.Kind {
	case "exit":
		s := fmt.Sprintf("code %v", d["code"])
		if d["timed_out"] == true {
			s += " (timed out)"
		}
		return s + isolationNote(d["isolation"])
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

// isolationNote says what confined an exec step, from its exit
// evidence's isolation list: "  confined: userns pidns ...", or
// "  NOT CONFINED" when Landlock was not among it.
func isolationNote(v any) string {
	list, ok := v.([]any)
	if !ok {
		return ""
	}
	var parts []string
	confined := false
	for _, x := range list {
		s, _ := x.(string)
		switch {
		case s == "scrubbed-env" || s == "new-session" || s == "timeout":
			continue
		case strings.HasPrefix(s, "landlock-fs"):
			confined = true
		}
		parts = append(parts, s)
	}
	if !confined {
		return "  NOT CONFINED " + strings.Join(parts, " ")
	}
	return "  confined: " + strings.Join(parts, " ")
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

// writeTail prints a failed step's last lines under its exit evidence,
// each behind a bar, so that no line of the output can pass for one of
// the report's.
func writeTail(w io.Writer, t *ledger.Tail) {
	if t == nil {
		return
	}
	if t.Err != nil {
		textsafe.Fprintf(w, "           %s %s: cannot be read: %v\n", t.Stream, t.CID, t.Err)
		return
	}
	if len(t.Lines) == 0 {
		textsafe.Fprintf(w, "           stdout and stderr are empty\n")
		return
	}
	textsafe.Fprintf(w, "           %s, last %d lines:\n", t.Stream, len(t.Lines))
	for _, ln := range t.Lines {
		fmt.Fprintf(w, "           | %s\n", ln) // escaped already
	}
}
