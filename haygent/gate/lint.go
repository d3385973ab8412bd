package gate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Problem is one reason a gate spec is refused. Gate is the gate's id, or
// "gates[i]" when it has none (Lint) or "" when Compile was given a spec
// without an id. Message starts with the field it is about.
type Problem struct {
	Gate    string
	Message string
}

// Error makes a Problem usable as an error; Compile returns them joined.
func (p Problem) Error() string {
	if p.Gate == "" {
		return "gate: " + p.Message
	}
	return fmt.Sprintf("gate %s: %s", p.Gate, p.Message)
}

// Lint checks gate specs for `hg haygent check`. It reports every problem
// Compile would refuse a spec for, plus duplicate ids and an empty list (no
// gate can fail, so nothing could ever be refused). A nil result means every
// spec compiles and none of them is a gate that cannot fail.
//
// A spec is refused when:
//   - id is missing, longer than 128 bytes, or holds characters other than
//     ASCII letters, digits, '_', '-' and '.'; or it repeats an earlier id;
//   - evidence is missing or not a known kind (see IsKnownKind);
//   - predicate is missing, does not compile, or has a type other than bool
//     (or dyn, checked at evaluation);
//   - predicate reads no variable at all (`true`, `1 == 1`): a constant;
//   - predicate never reads ev;
//   - predicate can never be false (`x || true`, `!false`, `ev.a == ev.a`,
//     `ev.a ? true : true`): the gate cannot fail; or can never be true: the
//     gate cannot pass;
//   - no probe makes the gate FAIL while some probe makes it PASS (`ev.ok ||
//     !ev.ok`, `ev.failed >= 0 || ev.failed < 0`, `size(ev.problems) >= 0`):
//     the gate cannot fail. Probes are evidence values at the boundaries of
//     every field the predicate reads, typed as the gate's kind of evidence
//     holds them (see probe.go);
//   - max_age is not a Go duration, is negative, or is zero (omit it for no
//     limit);
//   - a contradicts entry has a missing or unknown evidence kind, a
//     predicate that does not compile or is not bool, that never reads
//     other, or that can never be true;
//   - any of on_missing, on_stale, on_invalid, on_contradictory, on_timeout
//     is absent, or is not "fail" or "halt".
//
// The constant checks walk the checked AST and prove, under CEL's
// semantics, which results are possible; anything they cannot prove is
// assumed possible, so a predicate that depends on ev (`ev.total > 0 &&
// ev.failed == 0`, `size(ev.problems) == 0`) is never reported by them.
// The probes then evaluate the gate itself, at most 2048 times. Both are a
// lint: a gate that is always true for a reason no probe reaches (a
// property every real report has) is not reported.
func Lint(specs []Spec) []Problem {
	var probs []Problem
	if len(specs) == 0 {
		probs = append(probs, Problem{Message: "gates: no gates: a Haygent must declare at least one gate"})
	}
	seen := map[string]int{}
	for i, s := range specs {
		label := s.ID
		if label == "" {
			label = fmt.Sprintf("gates[%d]", i)
		}
		_, ps := compile(s, label)
		probs = append(probs, ps...)
		if s.ID != "" {
			if j, dup := seen[s.ID]; dup {
				probs = append(probs, Problem{Gate: label, Message: fmt.Sprintf("id: duplicate: gates[%d] and gates[%d] are both %q", j, i, s.ID)})
			} else {
				seen[s.ID] = i
			}
		}
	}
	return probs
}

// maxIDLen is the longest gate id.
const maxIDLen = 128

func checkID(id string) string {
	switch {
	case id == "":
		return "id: missing"
	case len(id) > maxIDLen:
		return fmt.Sprintf("id: longer than %d bytes", maxIDLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Sprintf("id: %q holds %q; use letters, digits, '_', '-', '.'", id, r)
		}
	}
	return ""
}

func checkKind(field, kind string) string {
	switch {
	case kind == "":
		return field + ": missing"
	case !IsKnownKind(kind):
		return fmt.Sprintf("%s: unknown evidence kind %q; known: %s", field, kind, strings.Join(knownKinds, ", "))
	}
	return ""
}

