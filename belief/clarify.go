package belief

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

// Where a decision's value came from.
const (
	SourceBelief   = "belief"   // the class's belief log
	SourceTerminal = "terminal" // asked on the terminal
	SourceFile     = "file"     // asked, answered by --answers FILE
	SourceDefault  = "default"  // the decision's default (not critical)
	SourceClient   = "client"   // asked, answered by an MCP client (hg mcp's submit)
)

// Resolved is one decision slot of a Work Order as the clarifier leaves
// it.
type Resolved struct {
	Decision *dag.Decision
	Bound    bool
	Value    any
	Source   string  // see the Source constants; "" while unbound
	Event    cid.Cid // SourceBelief: the event that bound it
	Asked    bool    // the question was put
	// Note says why a value the belief log holds was not used (the
	// decision no longer allows it), for the report.
	Note string
	// Log is the binding the belief log holds for the slot, if it holds
	// one, whether or not the decision took it.
	Log *Binding
}

// Clarify resolves each decision of wo (in name order) against state,
// the reduction of its class's belief log: a slot the state binds to a
// value the decision allows takes it; an unbound slot that is not
// critical takes its default, if it has one. open lists the critical
// slots left unbound: their questions must be answered (Answer) before
// anything runs.
func Clarify(wo *dag.WorkOrder, state map[string]Binding) (all, open []*Resolved) {
	for _, d := range wo.DecisionList() {
		r := &Resolved{Decision: d}
		if b, ok := state[d.Name]; ok {
			r.Log = &b
			if err := d.Check(b.Value); err != nil {
				r.Note = "the belief log's value is not allowed: " + err.Error()
			} else {
				r.Bound, r.Value, r.Source, r.Event = true, b.Value, SourceBelief, b.Event.CID
			}
		}
		if !r.Bound && !d.Critical && d.HasDefault {
			r.Bound, r.Value, r.Source = true, d.Default, SourceDefault
		}
		if !r.Bound && d.Critical {
			open = append(open, r)
		}
		all = append(all, r)
	}
	return all, open
}

// Answer binds r to v, asked from source, if the decision allows v.
func (r *Resolved) Answer(v any, source string) error {
	v = cas.FromJSON(v) // as it goes into the input: 30.0 is 30
	if err := r.Decision.Check(v); err != nil {
		return err
	}
	r.Bound, r.Value, r.Source, r.Asked, r.Event = true, v, source, true, cid.Undef
	return nil
}

// Conflict is an answer given for a decision the belief log binds to
// another value.
type Conflict struct {
	Slot   string
	Answer any
	Log    Binding
}

// AnswersError refuses a set of answers that names a decision the Work
// Order does not have, or answers one the belief log binds otherwise. It
// is the answers' fault, found before any value is judged.
type AnswersError struct {
	Class     string
	Unknown   []string // names no decision has, sorted
	Decisions []string // the Work Order's decisions, sorted
	Conflicts []Conflict
}

func (e *AnswersError) Error() string {
	var parts []string
	for _, n := range e.Unknown {
		has := "it has none"
		if len(e.Decisions) > 0 {
			has = "its decisions: " + strings.Join(e.Decisions, ", ")
		}
		parts = append(parts, fmt.Sprintf("%q names no decision of the Work Order (%s)", n, has))
	}
	var conflicts []string
	for _, c := range e.Conflicts {
		conflicts = append(conflicts, fmt.Sprintf("decision %q: the belief log of class %s binds it to %s (%s by %s, event %s), the answers file says %s",
			c.Slot, e.Class, dag.FormatValue(c.Log.Value), c.Log.Event.Op, c.Log.Event.Cause, c.Log.Event.CID, dag.FormatValue(c.Answer)))
	}
	switch len(conflicts) {
	case 0:
	case 1:
		parts = append(parts, conflicts[0])
	default:
		parts = append(parts, fmt.Sprintf("%d answers the belief log of class %s binds otherwise: %s", len(conflicts), e.Class, strings.Join(conflicts, "; ")))
	}
	if len(e.Conflicts) > 0 {
		how := fmt.Sprintf("change it first with 'hg belief retract %s %s --why TEXT' (then answer it) or 'hg belief assert %s %s VALUE'",
			e.Class, e.Conflicts[0].Slot, e.Class, e.Conflicts[0].Slot)
		if len(e.Conflicts) > 1 {
			how = fmt.Sprintf("change them first with 'hg belief retract %s SLOT --why TEXT' (then answer them) or 'hg belief assert %s SLOT VALUE'", e.Class, e.Class)
		}
		parts = append(parts, "an answers file does not override the log: "+how)
	}
	return strings.Join(parts, "; ")
}

