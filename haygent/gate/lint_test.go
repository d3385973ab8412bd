package gate

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLintPredicates(t *testing.T) {
	tests := []struct {
		predicate string
		problem   string // "" for none
	}{
		// Gates that cannot fail.
		{"true", "constant: reads no variable"},
		{"1 == 1", "constant: reads no variable"},
		{"!false", "constant: reads no variable"},
		{"'a' in ['a', 'b']", "constant: reads no variable"},
		{"ev.x == ev.x || true", "can never be false"},
		{"ev.total > 0 || !false", "can never be false"},
		{"ev.total > 0 || 1 == 1", "can never be false"},
		{"true || ev.total > 0", "can never be false"},
		{"!(ev.failed > 0 && false)", "can never be false"},
		{"ev.failed == 0 ? true : true", "can never be false"},
		{"ev.x == ev.x", "can never be false"},
		{"ev.a.b >= ev.a.b", "can never be false"},
		{"ev.cases[0] == ev.cases[0]", "can never be false"},
		{"ev.x + 0 == ev.x", "no probe makes it false"},
		{"[1, 2].all(x, x > 0)", "never reads ev"},
		{"[1].all(ev, ev > 0)", "never reads ev"},
		// Gates that cannot pass.
		{"false && ev.ok", "can never be true"},
		{"ev.x != ev.x", "can never be true"},
		{"ev.total > 0 && 1 == 2", "can never be true"},
		// Not predicates.
		{"", "predicate: missing"},
		{"ev.total >", "does not compile"},
		{"ev.total", ""}, // dyn: checked at evaluation
		{"ev.total + 1", "has type int, want bool"},
		{"other.code == 0", "undeclared reference to 'other'"},
		{"now() > ev.at", "does not compile"},
		{strings.Repeat("ev.a && ", 600) + "ev.a", "does not compile"},

		// Legitimate gates: never reported.
		{"ev.total > 0 && ev.failed == 0", ""},
		{"ev.code == 0", ""},
		{"ev.digest == ev.expected", ""},
		{"size(ev.problems) == 0", ""},
		{"!(ev.failed > 0)", ""},
		{"ev.approved", ""},
		{"ev.approved == true", ""},
		{"true && ev.approved", ""},
		{"ev.status == 'approved' && ev.by != ''", ""},
		{"has(ev.signature) && ev.signature != b''", ""},
		{"ev.cases.all(c, c.status == 'pass')", ""},
		{"ev.cases.exists(c, c.status == 'fail') == false", ""},
		{"ev.total > 0 ? ev.failed == 0 : false", ""},
		{"ev.items.all(ev, ev > 0)", ""}, // the range reads the outer ev
		{"double(ev.x) == double(ev.x)", ""},
		{"ev.failed == 0 || ev.allowed_failures >= ev.failed", ""},
		{"ev.path.startsWith('out/') && ev.path.matches('^[a-z/]+$')", ""},
	}
	for _, tt := range tests {
		t.Run(tt.predicate, func(t *testing.T) {
			s := testPass()
			s.Predicate = tt.predicate
			probs := Lint([]Spec{s})
			if tt.problem == "" {
				if len(probs) != 0 {
					t.Fatalf("unexpected problems: %v", probs)
				}
				if _, err := Compile(s); err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if len(probs) != 1 || probs[0].Gate != "TEST_PASS" || !strings.HasPrefix(probs[0].Message, "predicate: ") || !strings.Contains(probs[0].Message, tt.problem) {
				t.Fatalf("got %v, want one predicate problem containing %q", probs, tt.problem)
			}
			if strings.Contains(probs[0].Message, "\n") {
				t.Errorf("message spans lines: %q", probs[0].Message)
			}
			if _, err := Compile(s); err == nil {
				t.Fatal("Compile accepted what Lint reports")
			}
		})
	}
}

func TestLintSpecs(t *testing.T) {
	mod := func(f func(*Spec)) []Spec {
		s := testPass()
		f(&s)
		return []Spec{s}
	}
	tests := []struct {
		name  string
		specs []Spec
		want  []Problem
	}{
		{"clean", mod(func(*Spec) {}), nil},
		{"no gates", nil, []Problem{{"", "gates: no gates: a Haygent must declare at least one gate"}}},
		{"missing on_missing", mod(func(s *Spec) { s.OnMissing = "" }),
			[]Problem{{"TEST_PASS", `on_missing: not declared; every gate must say "fail" or "halt" for missing evidence`}}},
		{"every rule missing", mod(func(s *Spec) {
			s.OnMissing, s.OnStale, s.OnInvalid, s.OnContradictory, s.OnTimeout = "", "", "", "", ""
		}),
			[]Problem{
				{"TEST_PASS", `on_missing: not declared; every gate must say "fail" or "halt" for missing evidence`},
				{"TEST_PASS", `on_stale: not declared; every gate must say "fail" or "halt" for stale evidence`},
				{"TEST_PASS", `on_invalid: not declared; every gate must say "fail" or "halt" for invalid evidence`},
				{"TEST_PASS", `on_contradictory: not declared; every gate must say "fail" or "halt" for contradictory evidence`},
				{"TEST_PASS", `on_timeout: not declared; every gate must say "fail" or "halt" for evidence of a run that timed out`},
			}},
		{"unknown rule", mod(func(s *Spec) { s.OnStale = "retry" }),
			[]Problem{{"TEST_PASS", `on_stale: unknown value "retry"; want "fail" or "halt"`}}},
		{"pass is not a rule", mod(func(s *Spec) { s.OnTimeout = "pass" }),
			[]Problem{{"TEST_PASS", `on_timeout: unknown value "pass"; want "fail" or "halt"`}}},
		{"unknown kind", mod(func(s *Spec) { s.Evidence = "vibes" }),
			[]Problem{{"TEST_PASS", `evidence: unknown evidence kind "vibes"; known: exit, test_report, digest, file, read, mutation, http, approval`}}},
		{"missing kind", mod(func(s *Spec) { s.Evidence = "" }),
			[]Problem{{"TEST_PASS", `evidence: missing`}}},
		{"negative max_age", mod(func(s *Spec) { s.MaxAge = "-1m" }),
			[]Problem{{"TEST_PASS", `max_age: "-1m" is negative`}}},
		{"zero max_age", mod(func(s *Spec) { s.MaxAge = "0s" }),
			[]Problem{{"TEST_PASS", `max_age: "0s" is zero; omit max_age for no age limit`}}},
		{"unparseable max_age", mod(func(s *Spec) { s.MaxAge = "10 minutes" }),
			[]Problem{{"TEST_PASS", `max_age: "10 minutes" is not a Go duration (e.g. "10m", "1h30m")`}}},
		{"missing id", mod(func(s *Spec) { s.ID = "" }),
			[]Problem{{"gates[0]", "id: missing"}}},
		{"bad id", mod(func(s *Spec) { s.ID = "TEST PASS" }),
			[]Problem{{"TEST PASS", `id: "TEST PASS" holds ' '; use letters, digits, '_', '-', '.'`}}},
		{"duplicate ids", []Spec{testPass(), func() Spec { s := testPass(); s.ID = "OTHER"; return s }(), testPass()},
			[]Problem{{"TEST_PASS", `id: duplicate: gates[0] and gates[2] are both "TEST_PASS"`}}},
		{"contradiction: unknown kind", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{Evidence: "rumour", Predicate: "other.code != 0"}}
		}), []Problem{{"TEST_PASS", `contradicts[0].evidence: unknown evidence kind "rumour"; known: exit, test_report, digest, file, read, mutation, http, approval`}}},
		{"contradiction: never reads other", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{Evidence: KindExit, Predicate: "ev.failed == 0"}}
		}), []Problem{{"TEST_PASS", `contradicts[0].predicate: never reads other, so it says nothing about the exit evidence`}}},
		{"contradiction: can never hold", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{Evidence: KindExit, Predicate: "other.code != 0 && false"}}
		}), []Problem{{"TEST_PASS", `contradicts[0].predicate: can never be true, so it never detects a contradiction`}}},
		{"contradiction: not bool", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{Evidence: KindExit, Predicate: "other.code"}, {Evidence: KindExit, Predicate: "other.code + 1"}}
		}), []Problem{{"TEST_PASS", `contradicts[1].predicate: has type int, want bool`}}},
		{"contradiction: missing", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{}}
		}), []Problem{{"TEST_PASS", `contradicts[0].evidence: missing`}, {"TEST_PASS", `contradicts[0].predicate: missing`}}},
		{"contradiction: fine", mod(func(s *Spec) {
			s.Contradicts = []Contradiction{{Evidence: KindExit, Subject: "step:test", Predicate: "ev.failed == 0 && other.code != 0"}}
		}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Lint(tt.specs)
			if len(got) != len(tt.want) {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("problem %d:\ngot  %q\nwant %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestCompileErrorsAreProblems(t *testing.T) {
	s := testPass()
	s.OnMissing = ""
	s.Predicate = "true"
	_, err := Compile(s)
	var p Problem
	if !errors.As(err, &p) || p.Gate != "TEST_PASS" {
		t.Fatalf("got %v", err)
	}
	if got := err.Error(); got != "gate TEST_PASS: predicate: constant: reads no variable, so it cannot depend on evidence\n"+
		`gate TEST_PASS: on_missing: not declared; every gate must say "fail" or "halt" for missing evidence` {
		t.Fatalf("got %q", got)
	}
}

func TestRequiredFields(t *testing.T) {
	tests := []struct {
		predicate string
		want      []string
	}{
		{"ev.total > 0 && ev.failed == 0", []string{"failed", "total"}},
		{"ev['failed'] == 0 || ev.waived", []string{"failed", "waived"}},
		{"has(ev.failed) ? ev.failed == 0 : ev.waived", []string{"waived"}},
		{"'failed' in ev && ev.failed == 0", nil},
		{"ev.summary.failed == 0", []string{"summary"}},
		{"ev.cases.all(c, c.ok && ev.strict)", []string{"cases", "strict"}},
		{"ev.cases.all(ev, ev.ok)", []string{"cases"}},
		{"size(ev) > 0 && ev[ev.key] == 1", []string{"key"}},
	}
	es, err := celEnvs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		c, err := compileExpr(es.pred, tt.predicate, "ev")
		if err != nil {
			t.Fatalf("%s: %v", tt.predicate, err)
		}
		if got := c.needs["ev"]; !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.predicate, got, tt.want)
		}
	}
}