func checkRule(field, value, what string) string {
	switch value {
	case ActionFail, ActionHalt:
		return ""
	case "":
		return fmt.Sprintf("%s: not declared; every gate must say \"fail\" or \"halt\" for %s", field, what)
	}
	return fmt.Sprintf("%s: unknown value %q; want \"fail\" or \"halt\"", field, value)
}

// compile checks s and, if it has no problem, builds the gate. label names
// the gate in problems.
func compile(s Spec, label string) (*Gate, []Problem) {
	var probs []Problem
	add := func(msg string) {
		if msg != "" {
			probs = append(probs, Problem{Gate: label, Message: msg})
		}
	}
	es, err := celEnvs()
	if err != nil {
		add("internal: CEL environment: " + err.Error())
		return nil, probs
	}
	g := &Gate{spec: s}
	g.spec.Contradicts = append([]Contradiction(nil), s.Contradicts...)

	add(checkID(s.ID))
	add(checkKind("evidence", s.Evidence))

	if c, err := compileExpr(es.pred, s.Predicate, "ev"); err != nil {
		add("predicate: " + err.Error())
	} else {
		g.pred = c
		a := analyze(c.ast, []string{"ev"})
		switch {
		case !a.readsAnyVar:
			add("predicate: constant: reads no variable, so it cannot depend on evidence")
		case len(a.reads) == 0:
			add("predicate: never reads ev, so it cannot depend on evidence")
		case a.out&oFalse == 0:
			add("predicate: can never be false, so the gate cannot fail")
		case a.out&oTrue == 0:
			add("predicate: can never be true, so the gate cannot pass")
		default:
			// The form proves nothing: evaluate the gate over probes.
			add(probeProblem(&Gate{spec: Spec{ID: s.ID, Evidence: s.Evidence, Subject: s.Subject, Predicate: s.Predicate}, pred: c}))
		}
	}

	if s.MaxAge != "" {
		d, err := time.ParseDuration(s.MaxAge)
		switch {
		case err != nil:
			add(fmt.Sprintf("max_age: %q is not a Go duration (e.g. \"10m\", \"1h30m\")", s.MaxAge))
		case d < 0:
			add(fmt.Sprintf("max_age: %q is negative", s.MaxAge))
		case d == 0:
			add(fmt.Sprintf("max_age: %q is zero; omit max_age for no age limit", s.MaxAge))
		default:
			g.maxAge = d
		}
	}

	for i, r := range s.Contradicts {
		field := fmt.Sprintf("contradicts[%d]", i)
		add(checkKind(field+".evidence", r.Evidence))
		c, err := compileExpr(es.contra, r.Predicate, "ev", "other")
		if err != nil {
			add(field + ".predicate: " + err.Error())
			continue
		}
		g.contra = append(g.contra, c)
		a := analyze(c.ast, []string{"ev", "other"})
		switch {
		case !slices.Contains(a.reads, "other"):
			add(field + ".predicate: never reads other, so it says nothing about the " + r.Evidence + " evidence")
		case a.out&oTrue == 0:
			add(field + ".predicate: can never be true, so it never detects a contradiction")
		}
	}

	add(checkRule("on_missing", s.OnMissing, "missing evidence"))
	add(checkRule("on_stale", s.OnStale, "stale evidence"))
	add(checkRule("on_invalid", s.OnInvalid, "invalid evidence"))
	add(checkRule("on_contradictory", s.OnContradictory, "contradictory evidence"))
	add(checkRule("on_timeout", s.OnTimeout, "evidence of a run that timed out"))

	if len(probs) > 0 {
		return nil, probs
	}
	return g, nil
}

// Compile checks one spec and builds its gate, ready to Evaluate many times.
// It refuses, with every problem joined into the error (each a Problem, see
// errors.As), exactly the specs Lint would report on their own: a gate that
// cannot fail never compiles, whether or not `hg haygent check` ran.
// Duplicate ids are a property of a set of gates; only Lint sees them.
func Compile(spec Spec) (*Gate, error) {
	g, probs := compile(spec, spec.ID)
	if len(probs) > 0 {
		errs := make([]error, len(probs))
		for i, p := range probs {
			errs[i] = p
		}
		return nil, errors.Join(errs...)
	}
	return g, nil
}
