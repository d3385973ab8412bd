package gate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/haygent/evidence"
)

// probeSpec is a gate on evidence of kind with predicate pred, every rule
// declared.
func probeSpec(kind, pred string) Spec {
	return withRules(Spec{ID: "G", Evidence: kind, Subject: "step:s", Predicate: pred})
}

// TestLintRefusesGatesNoProbeFails: predicates that are true for every
// value the evidence can hold, written so that no rule about their shape
// sees it. Each is refused by Lint and by Compile, and the problem names
// probes it tried.
func TestLintRefusesGatesNoProbeFails(t *testing.T) {
	tests := []struct{ kind, pred string }{
		// p || !p, over a bool field.
		{KindTestReport, "ev.ok || !ev.ok"},
		{KindTestReport, "ev.ok == true || ev.ok == false"},
		// Numbers on both sides of a constant.
		{KindTestReport, "ev.failed >= 0 || ev.failed < 0"},
		{KindTestReport, "ev.failed == 0 || ev.failed != 0"},
		{KindExit, "ev.code > 0 || ev.code <= 0"},
		{KindExit, "ev.code < 5 || ev.code >= 5"},
		{KindExit, "!(ev.code != 0 && ev.code == 0)"},
		{KindExit, "double(ev.code) >= 0.0 || double(ev.code) < 0.0"},
		{KindExit, "ev.duration_ms * 0 == 0"},
		// Overflow is an error (INVALID), never false.
		{KindTestReport, "ev.failed + 1 > ev.failed"},
		// Sizes are never negative.
		{KindTestReport, "size(ev.problems) >= 0"},
		{KindExit, "size(ev.stdout) >= 0 && size(ev.argv) >= 0"},
		// Lists: empty or not.
		{KindTestReport, "ev.failed_cases.exists(c, true) || size(ev.failed_cases) == 0"},
		{KindExit, "ev.argv.all(a, a == a)"},
		// Strings: empty or not.
		{KindExit, "ev.stdout == '' || ev.stdout != ''"},
		{KindApproval, "ev.decision.startsWith('') && ev.valid == ev.valid"},
		{KindApproval, "timestamp(ev.expires_at) >= timestamp(ev.expires_at)"},
		// A field present or absent.
		{KindFile, "has(ev.path) || !has(ev.path)"},
		{KindFile, "!has(ev.mode) || size(ev.mode) >= 0"},
		// Fields no kind defines: any value.
		{KindFile, "ev.x + 0 == ev.x"},
		{KindHTTP, "ev.status >= 0 || ev.status < 0"},
		// A timed-out run is TIMEOUT before the predicate is read, so a
		// predicate false only then never fails the gate.
		{KindExit, "!ev.timed_out"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+": "+tt.pred, func(t *testing.T) {
			s := probeSpec(tt.kind, tt.pred)
			probs := Lint([]Spec{s})
			if len(probs) != 1 || probs[0].Gate != "G" {
				t.Fatalf("Lint = %q, want one problem", probs)
			}
			msg := probs[0].Message
			if !strings.HasPrefix(msg, "predicate: no probe makes it false, so the gate cannot fail: ") {
				t.Fatalf("problem %q", msg)
			}
			if !regexp.MustCompile(`: tried [0-9]+ values of ev, varying ev\.[a-z_]+`).MatchString(msg) || !strings.Contains(msg, `, among them {`) {
				t.Errorf("problem does not name the probes: %q", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("problem spans lines: %q", msg)
			}
			if _, err := Compile(s); err == nil || !strings.Contains(err.Error(), "no probe makes it false") {
				t.Fatalf("Compile = %v, want the same refusal", err)
			}
		})
	}
}

// TestLintProbeStillRefusesPlainForms: what the shape rules refused
// before the probes is refused still, with their message.
func TestLintProbeStillRefusesPlainForms(t *testing.T) {
	for _, pred := range []string{"size(ev.problems) >= 0 || true", "ev.failed == ev.failed", "true"} {
		probs := Lint([]Spec{probeSpec(KindTestReport, pred)})
		if len(probs) != 1 || !strings.Contains(probs[0].Message, "cannot") {
			t.Errorf("%s: Lint = %q, want one refusal", pred, probs)
		}
	}
}

// TestLintProbeAcceptsGatesThatCanFail: gates that some evidence fails,
// among them gates false only at a constant's neighbour, a regular
// expression's match, a timestamp, a length, a product of constants or a
// nested field. None is refused.
func TestLintProbeAcceptsGatesThatCanFail(t *testing.T) {
	tests := []struct{ kind, pred string }{
		{KindTestReport, "ev.total > 0 && ev.failed == 0 && size(ev.problems) == 0"},
		{KindTestReport, "ev.total > 0 && ev.failed == 0"},
		{KindTestReport, "ev.ok"},
		{KindTestReport, "ev.total >= ev.failed"}, // true of every real report, not of every value
		{KindTestReport, "ev.failed_cases.all(c, !c.startsWith('TestFlaky'))"},
		{KindTestReport, "ev.failed < 1000"},
		{KindTestReport, "ev.failed != 1000"},
		{KindTestReport, "ev.skipped <= 3 || ev.total > 100"},
		{KindExit, "ev.code == 0"},
		{KindExit, "ev.code == 0 || ev.signal == 'SIGPIPE'"},
		{KindExit, "!ev.stdout_truncated"},
		{KindExit, "!ev.stdout.matches('^FAIL')"},
		{KindExit, "!ev.stdout.matches('panic: [a-z]+ error')"},
		{KindExit, "!ev.stderr.contains('DATA RACE')"},
		{KindExit, "ev.duration_ms < 60000"},
		{KindExit, "ev.argv[0] == 'go'"},
		{KindExit, "size(ev.argv) != 3"},
		{KindExit, "ev.code / 2 != 3"},
		{KindExit, "ev.code == 0 && !ev.timed_out"},
		{KindExit, "'landlock' in ev.isolation"},
		{KindExit, `ev.stdout.matches('^ok\\s')`},
		{KindExit, "!ev.stdout.matches('(?i)fail')"},
		{KindExit, "!ev.stderr.matches('[^a-z]')"},
		{KindExit, "uint(ev.code) == 0u"},
		{KindExit, "size(ev.stdout) < 60000"},
		{KindExit, "size(ev.stdout) < 100000"}, // past the longest probe: not probed, so never refused
		{KindTestReport, "ev.failed * 100 <= ev.total * 5"},
		{KindTestReport, "ev.total == ev.passed + ev.skipped"},
		{KindTestReport, "ev.problems.all(p, !p.contains('build failed'))"},
		{KindTestReport, "ev.total > 0 ? ev.failed == 0 : true"},
		{KindFile, "ev.env[ev.key] != 'x'"}, // a computed key: not probed
		{KindDigest, "ev.equal == true"},
		{KindDigest, "size(ev.sha256) == 64"},
		{KindDigest, "ev.input == ev.output && ev.size > 0"},
		{KindDigest, "has(ev.size) ? ev.size > 0 : false"},
		{KindRead, "ev.size > 0"},
		{KindMutation, "ev.after != ''"},
		{KindApproval, "ev.valid == true"},
		{KindApproval, "ev.decision in ['approve']"},
		{KindApproval, "!(ev.decision in ['reject', 'defer'])"},
		{KindApproval, "timestamp(ev.expires_at) > timestamp('2030-01-01T00:00:00Z')"},
		{KindApproval, "timestamp(ev.expires_at) - timestamp(ev.issued_at) <= duration('1h')"},
		// Fields no kind defines, nested fields, lists of maps.
		{KindFile, "ev.mode == 420"},
		{KindFile, "ev.summary.failed == 0"},
		{KindFile, "ev.cases.exists(c, c.status == 'fail') == false"},
		{KindFile, "ev.items.all(ev, ev > 0)"},
		{KindFile, "ev.failed == 0 || ev.allowed_failures >= ev.failed"},
		{KindFile, "double(ev.x) == double(ev.x)"}, // "NaN"
		{KindHTTP, "ev.headers['content-type'] == 'application/json'"},
		{KindHTTP, "ev.status / 100 == 2"},
		{KindHTTP, "ev.ratio * 2.0 != 7.0"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+": "+tt.pred, func(t *testing.T) {
			s := probeSpec(tt.kind, tt.pred)
			if probs := Lint([]Spec{s}); len(probs) != 0 {
				t.Fatalf("Lint = %q", probs)
			}
			if _, err := Compile(s); err != nil {
				t.Fatalf("Compile: %v", err)
			}
			// Accepted because a probe failed it, not for want of trying,
			// save where the predicate is not probed.
			res := probe(probeGate(t, s))
			notProbed := strings.Contains(tt.pred, "100000") || strings.Contains(tt.pred, "[ev.key]")
			if res.skipped != notProbed || !notProbed && !res.failed {
				t.Errorf("probe: skipped %v, failed %v after %d probes", res.skipped, res.failed, res.count)
			}
		})
	}
}

// probeGate is the gate probe is given for s.
func probeGate(t *testing.T, s Spec) *Gate {
	t.Helper()
	es, err := celEnvs()
	if err != nil {
		t.Fatal(err)
	}
	c, err := compileExpr(es.pred, s.Predicate, "ev")
	if err != nil {
		t.Fatal(err)
	}
	return &Gate{spec: s, pred: c}
}

// TestLintProbeUsesTheKindsFields: a field's type comes from the kind of
// evidence the gate reads. ok is a bool in a test report, so `ev.ok ==
// true || ev.ok == false` cannot fail there; a file evidence defines no
// ok, so there it may be any value, and 0 makes the predicate false.
func TestLintProbeUsesTheKindsFields(t *testing.T) {
	pred := "ev.ok == true || ev.ok == false"
	if probs := Lint([]Spec{probeSpec(KindTestReport, pred)}); len(probs) != 1 {
		t.Errorf("test_report: Lint = %q, want a refusal", probs)
	}
	if probs := Lint([]Spec{probeSpec(KindFile, pred)}); len(probs) != 0 {
		t.Errorf("file: Lint = %q, want none", probs)
	}
}

// TestLintProbeNamesBoundaries: the refusal names probes at the field's
// boundaries: zero, one, minus one, the constant compared against and a
// large value are among those tried.
func TestLintProbeNamesBoundaries(t *testing.T) {
	res := probe(probeGate(t, probeSpec(KindTestReport, "ev.failed >= 7 || ev.failed < 7")))
	if res.failed {
		t.Fatal("a probe failed a gate that cannot fail")
	}
	var seen []int64
	for _, p := range res.tried {
		if v, ok := p["failed"].(int64); ok {
			seen = append(seen, v)
		}
	}
	for _, want := range []int64{0, 1, -1, 6, 7, 8, 1<<63 - 1, -1 << 63} {
		if !slices.Contains(seen, want) {
			t.Errorf("no probe with failed = %d (tried %v)", want, seen)
		}
	}
	if res.count > maxProbes {
		t.Errorf("%d probes, over the bound %d", res.count, maxProbes)
	}
}

// TestLintProbeIsBounded: a tautology over many fields is refused after at
// most maxProbes evaluations, and quickly.
func TestLintProbeIsBounded(t *testing.T) {
	var parts []string
	for i := range 40 {
		parts = append(parts, fmt.Sprintf("(ev.f%d == 0 || ev.f%d != 0)", i, i))
	}
	s := probeSpec(KindFile, strings.Join(parts, " && "))
	start := time.Now()
	probs := Lint([]Spec{s})
	took := time.Since(start)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "no probe makes it false") {
		t.Fatalf("Lint = %q", probs)
	}
	m := regexp.MustCompile(`tried ([0-9]+) values`).FindStringSubmatch(probs[0].Message)
	var n int
	if m == nil {
		t.Fatalf("no count in %q", probs[0].Message)
	}
	fmt.Sscan(m[1], &n)
	if n > maxProbes || n < 100 {
		t.Errorf("tried %d probes, want 100 to %d", n, maxProbes)
	}
	if took > 5*time.Second {
		t.Errorf("Lint took %v", took)
	}
}

// TestProbeFieldsMatchTestReport: the fields the lint gives test_report
// evidence, and their types, are those evidence.TestReport.Data holds.
func TestProbeFieldsMatchTestReport(t *testing.T) {
	data := (&evidence.TestReport{Format: "tap", Problems: []string{"p"}}).Data()
	want := kindFields[KindTestReport]
	for f, v := range data {
		typ, ok := want[f]
		if !ok {
			t.Errorf("field %q of a test report is not in kindFields", f)
			continue
		}
		if got := dataType(v); got != typ {
			t.Errorf("field %q: kindFields says %s, the report holds %s", f, typ, got)
		}
	}
	for f := range want {
		if _, ok := data[f]; !ok {
			t.Errorf("kindFields lists %q, which a test report lacks", f)
		}
	}
}

// dataType names the type of a Data value as kindFields does.
func dataType(v any) string {
	switch x := v.(type) {
	case bool:
		return typeBool
	case int64:
		return typeInt
	case string:
		return typeString
	case []any:
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return "list of mixed"
			}
		}
		return typeStrings
	}
	return fmt.Sprintf("%T", v)
}
