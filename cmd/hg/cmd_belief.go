package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
)

// needInputError is a clarification left unanswered: exit 5.
type needInputError struct{ msg string }

func (e needInputError) Error() string { return e.msg }

// clarify binds the decision slots of plan's Work Order before anything
// runs: from the belief log of its class, then --answers FILE, then the
// terminal; a critical slot still open makes hg print the questions and
// exit 5, with nothing run and nothing written.
func clarify(ctx context.Context, g *globals, plan *scheduler.Plan, answersFile string, asJSON bool) error {
	if answersFile == "" {
		return clarifyWith(ctx, g, plan, nil, "", "", asJSON)
	}
	answers, err := readAnswers(answersFile)
	if err != nil {
		return err
	}
	return clarifyWith(ctx, g, plan, answers, answersFile, belief.SourceFile, asJSON)
}

// clarifyWith is clarify with the answers given (nil: none), named from
// in its errors and recorded as coming from source (belief.SourceFile,
// belief.SourceClient); hg mcp's submit passes an MCP client's.
func clarifyWith(ctx context.Context, g *globals, plan *scheduler.Plan, answers map[string]any, from, source string, asJSON bool) error {
	wo := plan.WorkOrder
	if len(wo.Decisions) == 0 && len(answers) == 0 {
		return nil
	}
	st, err := g.openStore(true, commandLine(g.args))
	if err != nil {
		return err
	}
	log, err := belief.Log(ctx, st, wo.Class)
	st.Close()
	if err != nil {
		return err
	}
	all, open := belief.Clarify(wo, belief.Reduce(log))
	if answers != nil {
		// Every answer is used or refused: see belief.AnswerFrom.
		open, err = belief.AnswerFrom(wo.Class, all, answers, source)
		var ae *belief.AnswersError
		switch {
		case errors.As(err, &ae):
			return usageError{fmt.Errorf("%s: %w", from, err)}
		case err != nil:
			return fmt.Errorf("%s: %w", from, err)
		}
	}
	if len(all) == 0 {
		return nil
	}
	if len(open) > 0 && !asJSON && g.ui.stdinIsTerminal() {
		if err := askOnTerminal(g, open); err != nil {
			return err
		}
		open = nil
	}
	if len(open) > 0 {
		return openQuestions(g, wo.Class, open, asJSON)
	}
	if err := wo.Bind(belief.Values(all)); err != nil {
		return err
	}
	asked := 0
	for _, r := range all {
		rec := scheduler.DecisionRec{Slot: r.Decision.Name, Question: r.Decision.Question, Critical: r.Decision.Critical,
			Asked: r.Asked, Source: r.Source, Value: r.Value}
		if r.Event.Defined() {
			rec.Event = &cas.Link{Cid: r.Event}
		}
		plan.Decisions = append(plan.Decisions, rec)
		if r.Asked {
			asked++
		}
	}
	if asJSON {
		ds := []map[string]any{}
		for _, d := range plan.Decisions {
			ds = append(ds, map[string]any{"decision": d.Slot, "asked": d.Asked, "source": d.Source, "value": d.Value})
		}
		_ = g.ui.printJSON(map[string]any{"event": "clarified", "class": wo.Class, "asked": asked, "decisions": ds})
	} else {
		g.ui.printSafe("clarified %s of class %s: %d asked\n", plural(len(all), "decision"), wo.Class, asked)
		for _, r := range all {
			g.ui.printSafe("  %s\n", describeDecision(r.Decision.Name, r.Bound, r.Value, r.Source))
		}
	}
	return nil
}

// describeDecision is one line on a decision, escaped: the slot and the
// value can come from a belief log or a run record.
func describeDecision(slot string, bound bool, v any, source string) string {
	if !bound {
		return textsafe.Escape(slot) + " unbound"
	}
	from := map[string]string{
		belief.SourceBelief: "from the belief log", belief.SourceTerminal: "asked on the terminal",
		belief.SourceFile: "asked, answered from the answers file", belief.SourceDefault: "the default",
		belief.SourceClient: "asked, answered by an MCP client",
	}[source]
	return textsafe.Sprintf("%s = %s  (%s)", slot, dag.FormatValue(v), from)
}

// readAnswers reads --answers FILE: one JSON object, slot to value, read
// strictly as an input is.
func readAnswers(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := cas.DecodePlainJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a JSON object of decision names and values", path)
	}
	return m, nil
}

