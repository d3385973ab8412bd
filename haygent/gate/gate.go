package gate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Verdict is what a gate decides from evidence.
type Verdict string

// The verdicts. Only Pass lets work through; see the package documentation
// for the order in which they are decided.
const (
	Pass          Verdict = "PASS"          // the predicate held over fresh, consistent, well-formed evidence
	Fail          Verdict = "FAIL"          // the predicate was false
	Missing       Verdict = "MISSING"       // no evidence of the gate's kind (and subject)
	Stale         Verdict = "STALE"         // the evidence is older than max_age, or than the last change of its subject, or the workspace it vouches for has changed
	Invalid       Verdict = "INVALID"       // the evidence cannot be judged: malformed Data, or an error evaluating a predicate
	Contradictory Verdict = "CONTRADICTORY" // other evidence shows the gate's evidence cannot be trusted
	Timeout       Verdict = "TIMEOUT"       // the evidence records a run that timed out
)

// Evidence is one piece of evidence as a gate sees it. The runtime builds it
// from an evidence block it observed; the gate trusts nothing else.
type Evidence struct {
	Ref        string // the CID of the evidence block, recorded in Result.Read
	Kind       string // "exit", "test_report", "digest", "file", "approval", ...
	Subject    string // what it is about, e.g. "step:test", "file:out/report.xml"
	ObservedAt time.Time

	// Data is what the predicate sees as ev (or other). Values must be of
	// the DAG-CBOR data model: nil, bool, string, int64, float64 (finite),
	// []byte, []any, map[string]any, nested at most 512 levels. Anything
	// else makes the verdict INVALID. By convention Data["timed_out"] ==
	// true marks evidence of a run that timed out, and Data["invalid"]
	// (a reason) evidence the runtime refused to take as what it claims.
	Data map[string]any
}

// Env is the runtime's side of an evaluation.
type Env struct {
	// Now is the time evidence age is measured against. It must be set when
	// the gate has a max_age: with Now zero such a gate is STALE, since
	// freshness cannot be shown.
	Now time.Time

	// LastChange gives, per subject, when the thing the evidence is about
	// last changed (a repair rewrote a file after the tests ran, say).
	// Evidence observed strictly before that is STALE. A subject absent from
	// the map has no recorded change.
	LastChange map[string]time.Time

	// Stale gives, per evidence Ref, why that evidence no longer vouches
	// for the workspace (the runtime found a file it covers changed since
	// it was taken). Such evidence is STALE.
	Stale map[string]string
}

// Result is a gate's decision and what it was based on.
type Result struct {
	Gate    string // the gate's id
	Verdict Verdict
	Reason  string   // for people and records; not for parsing
	Read    []string // Refs of every evidence the gate read, in the order read; empty for MISSING
	Action  string   // "pass" for PASS, "fail" for FAIL, else the gate's on_* rule: "fail" or "halt"
}

// Gate is a compiled gate spec. It is immutable and safe for concurrent
// use; make one with Compile.
type Gate struct {
	spec   Spec
	maxAge time.Duration
	pred   *compiled
	contra []*compiled // parallel to spec.Contradicts
}

// ID is the gate's id.
func (g *Gate) ID() string { return g.spec.ID }

// Spec returns the spec the gate was compiled from.
func (g *Gate) Spec() Spec {
	s := g.spec
	s.Contradicts = append([]Contradiction(nil), g.spec.Contradicts...)
	return s
}

