package gate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// rules gives every on_* rule: halt for contradictions, fail for the rest.
func withRules(s Spec) Spec {
	s.OnMissing, s.OnStale, s.OnInvalid, s.OnContradictory, s.OnTimeout = "fail", "fail", "fail", "halt", "fail"
	return s
}

func mustCompile(t testing.TB, s Spec) *Gate {
	t.Helper()
	g, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return g
}

func testPass() Spec {
	return withRules(Spec{
		ID: "TEST_PASS", Evidence: KindTestReport, Subject: "step:test",
		Predicate: "ev.total > 0 && ev.failed == 0",
		MaxAge:    "10m",
	})
}

func report(ref string, at time.Time, data map[string]any) Evidence {
	return Evidence{Ref: ref, Kind: KindTestReport, Subject: "step:test", ObservedAt: at, Data: data}
}

func exit(ref string, at time.Time, code int64) Evidence {
	return Evidence{Ref: ref, Kind: KindExit, Subject: "step:test", ObservedAt: at, Data: map[string]any{"code": code}}
}

func TestEvaluate(t *testing.T) {
	now := t0.Add(time.Minute)
	env := Env{Now: now}
	ok := map[string]any{"total": int64(12), "failed": int64(0)}

	digestGate := withRules(Spec{
		ID: "DIGEST", Evidence: KindDigest, Subject: "file:out/app",
		Predicate: "ev.digest == ev.expected",
		Contradicts: []Contradiction{
			{Evidence: KindFile, Predicate: "other.digest != ev.digest"},
		},
	})
	digest := func(ref string, d, want string) Evidence {
		return Evidence{Ref: ref, Kind: KindDigest, Subject: "file:out/app", ObservedAt: t0, Data: map[string]any{"digest": d, "expected": want}}
	}
	fileEv := func(ref string, data map[string]any) Evidence {
		return Evidence{Ref: ref, Kind: KindFile, Subject: "file:out/app", ObservedAt: t0, Data: data}
	}

	tests := []struct {
		name     string
		spec     Spec
		evidence []Evidence
		env      Env
		verdict  Verdict
		action   string
		read     []string
		reason   string // substring
	}{
		{name: "pass", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1"}},
		{name: "pass with a zero exit beside it", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), exit("x1", t0, 0)}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1", "x1"}},
		{name: "numbers as float64 compare with int literals", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": 3.0, "failed": 0.0})}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1"}},

		// FAIL
		{name: "fail: tests failed", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12), "failed": int64(2)})}, env: env,
			verdict: Fail, action: "fail", read: []string{"r1"}},
		{name: "fail: a report of zero tests is not a pass", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(0), "failed": int64(0)})}, env: env,
			verdict: Fail, action: "fail", read: []string{"r1"}},
		{name: "fail: a crash with failures reported is a failure, not a contradiction", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12), "failed": int64(3)}), exit("x1", t0, 1)}, env: env,
			verdict: Fail, action: "fail", read: []string{"r1", "x1"}},

		// Selection.
		{name: "the latest report decides", spec: testPass(),
			evidence: []Evidence{
				report("new", t0.Add(time.Second), map[string]any{"total": int64(12), "failed": int64(1)}),
				report("old", t0, ok),
			}, env: env,
			verdict: Fail, action: "fail", read: []string{"new"}},
		{name: "a tie goes to the later in the slice", spec: testPass(),
			evidence: []Evidence{
				report("first", t0, map[string]any{"total": int64(12), "failed": int64(1)}),
				report("second", t0, ok),
			}, env: env,
			verdict: Pass, action: "pass", read: []string{"second"}},
		{name: "without a subject any subject counts", spec: func() Spec { s := testPass(); s.Subject = ""; return s }(),
			evidence: []Evidence{
				{Ref: "a", Kind: KindTestReport, Subject: "step:a", ObservedAt: t0, Data: map[string]any{"total": int64(1), "failed": int64(1)}},
				{Ref: "b", Kind: KindTestReport, Subject: "step:b", ObservedAt: t0.Add(time.Second), Data: ok},
			}, env: env,
			verdict: Pass, action: "pass", read: []string{"b"}},

		// MISSING
		{name: "missing: no evidence", spec: testPass(), env: env,
			verdict: Missing, action: "fail", reason: "no test_report evidence for step:test"},
		{name: "missing: only other kinds and subjects", spec: testPass(),
			evidence: []Evidence{
				exit("x1", t0, 0),
				{Ref: "r9", Kind: KindTestReport, Subject: "step:lint", ObservedAt: t0, Data: ok},
			}, env: env,
			verdict: Missing, action: "fail"},
		{name: "missing: the rule is the gate's", spec: func() Spec { s := testPass(); s.OnMissing = "halt"; return s }(), env: env,
			verdict: Missing, action: "halt"},

		// STALE
		{name: "stale: max_age exceeded", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)}, env: Env{Now: t0.Add(10*time.Minute + time.Nanosecond)},
			verdict: Stale, action: "fail", read: []string{"r1"}, reason: "max_age 10m0s"},
		{name: "fresh at exactly max_age", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)}, env: Env{Now: t0.Add(10 * time.Minute)},
			verdict: Pass, action: "pass", read: []string{"r1"}},
		{name: "stale: observed before the subject last changed", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)},
			env:      Env{Now: now, LastChange: map[string]time.Time{"step:test": t0.Add(time.Second)}},
			verdict:  Stale, action: "fail", read: []string{"r1"}, reason: "before step:test last changed"},
		{name: "not stale: observed at the instant of the change", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)},
			env:      Env{Now: now, LastChange: map[string]time.Time{"step:test": t0}},
			verdict:  Pass, action: "pass", read: []string{"r1"}},
		{name: "not stale: a change to another subject", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)},
			env:      Env{Now: now, LastChange: map[string]time.Time{"file:main.go": now}},
			verdict:  Pass, action: "pass", read: []string{"r1"}},
		{name: "stale: max_age without Env.Now", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok)}, env: Env{},
			verdict: Stale, action: "fail", read: []string{"r1"}, reason: "Env.Now"},

		// TIMEOUT
		{name: "timeout", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12), "failed": int64(0), "timed_out": true})}, env: env,
			verdict: Timeout, action: "fail", read: []string{"r1"}},
		{name: "timed_out false is no timeout", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12), "failed": int64(0), "timed_out": false})}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1"}},
		{name: "invalid: timed_out that is not a bool", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12), "failed": int64(0), "timed_out": "no"})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: "timed_out is string"},
		{name: "stale wins over timeout", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"timed_out": true})}, env: Env{Now: t0.Add(time.Hour)},
			verdict: Stale, action: "fail", read: []string{"r1"}},

		// CONTRADICTORY
		{name: "contradictory: zero failures beside a non-zero exit", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), exit("x1", t0, 2)}, env: env,
			verdict: Contradictory, action: "halt", read: []string{"r1", "x1"}, reason: "code 2"},
		{name: "contradictory: the latest exit counts", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), exit("x2", t0.Add(time.Second), 1), exit("x1", t0, 0)}, env: env,
			verdict: Contradictory, action: "halt", read: []string{"r1", "x2"}},
		{name: "contradictory: exit code as float64", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), {Ref: "x1", Kind: KindExit, Subject: "step:test", ObservedAt: t0, Data: map[string]any{"code": 1.0}}}, env: env,
			verdict: Contradictory, action: "halt", read: []string{"r1", "x1"}},
		{name: "an exit for another subject does not contradict", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), {Ref: "x1", Kind: KindExit, Subject: "step:build", ObservedAt: t0, Data: map[string]any{"code": int64(1)}}}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1"}},
		{name: "invalid: an exit without a code", spec: testPass(),
			evidence: []Evidence{report("r1", t0, ok), {Ref: "x1", Kind: KindExit, Subject: "step:test", ObservedAt: t0, Data: map[string]any{}}}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1", "x1"}, reason: "code is missing"},
		{name: "contradictory: a declared rule", spec: func() Spec {
			s := testPass()
			s.Contradicts = []Contradiction{{Evidence: KindExit, Subject: "step:test", Predicate: "ev.failed == 0 && other.code != 0"}}
			return s
		}(),
			evidence: []Evidence{report("r1", t0, ok), exit("x1", t0, 3)}, env: env,
			verdict: Contradictory, action: "halt", read: []string{"r1", "x1"}},
		{name: "contradictory: a rule without subject uses the gate evidence's subject", spec: digestGate,
			evidence: []Evidence{digest("d1", "abc", "abc"), fileEv("f1", map[string]any{"digest": "xyz"})}, env: env,
			verdict: Contradictory, action: "halt", read: []string{"d1", "f1"}, reason: "contradicts[0]"},
		{name: "a rule that does not hold", spec: digestGate,
			evidence: []Evidence{digest("d1", "abc", "abc"), fileEv("f1", map[string]any{"digest": "abc"})}, env: env,
			verdict: Pass, action: "pass", read: []string{"d1", "f1"}},
		{name: "a rule whose evidence is absent", spec: digestGate,
			evidence: []Evidence{digest("d1", "abc", "abc")}, env: env,
			verdict: Pass, action: "pass", read: []string{"d1"}},
		{name: "invalid: a rule that cannot be evaluated", spec: digestGate,
			evidence: []Evidence{digest("d1", "abc", "abc"), fileEv("f1", map[string]any{"size": int64(3)})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"d1", "f1"}, reason: `file evidence f1 lacks field "digest", which the rule reads`},
		{name: "invalid: a rule that fails to evaluate", spec: func() Spec {
			s := testPass()
			s.Contradicts = []Contradiction{{Evidence: KindFile, Subject: "file:junit.xml", Predicate: "other.size > 10"}}
			return s
		}(),
			evidence: []Evidence{report("r1", t0, ok), {Ref: "f1", Kind: KindFile, Subject: "file:junit.xml", ObservedAt: t0, Data: map[string]any{"size": "big"}}}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1", "f1"}, reason: "contradicts[0]: file evidence f1: no such overload"},
		{name: "invalid: other evidence outside the data model", spec: digestGate,
			evidence: []Evidence{digest("d1", "abc", "abc"), fileEv("f1", map[string]any{"digest": 7})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"d1", "f1"}, reason: "int is not in the evidence data model"},
		{name: "a contradiction wins over a rule that cannot be evaluated", spec: func() Spec {
			s := testPass()
			s.Contradicts = []Contradiction{{Evidence: KindHTTP, Predicate: "other.status != 200"}}
			return s
		}(),
			evidence: []Evidence{report("r1", t0, ok), {Ref: "h1", Kind: KindHTTP, Subject: "step:test", ObservedAt: t0, Data: map[string]any{}}, exit("x1", t0, 1)},
			env:      env,
			verdict:  Contradictory, action: "halt", read: []string{"r1", "x1", "h1"}},
		{name: "timeout wins over contradiction", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(1), "failed": int64(0), "timed_out": true}), exit("x1", t0, 1)}, env: env,
			verdict: Timeout, action: "fail", read: []string{"r1"}},

		// INVALID
		{name: "invalid: data lacks a field the predicate reads", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(12)})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `test_report evidence r1 lacks field "failed", which the predicate reads`},
		{name: "invalid: a missing field is not absorbed by ||",
			spec:     withRules(Spec{ID: "WAIVED", Evidence: KindTestReport, Predicate: "ev.failed == 0 || ev.waived"}),
			evidence: []Evidence{report("r1", t0, map[string]any{"waived": true})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `lacks field "failed"`},
		{name: "a field tested with has() may be absent",
			spec:     withRules(Spec{ID: "WAIVED", Evidence: KindTestReport, Predicate: "has(ev.failed) ? ev.failed == 0 : ev.waived"}),
			evidence: []Evidence{report("r1", t0, map[string]any{"waived": true})}, env: env,
			verdict: Pass, action: "pass", read: []string{"r1"}},
		{name: "a field tested with in may be absent",
			spec:     withRules(Spec{ID: "IN", Evidence: KindTestReport, Predicate: "'failed' in ev && ev['failed'] == 0"}),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(1)})}, env: env,
			verdict: Fail, action: "fail", read: []string{"r1"}},
		{name: "invalid: a nested field that is missing",
			spec:     withRules(Spec{ID: "NESTED", Evidence: KindTestReport, Predicate: "ev.summary.failed == 0"}),
			evidence: []Evidence{report("r1", t0, map[string]any{"summary": map[string]any{}})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: "no such key: failed"},
		{name: "invalid: nil data", spec: testPass(),
			evidence: []Evidence{report("r1", t0, nil)}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `lacks field "failed"`},
		{name: "invalid: a field of the wrong type", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": "12", "failed": int64(0)})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: "no such overload"},
		{name: "invalid: a dyn predicate returning a non-bool",
			spec:     withRules(Spec{ID: "OK", Evidence: KindApproval, Predicate: "ev.approved"}),
			evidence: []Evidence{{Ref: "a1", Kind: KindApproval, ObservedAt: t0, Data: map[string]any{"approved": int64(1)}}}, env: env,
			verdict: Invalid, action: "fail", read: []string{"a1"}, reason: "not bool"},
		{name: "a dyn predicate returning true passes",
			spec:     withRules(Spec{ID: "OK", Evidence: KindApproval, Predicate: "ev.approved"}),
			evidence: []Evidence{{Ref: "a1", Kind: KindApproval, ObservedAt: t0, Data: map[string]any{"approved": true}}}, env: env,
			verdict: Pass, action: "pass", read: []string{"a1"}},
		{name: "invalid: NaN, which would make !(failed > 0) hold",
			spec:     withRules(Spec{ID: "NAN", Evidence: KindTestReport, Predicate: "!(ev.failed > 0)"}),
			evidence: []Evidence{report("r1", t0, map[string]any{"failed": math.NaN()})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `Data["failed"]: NaN is not a finite number`},
		{name: "invalid: a Go int is not in the data model", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": 12, "failed": int64(0)})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `Data["total"]: int`},
		{name: "invalid: deep in a list", spec: testPass(),
			evidence: []Evidence{report("r1", t0, map[string]any{"total": int64(1), "failed": int64(0), "cases": []any{map[string]any{"t": time.Second}}})}, env: env,
			verdict: Invalid, action: "fail", read: []string{"r1"}, reason: `Data["cases"][0]["t"]: time.Duration`},
		{name: "invalid: the rule is the gate's", spec: func() Spec { s := testPass(); s.OnInvalid = "halt"; return s }(),
			evidence: []Evidence{report("r1", t0, map[string]any{})}, env: env,
			verdict: Invalid, action: "halt", read: []string{"r1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustCompile(t, tt.spec)
			r := g.Evaluate(tt.evidence, tt.env)
			if r.Gate != tt.spec.ID || r.Verdict != tt.verdict || r.Action != tt.action || !slices.Equal(r.Read, tt.read) {
				t.Errorf("got %+v\nwant verdict %s, action %s, read %v", r, tt.verdict, tt.action, tt.read)
			}
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("reason %q does not contain %q", r.Reason, tt.reason)
			}
			if r.Reason == "" {
				t.Error("empty reason")
			}
		})
	}
}

func TestEvaluateCyclicData(t *testing.T) {
	g := mustCompile(t, testPass())
	m := map[string]any{"total": int64(1), "failed": int64(0)}
	m["self"] = m
	r := g.Evaluate([]Evidence{report("r1", t0, m)}, Env{Now: t0})
	if r.Verdict != Invalid || !strings.Contains(r.Reason, "nested deeper") {
		t.Fatalf("got %+v", r)
	}
}

func TestEvaluateCostIsBounded(t *testing.T) {
	g := mustCompile(t, withRules(Spec{ID: "QUADRATIC", Evidence: KindTestReport,
		Predicate: "ev.cases.all(a, ev.cases.all(b, a + b >= 0))"}))
	cases := make([]any, 5000) // 25 million inner steps without a limit
	for i := range cases {
		cases[i] = int64(i)
	}
	start := time.Now()
	r := g.Evaluate([]Evidence{report("r1", t0, map[string]any{"cases": cases})}, Env{Now: t0})
	if r.Verdict != Invalid || !strings.Contains(r.Reason, "cost limit") {
		t.Fatalf("got %+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("evaluation took %s", d)
	}

	// The same predicate over a small list is fine.
	r = g.Evaluate([]Evidence{report("r1", t0, map[string]any{"cases": cases[:100]})}, Env{Now: t0})
	if r.Verdict != Pass {
		t.Fatalf("got %+v", r)
	}
}

func TestEvaluateDoesNotChangeInput(t *testing.T) {
	g := mustCompile(t, testPass())
	ev := []Evidence{report("r1", t0, map[string]any{"total": int64(1), "failed": int64(0)}), exit("x1", t0, 0)}
	env := Env{Now: t0, LastChange: map[string]time.Time{"step:test": t0}}
	want := fmt.Sprint(ev, env)
	for range 3 {
		g.Evaluate(ev, env)
	}
	if got := fmt.Sprint(ev, env); got != want {
		t.Fatalf("input changed:\n%s\n%s", got, want)
	}
}

func TestCompileRejectsNonBool(t *testing.T) {
	for _, p := range []string{"ev.total + 1", "size(ev.problems)", "'ok'", "ev.name + 'x'", "[ev.ok]", "ev.total > 0 ? 1 : 0"} {
		s := testPass()
		s.Predicate = p
		g, err := Compile(s)
		if g != nil || err == nil {
			t.Errorf("%s: compiled", p)
			continue
		}
		if !strings.Contains(err.Error(), "want bool") {
			t.Errorf("%s: %v", p, err)
		}
	}
	// ev.total has type dyn: it compiles, and an int result is INVALID at
	// evaluation (see TestEvaluate).
	s := testPass()
	s.Predicate = "ev.total"
	if _, err := Compile(s); err != nil {
		t.Errorf("ev.total: %v", err)
	}
}

func TestCompileProblems(t *testing.T) {
	s := testPass()
	s.Predicate = "1 + 1"
	s.OnMissing = ""
	_, err := Compile(s)
	if err == nil {
		t.Fatal("compiled")
	}
	msg := err.Error()
	for _, want := range []string{"gate TEST_PASS: predicate: has type int, want bool", "gate TEST_PASS: on_missing: not declared"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not contain %q", msg, want)
		}
	}
}

func TestCompileOtherOnlyInContradictions(t *testing.T) {
	s := testPass()
	s.Predicate = "ev.failed == 0 && other.code == 0"
	if _, err := Compile(s); err == nil || !strings.Contains(err.Error(), "undeclared reference to 'other'") {
		t.Fatalf("got %v", err)
	}
}

func TestGateSpec(t *testing.T) {
	s := testPass()
	s.Contradicts = []Contradiction{{Evidence: KindExit, Predicate: "other.code != 0"}}
	g := mustCompile(t, s)
	s.Contradicts[0].Predicate = "changed"
	got := g.Spec()
	if g.ID() != "TEST_PASS" || got.Contradicts[0].Predicate != "other.code != 0" {
		t.Fatalf("got %+v", got)
	}
	got.Contradicts[0].Predicate = "changed again"
	if g.Spec().Contradicts[0].Predicate != "other.code != 0" {
		t.Fatal("Spec shares its slice with the gate")
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	g := mustCompile(t, testPass())
	env := Env{Now: t0.Add(time.Minute), LastChange: map[string]time.Time{"step:test": t0}}
	inputs := []struct {
		ev   []Evidence
		want Verdict
	}{
		{[]Evidence{report("r1", t0, map[string]any{"total": int64(5), "failed": int64(0)})}, Pass},
		{[]Evidence{report("r2", t0, map[string]any{"total": int64(5), "failed": int64(1)})}, Fail},
		{[]Evidence{report("r3", t0, map[string]any{"total": int64(5)})}, Invalid},
		{[]Evidence{report("r4", t0, map[string]any{"total": int64(5), "failed": int64(0)}), exit("x4", t0, 1)}, Contradictory},
		{[]Evidence{report("r5", t0.Add(-time.Second), map[string]any{"total": int64(5), "failed": int64(0)})}, Stale},
		{nil, Missing},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 32 {
		wg.Go(func() {
			for i := range 200 {
				in := inputs[(w+i)%len(inputs)]
				if r := g.Evaluate(in.ev, env); r.Verdict != in.want {
					select {
					case errs <- fmt.Sprintf("worker %d: got %s, want %s (%s)", w, r.Verdict, in.want, r.Reason):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	g := mustCompile(b, testPass())
	ev := []Evidence{report("r1", t0, map[string]any{"total": int64(5), "failed": int64(0)}), exit("x1", t0, 0)}
	env := Env{Now: t0}
	for b.Loop() {
		if r := g.Evaluate(ev, env); r.Verdict != Pass {
			b.Fatal(r)
		}
	}
}

func TestStaleAndInvalidMarks(t *testing.T) {
	g, err := Compile(Spec{ID: "T", Evidence: "test_report", Subject: "step:t", Predicate: "ev.failed == 0",
		OnMissing: "fail", OnStale: "fail", OnInvalid: "fail", OnContradictory: "halt", OnTimeout: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	ev := Evidence{Ref: "r1", Kind: "test_report", Subject: "step:t", Data: map[string]any{"failed": int64(0)}}
	if res := g.Evaluate([]Evidence{ev}, Env{}); res.Verdict != Pass {
		t.Fatalf("plain: %s %s", res.Verdict, res.Reason)
	}
	if res := g.Evaluate([]Evidence{ev}, Env{Stale: map[string]string{"r1": "main.go changed"}}); res.Verdict != Stale || !strings.Contains(res.Reason, "main.go changed") {
		t.Errorf("stale mark: %s %s", res.Verdict, res.Reason)
	}
	if res := g.Evaluate([]Evidence{ev}, Env{Stale: map[string]string{"r2": "other"}}); res.Verdict != Pass {
		t.Errorf("another evidence's mark: %s %s", res.Verdict, res.Reason)
	}
	ev.Data["invalid"] = "not written by the step"
	if res := g.Evaluate([]Evidence{ev}, Env{}); res.Verdict != Invalid || !strings.Contains(res.Reason, "not written by the step") {
		t.Errorf("invalid mark: %s %s", res.Verdict, res.Reason)
	}
}