// askOnTerminal puts each open question to the person at the terminal
// until the answer is one the decision allows.
func askOnTerminal(g *globals, open []*belief.Resolved) error {
	in := bufio.NewReader(g.ui.stdin)
	for _, r := range open {
		d := r.Decision
		for {
			textsafe.Fprintf(g.ui.stderr, "? %s (%s)", d.Question, d.Name)
			if len(d.Allowed) > 0 {
				textsafe.Fprintf(g.ui.stderr, " (one of %s)", dag.FormatValues(d.Allowed))
			}
			fmt.Fprint(g.ui.stderr, ": ")
			line, err := in.ReadString('\n')
			if err != nil && line == "" {
				return needInputError{"no answer to decision " + d.Name}
			}
			line = strings.TrimSpace(line)
			// A JSON value, or else the text as a string.
			v, jerr := cas.DecodePlainJSON([]byte(line))
			if jerr != nil {
				v = line
			}
			if err := r.Answer(v, belief.SourceTerminal); err != nil {
				textsafe.Fprintf(g.ui.stderr, "hg: %v\n", err)
				continue
			}
			break
		}
	}
	return nil
}

// openQuestions prints the questions left open and returns the exit-5
// error.
func openQuestions(g *globals, class string, open []*belief.Resolved, asJSON bool) error {
	if asJSON {
		qs := []map[string]any{}
		for _, r := range open {
			q := map[string]any{"decision": r.Decision.Name, "question": r.Decision.Question}
			if len(r.Decision.Allowed) > 0 {
				q["allowed"] = r.Decision.Allowed
			}
			if r.Note != "" {
				q["note"] = r.Note
			}
			qs = append(qs, q)
		}
		_ = g.ui.printJSON(map[string]any{"class": class, "questions": qs})
	} else {
		g.ui.printSafe("%s to answer before anything runs (class %s):\n", plural(len(open), "question"), class)
		for _, r := range open {
			line := fmt.Sprintf("  %s: %s", r.Decision.Name, r.Decision.Question)
			if len(r.Decision.Allowed) > 0 {
				line += " (one of " + dag.FormatValues(r.Decision.Allowed) + ")"
			}
			if r.Note != "" {
				line += " (" + r.Note + ")"
			}
			g.ui.printSafe("%s\n", line) // one line, escaped
		}
	}
	return needInputError{fmt.Sprintf("%s unanswered: answer on a terminal or with --answers FILE (a JSON object of decision names and values)", plural(len(open), "decision"))}
}

// crystallize writes the decisions a run that reached its outcome used
// into the belief log of its class, all of them or none. A run answered
// by an MCP client teaches nothing unless hg mcp --learn named its
// class: an answer a client gave binds its own run, not the operator's
// next one (hg resume of such a run learns nothing either).
func crystallize(ctx context.Context, g *globals, run string, asJSON bool) error {
	st, err := g.openStore(false, commandLine(g.args))
	if err != nil {
		return err
	}
	defer st.Close()
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil || rec.Class == "" {
		return err
	}
	var used []belief.Crystal
	for _, d := range rec.Decisions {
		if d.Asked && d.Source == belief.SourceClient && !g.learnClient[rec.Class] {
			return nil
		}
		used = append(used, belief.Crystal{Slot: d.Slot, Value: d.Value, Source: d.Source, Asked: d.Asked})
	}
	written, err := belief.Crystallize(ctx, st, rec.Class, run, used)
	if err != nil {
		return err
	}
	if len(written) > 0 && !asJSON {
		g.ui.printSafe("learned %s for class %s\n", plural(len(written), "decision"), rec.Class)
	}
	return nil
}

