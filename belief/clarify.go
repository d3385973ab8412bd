package belief

import (
	"context"

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
// Values the log gave and defaults teach nothing new. It returns the
// events written.
func Crystallize(ctx context.Context, st cas.Store, class, run string, decisions []Crystal) ([]cid.Cid, error) {
	log, err := Log(ctx, st, class)
	if err != nil {
		return nil, err
	}
	state := Reduce(log)
	var out []cid.Cid
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
		c, err := Append(ctx, st, Event{Class: class, Slot: d.Slot, Op: op, Value: d.Value,
			Cause: Cause{Kind: "run", Ref: run, Source: d.Source}})
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Crystal is a decision a run used, as its record keeps it.
type Crystal struct {
	Slot   string
	Value  any
	Source string
	Asked  bool
}