// Evaluate decides the gate over evidence, in the order given in the package
// documentation. It reads only evidence and env, never modifies them, never
// panics, and returns PASS only when the predicate evaluated to true over
// the selected evidence after every other check let it through. Evaluation
// is bounded by MaxCost per predicate.
func (g *Gate) Evaluate(evidence []Evidence, env Env) Result {
	r := Result{Gate: g.spec.ID}

	// 1. Select.
	sel, ok := latest(evidence, g.spec.Evidence, g.spec.Subject)
	if !ok {
		if g.spec.Subject == "" {
			return g.decide(r, Missing, fmt.Sprintf("no %s evidence", g.spec.Evidence))
		}
		return g.decide(r, Missing, fmt.Sprintf("no %s evidence for %s", g.spec.Evidence, g.spec.Subject))
	}
	r.Read = append(r.Read, sel.Ref)

	// 2. Fresh.
	if g.maxAge > 0 {
		if env.Now.IsZero() {
			return g.decide(r, Stale, "max_age is set but Env.Now is not, so freshness cannot be shown")
		}
		if age := env.Now.Sub(sel.ObservedAt); age > g.maxAge {
			return g.decide(r, Stale, fmt.Sprintf("%s evidence %s is %s old, max_age %s", sel.Kind, sel.Ref, age, g.maxAge))
		}
	}
	if changed, ok := env.LastChange[sel.Subject]; ok && sel.ObservedAt.Before(changed) {
		return g.decide(r, Stale, fmt.Sprintf("%s evidence %s was observed at %s, before %s last changed at %s",
			sel.Kind, sel.Ref, sel.ObservedAt.Format(time.RFC3339Nano), sel.Subject, changed.Format(time.RFC3339Nano)))
	}

	if why, ok := env.Stale[sel.Ref]; ok {
		return g.decide(r, Stale, fmt.Sprintf("%s evidence %s: %s", sel.Kind, sel.Ref, why))
	}

	// 3. Timed out.
	if v, ok := sel.Data["timed_out"]; ok {
		b, isBool := v.(bool)
		switch {
		case !isBool:
			return g.decide(r, Invalid, fmt.Sprintf("%s evidence %s: timed_out is %T, not bool", sel.Kind, sel.Ref, v))
		case b:
			return g.decide(r, Timeout, fmt.Sprintf("%s evidence %s marks timed_out", sel.Kind, sel.Ref))
		}
	}

	// By convention Data["invalid"] says why the runtime refused what the
	// evidence would have held.
	if v, ok := sel.Data["invalid"]; ok {
		return g.decide(r, Invalid, fmt.Sprintf("%s evidence %s: %v", sel.Kind, sel.Ref, v))
	}

	// The predicates bind ev; its Data must be in the data model.
	if err := checkData(sel.Data); err != nil {
		return g.decide(r, Invalid, fmt.Sprintf("%s evidence %s: %v", sel.Kind, sel.Ref, err))
	}

	// 4. Contradicted. A rule that holds wins over one that cannot be
	// evaluated; one that cannot be evaluated makes the verdict INVALID, as a
	// check that could not be made must not be skipped.
	var contradiction, unjudgeable string
	note := func(contra bool, msg string) {
		if contra && contradiction == "" {
			contradiction = msg
		} else if !contra && unjudgeable == "" {
			unjudgeable = msg
		}
	}
	if g.spec.Evidence == KindTestReport {
		if ex, ok := latest(evidence, KindExit, sel.Subject); ok {
			r.Read = appendRef(r.Read, ex.Ref)
			code, codeOK := integer(ex.Data["code"])
			failed, failedOK := integer(sel.Data["failed"])
			switch {
			case !codeOK:
				note(false, fmt.Sprintf("exit evidence %s for %s: code is missing or not an integer", ex.Ref, sel.Subject))
			case code != 0 && failedOK && failed == 0:
				note(true, fmt.Sprintf("exit evidence %s for %s has code %d beside a test report with 0 failures: a run that crashed cannot report zero failures", ex.Ref, sel.Subject, code))
			}
		}
	}
	for i, rule := range g.spec.Contradicts {
		subject := rule.Subject
		if subject == "" {
			subject = sel.Subject
		}
		other, ok := latest(evidence, rule.Evidence, subject)
		if !ok {
			continue
		}
		r.Read = appendRef(r.Read, other.Ref)
		if err := checkData(other.Data); err != nil {
			note(false, fmt.Sprintf("contradicts[%d]: %s evidence %s: %v", i, other.Kind, other.Ref, err))
			continue
		}
		c := g.contra[i]
		if f, ok := c.lacks("ev", sel.Data); ok {
			note(false, fmt.Sprintf("contradicts[%d]: %s evidence %s lacks field %q, which the rule reads", i, sel.Kind, sel.Ref, f))
			continue
		}
		if f, ok := c.lacks("other", other.Data); ok {
			note(false, fmt.Sprintf("contradicts[%d]: %s evidence %s lacks field %q, which the rule reads", i, other.Kind, other.Ref, f))
			continue
		}
		holds, err := c.eval(map[string]any{"ev": sel.Data, "other": other.Data})
		switch {
		case err != nil:
			note(false, fmt.Sprintf("contradicts[%d]: %s evidence %s: %v", i, other.Kind, other.Ref, err))
		case holds:
			note(true, fmt.Sprintf("contradicts[%d]: %s evidence %s for %s: %s", i, other.Kind, other.Ref, subject, rule.Predicate))
		}
	}
	if contradiction != "" {
		return g.decide(r, Contradictory, contradiction)
	}
	if unjudgeable != "" {
		return g.decide(r, Invalid, unjudgeable)
	}

	// 5. The predicate.
	if f, ok := g.pred.lacks("ev", sel.Data); ok {
		return g.decide(r, Invalid, fmt.Sprintf("%s evidence %s lacks field %q, which the predicate reads", sel.Kind, sel.Ref, f))
	}
	holds, err := g.pred.eval(map[string]any{"ev": sel.Data})
	switch {
	case err != nil:
		return g.decide(r, Invalid, fmt.Sprintf("predicate over %s evidence %s: %v", sel.Kind, sel.Ref, err))
	case holds:
		return g.decide(r, Pass, "predicate true: "+g.spec.Predicate)
	default:
		return g.decide(r, Fail, "predicate false: "+g.spec.Predicate)
	}
}