func (u *ui) stdinIsTerminal() bool {
	f, ok := u.stdin.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newBeliefCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "belief",
		Short: "the belief log of a task class: the decisions its Work Orders need not ask again",
		Long: `Each task class (a Work Order's "class", or its name) has an append-only log
of hg/belief@1 events, each linked to the one before and naming the run or
person that caused it: assert, update, supersede, retract. Its reduction is
what the clarifier asks nothing about. A run that reaches its outcome writes
the answers it used; a retraction re-opens exactly one decision.`,
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show CLASS",
		Short: "the decisions the class's log binds now",
		Args:  exactArgs(1, "one CLASS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := readLog(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			state := belief.Reduce(log)
			if asJSON {
				out := map[string]any{}
				for slot, b := range state {
					out[slot] = map[string]any{"value": b.Value, "event": b.Event.CID.String(), "cause": b.Event.Cause.String()}
				}
				return g.ui.printJSON(map[string]any{"class": args[0], "bound": out})
			}
			if len(state) == 0 {
				g.ui.printSafe("class %s: nothing bound\n", args[0])
				return nil
			}
			for _, e := range log { // in the order they were bound
				if b, ok := state[e.Slot]; ok && b.Event.CID == e.CID {
					g.ui.printSafe("%s = %s  (%s by %s, %s)\n", e.Slot, dag.FormatValue(b.Value), e.Op, e.Cause, e.CID)
				}
			}
			return nil
		},
	}
	logCmd := &cobra.Command{
		Use:   "log CLASS",
		Short: "every event of the class's log, oldest first",
		Args:  exactArgs(1, "one CLASS"),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := readLog(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			for _, e := range log {
				if asJSON {
					_ = g.ui.printJSON(map[string]any{"event": e.CID.String(), "slot": e.Slot, "op": e.Op,
						"value": e.Value, "cause": e.Cause.String(), "why": e.Why, "at": e.At})
					continue
				}
				// Every field is the log's text: escaped, on one line.
				line := textsafe.Sprintf("%s  %-9s %s", e.At, e.Op, e.Slot)
				if e.Op != belief.OpRetract {
					line += " = " + textsafe.Escape(dag.FormatValue(e.Value))
				}
				line += "  by " + textsafe.Escape(e.Cause.String())
				if e.Why != "" {
					line += ": " + textsafe.Escape(e.Why)
				}
				g.ui.printf("%s  %s\n", line, e.CID)
			}
			return nil
		},
	}
	var why string
	retract := &cobra.Command{
		Use:   "retract CLASS SLOT --why TEXT",
		Short: "unbind a decision: the next Work Order of the class asks it again",
		Args:  exactArgs(2, "CLASS and SLOT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(why) == "" {
				return usageError{fmt.Errorf("--why is required: say why the decision no longer holds")}
			}
			return appendEvent(cmd.Context(), g, args[0], args[1], func(state map[string]belief.Binding) (belief.Event, error) {
				if _, ok := state[args[1]]; !ok {
					return belief.Event{}, fmt.Errorf("class %s: %s is not bound", args[0], args[1])
				}
				return belief.Event{Op: belief.OpRetract, Why: why}, nil
			})
		},
	}
	retract.Flags().StringVar(&why, "why", "", "why the decision no longer holds")
	assert := &cobra.Command{
		Use:   "assert CLASS SLOT VALUE",
		Short: "bind a decision (VALUE is JSON, or else a string)",
		Args:  exactArgs(3, "CLASS, SLOT and VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := cas.DecodePlainJSON([]byte(args[2]))
			if err != nil {
				v = args[2]
			}
			return appendEvent(cmd.Context(), g, args[0], args[1], func(state map[string]belief.Binding) (belief.Event, error) {
				op := belief.OpAssert
				if _, ok := state[args[1]]; ok {
					op = belief.OpUpdate
				}
				return belief.Event{Op: op, Value: v}, nil
			})
		},
	}
	for _, c := range []*cobra.Command{show, logCmd} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(show, logCmd, retract, assert)
	return cmd
}

func readLog(ctx context.Context, g *globals, class string) ([]belief.Entry, error) {
	if err := dag.CheckClass(class); err != nil {
		return nil, usageError{err}
	}
	st, err := g.openStore(true, commandLine(g.args))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return belief.Log(ctx, st, class)
}

// appendEvent adds the event build makes from the class's current state,
// caused by the person running hg.
func appendEvent(ctx context.Context, g *globals, class, slot string, build func(map[string]belief.Binding) (belief.Event, error)) error {
	if err := dag.CheckClass(class); err != nil {
		return usageError{err}
	}
	if !dag.ValidName(slot) {
		return usageError{fmt.Errorf("decision %q: not a valid decision name", slot)}
	}
	st, err := g.openStore(false, commandLine(g.args))
	if err != nil {
		return err
	}
	defer st.Close()
	log, err := belief.Log(ctx, st, class)
	if err != nil {
		return err
	}
	ev, err := build(belief.Reduce(log))
	if err != nil {
		return err
	}
	ev.Class, ev.Slot = class, slot
	ev.Cause = belief.Cause{Kind: "person", Ref: whoAmI()}
	c, err := belief.Append(ctx, st, ev)
	if err != nil {
		return err
	}
	g.ui.printSafe("%s %s %s  %s\n", class, ev.Op, slot, c)
	return nil
}

func whoAmI() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "someone"
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