// AnswerFrom binds the decisions of all that answers names, answered from
// source, and returns the critical ones still open. Nothing is chosen
// silently: an answer is taken by a decision the belief log does not
// bind (critical or not: over a default too), is the log's own value
// again (the decision keeps its source in the log), or is refused. A name
// no decision has, and an answer to a decision the log binds to another
// value, are refused together in an [*AnswersError] before any value is
// judged: the log changes through a person's retract or update, never by
// a file passed to a run. An answer the decision does not allow is the
// error of [Resolved.Answer], naming the decision.
func AnswerFrom(class string, all []*Resolved, answers map[string]any, source string) (open []*Resolved, err error) {
	ae := &AnswersError{Class: class}
	byName := map[string]*Resolved{}
	for _, r := range all {
		byName[r.Decision.Name] = r
		ae.Decisions = append(ae.Decisions, r.Decision.Name)
	}
	slices.Sort(ae.Decisions)
	names := make([]string, 0, len(answers))
	for n := range answers {
		names = append(names, n)
	}
	slices.Sort(names)
	var take []*Resolved
	for _, n := range names {
		r, ok := byName[n]
		switch {
		case !ok:
			ae.Unknown = append(ae.Unknown, n)
		case r.Source == SourceBelief:
			if v := cas.FromJSON(answers[n]); !dag.SameValue(v, r.Value) {
				ae.Conflicts = append(ae.Conflicts, Conflict{Slot: n, Answer: v, Log: *r.Log})
			}
		default:
			take = append(take, r)
		}
	}
	if len(ae.Unknown) > 0 || len(ae.Conflicts) > 0 {
		return nil, ae
	}
	for _, r := range take {
		if err := r.Answer(answers[r.Decision.Name], source); err != nil {
			return nil, fmt.Errorf("decision %q: %w", r.Decision.Name, err)
		}
	}
	for _, r := range all {
		if !r.Bound && r.Decision.Critical {
			open = append(open, r)
		}
	}
	return open, nil
}

// Values returns the bound values by slot, for [dag.WorkOrder.Bind].
func Values(all []*Resolved) map[string]any {
	out := map[string]any{}
	for _, r := range all {
		if r.Bound {
			out[r.Decision.Name] = r.Value
		}
	}
	return out
}

// Crystallize writes into class's belief log the answers a run that
// reached its outcome used: each asked answer the log does not already
// hold becomes an event naming the run and where the answer came from
// (assert for an unbound slot, supersede for one bound to another value).
// Values the log gave and defaults teach nothing new. The events are
// written all or none. It returns the events written.
func Crystallize(ctx context.Context, st cas.Store, class, run string, decisions []Crystal) ([]cid.Cid, error) {
	log, err := Log(ctx, st, class)
	if err != nil {
		return nil, err
	}
	state := Reduce(log)
	var evs []Event
	for _, d := range decisions {
		if !d.Asked {
			continue
		}
		op := OpAssert
		if b, ok := state[d.Slot]; ok {
			if dag.SameValue(b.Value, d.Value) {
				continue
			}
			op = OpSupersede
		}
		evs = append(evs, Event{Class: class, Slot: d.Slot, Op: op, Value: d.Value,
			Cause: Cause{Kind: "run", Ref: run, Source: d.Source}})
	}
	return appendAll(ctx, st, class, evs)
}

// Crystal is a decision a run used, as its record keeps it.
type Crystal struct {
	Slot   string
	Value  any
	Source string
	Asked  bool
}
