package haygent

import (
	"fmt"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

type gateOutcome struct {
	res  gate.Result
	link cas.Link
	read []cas.Link
}

// evaluateGates runs every gate over the evidence this run observed and
// records the verdicts in a transition.
func (r *runner) evaluateGates() ([]gateOutcome, error) {
	rec, err := r.begin(Step{ID: "gates"}, "gates")
	if err != nil {
		return nil, err
	}
	env := gate.Env{Now: r.now(), LastChange: r.lastChange}
	if len(r.vouchings) > 0 {
		// What the command evidence vouches for is judged against the
		// workspace as it is now.
		now, err := r.snapshotWorkspace()
		if err != nil {
			return nil, fmt.Errorf("snapshot workspace for the gates: %w", err)
		}
		r.observed, r.observedSeq = now.Cid, r.seq
		link, err := r.observeOn("gates", ledger.KindWorkspace, "workspace", map[string]any{}, env.Now, &ledger.Vouching{Workspace: now.Cid})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
		if env.Stale, err = ledger.StaleEvidence(r.ctx, r.st, r.vouchings, now.Cid); err != nil {
			return nil, fmt.Errorf("workspace freshness: %w", err)
		}
	}
	var out []gateOutcome
	for _, g := range r.pkg.Gates {
		res := g.Evaluate(r.evidence, env)
		var read []cas.Link
		for _, ref := range res.Read {
			if c, err := cid.Decode(ref); err == nil {
				read = append(read, cas.Link{Cid: c})
			}
		}
		spec := g.Spec()
		link, err := r.put(&ledger.GateResult{Type: ledger.TypeGate, Gate: res.Gate, Predicate: spec.Predicate, Verdict: string(res.Verdict),
			Action: res.Action, Reason: res.Reason, Read: orEmpty(read), At: ledger.Stamp(env.Now)})
		if err != nil {
			return nil, err
		}
		rec.gates = append(rec.gates, link)
		out = append(out, gateOutcome{res: res, link: link, read: orEmpty(read)})
		if res.Verdict != gate.Pass {
			rec.status = ledger.StepFailed
		}
	}
	return out, r.record(rec)
}

// firstFailed returns the first gate that did not PASS, preferring one
// whose rule says halt.
func firstFailed(results []gateOutcome) *gateOutcome {
	var first *gateOutcome
	for i := range results {
		o := &results[i]
		if o.res.Verdict == gate.Pass {
			continue
		}
		if o.res.Action == gate.ActionHalt {
			return o
		}
		if first == nil {
			first = o
		}
	}
	return first
}

// failureView is what a repair slot may be shown of the failed gates.
func failureView(results []gateOutcome) []any {
	var out []any
	for _, o := range results {
		if o.res.Verdict == gate.Pass {
			continue
		}
		out = append(out, map[string]any{"gate": o.res.Gate, "verdict": string(o.res.Verdict), "reason": o.res.Reason})
	}
	return out
}