// decide fills in the verdict and the action its rule gives.
func (g *Gate) decide(r Result, v Verdict, reason string) Result {
	r.Verdict, r.Reason = v, reason
	switch v {
	case Pass:
		r.Action = ActionPass
	case Fail:
		r.Action = ActionFail
	case Missing:
		r.Action = g.spec.OnMissing
	case Stale:
		r.Action = g.spec.OnStale
	case Invalid:
		r.Action = g.spec.OnInvalid
	case Contradictory:
		r.Action = g.spec.OnContradictory
	case Timeout:
		r.Action = g.spec.OnTimeout
	}
	return r
}

// latest returns the evidence of kind (and subject, unless empty) observed
// last; of several observed at the same instant, the later in the slice.
func latest(evidence []Evidence, kind, subject string) (Evidence, bool) {
	best := -1
	for i := range evidence {
		e := &evidence[i]
		if e.Kind != kind || (subject != "" && e.Subject != subject) {
			continue
		}
		if best < 0 || !e.ObservedAt.Before(evidence[best].ObservedAt) {
			best = i
		}
	}
	if best < 0 {
		return Evidence{}, false
	}
	return evidence[best], true
}

func appendRef(refs []string, ref string) []string {
	if slices.Contains(refs, ref) {
		return refs
	}
	return append(refs, ref)
}

// integer reads an integral number: an int64, or a float64 with no
// fractional part.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && !math.IsInf(n, 0) && math.Abs(n) < 1<<63 {
			return int64(n), true
		}
	}
	return 0, false
}

// maxDataDepth bounds the nesting of Data, as the CAS codec does.
const maxDataDepth = 512

// checkData refuses Data holding anything outside the data model, NaN or
// infinite floats (a NaN compares false with everything, so `!(ev.failed >
// 0)` would hold), or nesting deeper than maxDataDepth (which also stops a
// map that contains itself). The error names the first bad value in key
// order, so the same Data always gives the same reason.
func checkData(data map[string]any) error {
	if dataOK(data, 0) {
		return nil
	}
	return fmt.Errorf("Data%s", dataProblem(data, 0))
}

// dataOK is the fast check: no allocation, map order irrelevant.
func dataOK(v any, depth int) bool {
	if depth > maxDataDepth {
		return false
	}
	switch x := v.(type) {
	case nil, bool, string, int64, []byte:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, e := range x {
			if !dataOK(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !dataOK(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// dataProblem describes the first bad value under v, in key order, as a
// path and a message; "" if there is none.
func dataProblem(v any, depth int) string {
	if depth > maxDataDepth {
		return fmt.Sprintf(": nested deeper than %d levels", maxDataDepth)
	}
	switch x := v.(type) {
	case nil, bool, string, int64, []byte:
		return ""
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprintf(": %v is not a finite number", x)
		}
		return ""
	case []any:
		for i, e := range x {
			if p := dataProblem(e, depth+1); p != "" {
				return "[" + strconv.Itoa(i) + "]" + p
			}
		}
		return ""
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p := dataProblem(x[k], depth+1); p != "" {
				return "[" + strconv.Quote(k) + "]" + p
			}
		}
		return ""
	}
	return fmt.Sprintf(": %T is not in the evidence data model", v)
}
