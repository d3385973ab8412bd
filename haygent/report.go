package haygent

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/textsafe"
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
	// Tails are the last lines of the output of every exec step that
	// failed (exited other than 0 or timed out), by its exit evidence:
	// what a report shows under the step.
	Tails map[cid.Cid]*Tail
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
	l.Tails = loadTails(ctx, st, l)
	return l, nil
}

// WriteReport renders the ledger for people. Every line comes from the
// ledger: nothing is said that the stored records do not hold. Every
// string taken from the ledger is printed escaped ([textsafe.Escape]), so
// that no record can clear, rewrite or add a line of the report. The
// status line holds the status and the receipt's limitations; it does not
// say whether the receipt verifies ([WriteVerifiedReport] does).
func WriteReport(w io.Writer, l *Ledger) error { return WriteVerifiedReport(w, l, nil) }

// WriteVerifiedReport is [WriteReport] with the receipt's verification v
// (as [VerifyReceiptChain] makes it, with the reader's trusted keys) on
// the status line: a receipt whose signer is not trusted, or that fails
// any other check, is "NOT VERIFIED" there, with the first failed check,
// whatever status it claims. v nil is no verification.
func WriteVerifiedReport(w io.Writer, l *Ledger, v *Verification) error {
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
func StatusLine(r *Receipt, v *Verification) string {
	s := textsafe.Escape(r.Status)
	if f := v.FirstFailure(); f != nil {
		what := f.Name
		if f.Name == CheckTrust {
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
func LimitationsNote(r *Receipt) string {
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
func summarize(ev *Evidence) string {
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

// StepLog is what an exec step left of its output: the stdout and stderr
// its exit evidence names, with the step, attempt and transition.
type StepLog struct {
	Evidence cid.Cid // the exit evidence
	Seq      int64   // the transition
	Step     string
	Attempt  int64
	Code     int64
	TimedOut bool
	Argv     []string
	Stdout   LogRef
	Stderr   LogRef
}

// Failed reports whether the step exited other than 0 or timed out.
func (s *StepLog) Failed() bool { return s.Code != 0 || s.TimedOut }

// LogRef is one output stream of an exec step as its evidence names it:
// a raw block, or an hg/file@1 for output over one chunk.
type LogRef struct {
	CID cid.Cid
	// Truncated is true when the output went past the capture limit:
	// what is stored is its beginning.
	Truncated bool
	// Err says why the evidence names no readable CID.
	Err error
}

// StepLogs returns the logs of every exec step of the ledger, in the
// order of its transitions. It reads nothing: [ReadLog] reads a log.
func (l *Ledger) StepLogs() []StepLog {
	var out []StepLog
	for _, t := range l.Transitions {
		for _, e := range t.Evidence {
			ev := l.Evidence[e.Cid]
			if ev == nil || ev.Kind != "exit" {
				continue
			}
			d := ev.Data
			s := StepLog{Evidence: e.Cid, Seq: t.Seq, Step: ev.Step, Attempt: ev.Attempt,
				Code: asInt64(d["code"]), TimedOut: d["timed_out"] == true,
				Stdout: logRef(d, "stdout"), Stderr: logRef(d, "stderr")}
			if argv, ok := d["argv"].([]any); ok {
				for _, a := range argv {
					s.Argv = append(s.Argv, fmt.Sprint(a))
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func logRef(d map[string]any, stream string) LogRef {
	r := LogRef{Truncated: d[stream+"_truncated"] == true}
	s, ok := d[stream].(string)
	if !ok {
		r.Err = fmt.Errorf("the evidence names no %s", stream)
		return r
	}
	c, err := cid.Decode(s)
	if err != nil {
		r.Err = fmt.Errorf("the evidence's %s is not a CID: %w", stream, cas.ErrInvalid)
		return r
	}
	r.CID = c
	return r
}

func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case uint64:
		return int64(n)
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// ReadLog writes the output a log names to w: a raw block as it is, an
// hg/file@1 read and verified chunk by chunk. The store may no longer
// hold it: exit evidence names its output by CID string, not by link, so
// gc does not keep it.
func ReadLog(ctx context.Context, st cas.Store, c cid.Cid, w io.Writer) (int64, error) {
	switch c.Type() {
	case cas.Raw:
		var n int
		err := st.View(ctx, c, func(d []byte) error {
			var err error
			n, err = w.Write(d)
			return err
		})
		return int64(n), err
	case cas.DagCBOR:
		return cas.ReadFile(ctx, st, c, w, nil)
	}
	return 0, fmt.Errorf("%s is neither a raw block nor a file: %w", c, cas.ErrInvalid)
}

// tailBytes returns up to limit bytes from the end of the output c names,
// reading only the last chunks of a file.
func tailBytes(ctx context.Context, st cas.Store, c cid.Cid, limit int) ([]byte, error) {
	var chunks []cid.Cid
	switch c.Type() {
	case cas.Raw:
		chunks = []cid.Cid{c}
	case cas.DagCBOR:
		n, err := cas.LoadFileNode(ctx, st, c)
		if err != nil {
			return nil, err
		}
		for n.Height > 0 {
			if n, err = cas.LoadFileNode(ctx, st, n.Links[len(n.Links)-1].Cid); err != nil {
				return nil, err
			}
		}
		for _, l := range n.Links[max(0, len(n.Links)-2):] {
			chunks = append(chunks, l.Cid)
		}
	default:
		return nil, fmt.Errorf("%s is neither a raw block nor a file: %w", c, cas.ErrInvalid)
	}
	var out []byte
	for _, ch := range chunks {
		if err := st.View(ctx, ch, func(d []byte) error { out = append(out, d...); return nil }); err != nil {
			return nil, err
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// Tail is the end of a failed exec step's output, as a report shows it.
type Tail struct {
	Stream string   // stderr, or stdout when stderr is empty
	CID    cid.Cid  // the output it is the end of
	Lines  []string // the last lines, escaped ([LogLines]), each at most tailLineMax bytes before escaping
	Err    error    // the output could not be read
}

// Bounds of a report's tails.
const (
	TailLines   = 10
	tailRead    = 64 << 10
	tailLineMax = 400
)

// loadTails reads the ends of the output of the ledger's failed exec
// steps. A log that cannot be read is a Tail with Err, never an error of
// the ledger: the log is not part of what the receipt vouches for.
func loadTails(ctx context.Context, st cas.Store, l *Ledger) map[cid.Cid]*Tail {
	var tails map[cid.Cid]*Tail
	for _, s := range l.StepLogs() {
		if !s.Failed() {
			continue
		}
		if tails == nil {
			tails = map[cid.Cid]*Tail{}
		}
		t := &Tail{Stream: "stderr", CID: s.Stderr.CID}
		tails[s.Evidence] = t
		data, err := readRef(ctx, st, s.Stderr)
		if err == nil && len(data) == 0 {
			t.Stream, t.CID = "stdout", s.Stdout.CID
			data, err = readRef(ctx, st, s.Stdout)
		}
		if err != nil {
			t.Err = err
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			lines = nil
		}
		// The first line may begin before what was read: drop it unless
		// all of the output was.
		if len(data) == tailRead && len(lines) > 1 {
			lines = lines[1:]
		}
		lines = lines[max(0, len(lines)-TailLines):]
		for _, ln := range lines {
			more := ""
			if len(ln) > tailLineMax {
				cut := tailLineMax
				for cut > 0 && !utf8.RuneStart(ln[cut]) {
					cut--
				}
				more = fmt.Sprintf(" ... (%d more bytes)", len(ln)-cut)
				ln = ln[:cut]
			}
			t.Lines = append(t.Lines, LogLine(ln)+more)
		}
	}
	return tails
}

func readRef(ctx context.Context, st cas.Store, r LogRef) ([]byte, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	return tailBytes(ctx, st, r.CID, tailRead)
}

// writeTail prints a failed step's last lines under its exit evidence,
// each behind a bar, so that no line of the output can pass for one of
// the report's.
func writeTail(w io.Writer, t *Tail) {
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

// LogLine is one line of a step's output made safe to print: every
// character a terminal would act on is escaped ([textsafe.Escape]) but
// the tab, which only moves the cursor on.
func LogLine(s string) string {
	if !strings.Contains(s, "\t") {
		return textsafe.Escape(s)
	}
	parts := strings.Split(s, "\t")
	for i, p := range parts {
		parts[i] = textsafe.Escape(p)
	}
	return strings.Join(parts, "\t")
}
