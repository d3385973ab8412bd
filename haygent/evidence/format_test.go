package evidence_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/haygent/evidence"
)

// caseNamed returns the kept case whose FullName is name.
func caseNamed(t *testing.T, r *evidence.TestReport, name string) evidence.Case {
	t.Helper()
	for _, c := range r.Cases {
		if c.FullName() == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return evidence.Case{}
}

func parseFixture(t *testing.T, name string) *evidence.TestReport {
	t.Helper()
	r, err := evidence.ParseTestReport(formatOf(name), bytes.NewReader(readFixture(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGoTestMessages(t *testing.T) {
	r := parseFixture(t, "gotest/mixed.json")
	c := caseNamed(t, r, "example.com/demo/mixed.TestFail")
	if !strings.Contains(c.Message, "got 1, want 2") || strings.Contains(c.Message, "=== RUN") || strings.Contains(c.Message, "--- FAIL") {
		t.Errorf("TestFail message %q", c.Message)
	}
	if c := caseNamed(t, r, "example.com/demo/mixed.TestSkip"); !strings.Contains(c.Message, "needs network") {
		t.Errorf("TestSkip message %q", c.Message)
	}
	if c := caseNamed(t, r, "example.com/demo/mixed.TestPass"); c.Message != "" || c.Duration != 10*time.Millisecond {
		t.Errorf("TestPass: message %q, duration %v", c.Message, c.Duration)
	}

	r = parseFixture(t, "gotest/panicky.json")
	if c := caseNamed(t, r, "example.com/demo/panicky.TestPanics"); !strings.Contains(c.Message, "panic: assignment to entry in nil map") {
		t.Errorf("TestPanics message %q", c.Message)
	}
	r = parseFixture(t, "gotest/timeout.json")
	if c := caseNamed(t, r, "example.com/demo/timeout.TestSlow"); !strings.Contains(c.Message, "panic: test timed out after 1s") {
		t.Errorf("TestSlow message %q", c.Message)
	}
	r = parseFixture(t, "gotest/build_fail.json")
	if c := caseNamed(t, r, "example.com/demo/broken (package)"); !strings.Contains(c.Message, "mismatched types int and untyped string") {
		t.Errorf("build failure message %q", c.Message)
	}
}

func TestGoTestCount(t *testing.T) {
	// go test -count=2: every run of a test is a case; benchmarks that
	// pass are not cases and are not reported as unfinished.
	r := parseFixture(t, "gotest/bench.json")
	n := 0
	for _, c := range r.Cases {
		if c.Name == "TestPar" {
			n++
		}
		if strings.HasPrefix(c.Name, "Benchmark") {
			t.Errorf("benchmark %q counted", c.Name)
		}
	}
	if n != 2 {
		t.Errorf("TestPar counted %d times, want 2", n)
	}
}

func TestGoTestEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		w        want
	}{
		{
			name: "build failure with no package event (stream cut after the build)",
			in: `{"ImportPath":"m/p [m/p.test]","Action":"build-output","Output":"# m/p\n"}
{"ImportPath":"m/p [m/p.test]","Action":"build-output","Output":"p_test.go:3:1: syntax error\n"}
{"ImportPath":"m/p [m/p.test]","Action":"build-fail"}
`,
			w: want{total: 1, failed: 1, problems: []string{"build of m/p [m/p.test] failed: p_test.go:3:1: syntax error"},
				failedCases: []string{"m/p (package)"}},
		},
		{
			name: "package started, never ended",
			in:   `{"Action":"start","Package":"m/p"}` + "\n",
			w:    want{total: 1, failed: 1, problems: []string{"package m/p: no final result"}, failedCases: []string{"m/p (package)"}},
		},
		{
			name: "package passes after all tests passed, TestMain exits 1 after m.Run",
			in: `{"Action":"run","Package":"m/p","Test":"TestA"}
{"Action":"pass","Package":"m/p","Test":"TestA"}
{"Action":"output","Package":"m/p","Output":"leaked goroutines\n"}
{"Action":"fail","Package":"m/p"}
`,
			w: want{total: 2, passed: 1, failed: 1, problems: []string{"package m/p failed with no failing test: leaked goroutines"}},
		},
		{
			name: "raw test2json, no Package",
			in: `{"Action":"run","Test":"TestA"}
{"Action":"pass","Test":"TestA","Elapsed":0.5}
{"Action":"pass"}
`,
			w: want{total: 1, passed: 1, ok: true},
		},
		{
			name: "JSON that is not an event, and an unknown action",
			in: `{"level":"info","msg":"hello"}
{"Action":"run","Package":"m/p","Test":"TestA"}
{"Action":"attr","Package":"m/p","Test":"TestA","Key":"k","Value":"v"}
{"Action":"pass","Package":"m/p","Test":"TestA"}
{"Action":"pass","Package":"m/p"}
`,
			w: want{total: 1, passed: 1, problems: []string{"line 1: JSON without an Action"}},
		},
		{
			name: "benchmark that never ends is not a problem",
			in: `{"Action":"run","Package":"m/p","Test":"BenchmarkX"}
{"Action":"run","Package":"m/p","Test":"TestA"}
{"Action":"pass","Package":"m/p","Test":"TestA"}
{"Action":"pass","Package":"m/p"}
`,
			w: want{total: 1, passed: 1, ok: true},
		},
		{
			name: "skipped package has no test files",
			in:   `{"Action":"skip","Package":"m/p"}` + "\n",
			w:    want{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := evidence.ParseGoTestJSON(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, "", r, evidence.FormatGoTestJSON, tc.w)
		})
	}
}

func TestJUnitDetails(t *testing.T) {
	r := parseFixture(t, "junit/surefire.xml")
	c := caseNamed(t, r, "com.example.cart.CartServiceTest.appliesDiscount")
	if !strings.Contains(c.Message, "org.opentest4j.AssertionFailedError: expected: <90.00> but was: <100.00>") ||
		!strings.Contains(c.Message, "CartServiceTest.java:57") || c.Duration != 18*time.Millisecond {
		t.Errorf("appliesDiscount: %v %q", c.Duration, c.Message)
	}
	if strings.Contains(c.Message, "SPRING10") {
		t.Errorf("system-out leaked into the failure message: %q", c.Message)
	}
	if c := caseNamed(t, r, "com.example.cart.CartServiceTest.checksOutWithCard"); !strings.HasPrefix(c.Message, "java.net.ConnectException: Connection refused") {
		t.Errorf("error message %q", c.Message)
	}
	if c := caseNamed(t, r, "com.example.cart.CartServiceTest.exportsToCsv"); c.Status != evidence.StatusSkip || !strings.Contains(c.Message, "@Disabled") {
		t.Errorf("skipped case %+v", c)
	}

	// The entity bomb is not expanded and the external entity not read.
	r = parseFixture(t, "junit/bomb.xml")
	for _, c := range r.Cases {
		if strings.Contains(c.Message, "lollol") {
			t.Errorf("entity expanded: %q", c.Message)
		}
	}

	// jest-junit repeats the title as classname: the suite is used instead.
	r = parseFixture(t, "junit/jest.xml")
	if c := r.Cases[0]; c.Suite != "utils/format" || c.Name != "format money rounds to cents" {
		t.Errorf("jest case %+v", c)
	}
}

func TestJUnitEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		w        want
	}{
		{
			name: "failure and skipped: failure wins",
			in:   `<testsuite><testcase name="a"><skipped/><failure message="boom"/></testcase></testsuite>`,
			w:    want{total: 1, failed: 1},
		},
		{
			name: "errors counted apart from failures",
			in:   `<testsuite tests="2" failures="1" errors="1"><testcase name="a"><failure/></testcase><testcase name="b"><error/></testcase></testsuite>`,
			w:    want{total: 2, failed: 2},
		},
		{
			name: "a tool that counts errors in failures",
			in:   `<testsuite tests="2" failures="2"><testcase name="a"><failure/></testcase><testcase name="b"><error/></testcase></testsuite>`,
			w:    want{total: 2, failed: 2},
		},
		{
			name: "summary says skipped but nothing was",
			in:   `<testsuite tests="1" skipped="1"><testcase name="a"/></testsuite>`,
			w:    want{total: 1, passed: 1, problems: []string{"skipped=1 but 0 skipped"}},
		},
		{
			name: "summary attribute that is not a number",
			in:   `<testsuite tests="many"><testcase name="a"/></testsuite>`,
			w:    want{total: 1, passed: 1, problems: []string{`tests="many" is not a number`}},
		},
		{
			name: "flaky failure passed on rerun",
			in:   `<testsuite tests="1" failures="0"><testcase name="a"><flakyFailure message="timing"/></testcase></testsuite>`,
			w:    want{total: 1, passed: 1, ok: true},
		},
		{
			name: "two reports concatenated",
			in:   `<testsuite name="a" tests="1"><testcase name="x"/></testsuite><testsuite name="b" tests="1"><testcase name="y"><failure/></testcase></testsuite>`,
			w:    want{total: 2, passed: 1, failed: 1},
		},
		{
			name: "something else after the report",
			in:   `<testsuite><testcase name="x"/></testsuite><html/>`,
			w:    want{total: 1, passed: 1, problems: []string{"unexpected top-level element <html>"}},
		},
		{
			name: "cut off inside a failure",
			in:   `<testsuite><testcase name="x"/><testcase name="y"><failure message="boom">stack`,
			w:    want{total: 2, passed: 1, failed: 1, problems: []string{`testcase "y" cut off after its failure`, "malformed XML"}},
		},
		{
			name: "deep nesting",
			in:   `<testsuites>` + strings.Repeat("<testsuite>", 300) + `<testcase name="x"/>` + strings.Repeat("</testsuite>", 300) + `</testsuites>`,
			w:    want{problems: []string{"nested deeper than 256"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := evidence.ParseJUnit(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, "", r, evidence.FormatJUnit, tc.w)
		})
	}
}

func TestTAPLines(t *testing.T) {
	for _, tc := range []struct {
		line, status, name, message string
	}{
		{"ok 1 - adds", evidence.StatusPass, "adds", ""},
		{"ok adds", evidence.StatusPass, "adds", ""},
		{"ok", evidence.StatusPass, "test 1", ""},
		{"not ok 1", evidence.StatusFail, "test 1", ""},
		{"ok 1 # SKIP no network", evidence.StatusSkip, "test 1", "no network"},
		{"ok 1 - fetch # skip no network", evidence.StatusSkip, "fetch", "no network"},
		{"ok 1 #skipped: no network", evidence.StatusSkip, "test 1", "no network"},
		{"ok 1 # Skip", evidence.StatusSkip, "test 1", ""},
		{"not ok 1 - fetch # SKIP no network", evidence.StatusFail, "fetch", "not ok with a SKIP directive: no network"},
		{"not ok 1 - parse # TODO later", evidence.StatusTodo, "parse", "later"},
		{"not ok 1 - parse # todo", evidence.StatusTodo, "parse", ""},
		{"ok 1 - parse # TODO later", evidence.StatusTodo, "parse", "TODO test passed: later"},
		{"not ok 1 - parse # TODO: later", evidence.StatusFail, "parse", ""}, // not a directive: TODO must be followed by a space
		{"not ok 1 - parse # TODOS", evidence.StatusFail, "parse", ""},
		{"ok 1 - parse # a comment, not a directive", evidence.StatusPass, "parse", ""},
		{`ok 1 - issue \# 12 # SKIP flaky`, evidence.StatusSkip, "issue # 12", "flaky"},
		{`ok 1 - back\\slash`, evidence.StatusPass, `back\slash`, ""},
		{"ok 1 - \xff\xfe", evidence.StatusPass, "\uFFFD", ""},
		{"ok 1 - crlf\r", evidence.StatusPass, "crlf", ""},
	} {
		r, err := evidence.ParseTAP(strings.NewReader("1..1\n" + tc.line + "\n"))
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		checkInvariants(t, r)
		if len(r.Cases) != 1 || len(r.Problems) != 0 {
			t.Errorf("%q: cases %+v, problems %q", tc.line, r.Cases, r.Problems)
			continue
		}
		if c := r.Cases[0]; c.Status != tc.status || c.Name != tc.name || c.Message != tc.message {
			t.Errorf("%q: got %q %q %q, want %q %q %q", tc.line, c.Status, c.Name, c.Message, tc.status, tc.name, tc.message)
		}
	}
}

func TestTAPEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		w        want
	}{
		{
			name: "not a test line",
			in:   "1..1\nokay then\nok 1\n",
			w:    want{total: 1, passed: 1, ok: true},
		},
		{
			name: "bail out inside a subtest stops everything",
			in:   "1..2\nok 1\n# Subtest: db\n    1..1\n    Bail out! no database\nok 2\n",
			w:    want{total: 2, passed: 1, failed: 1, problems: []string{"Bail out! no database"}},
		},
		{
			name: "bail out is case-insensitive",
			in:   "1..2\nok 1\nBAIL OUT!\n",
			w:    want{total: 2, passed: 1, failed: 1, problems: []string{"Bail out!"}},
		},
		{
			name: "two plans",
			in:   "1..1\nok 1\n1..1\n",
			w:    want{total: 1, passed: 1, problems: []string{"second plan"}},
		},
		{
			name: "malformed plan",
			in:   "1..2 tests\nok 1\nok 2\n",
			w:    want{total: 2, passed: 2, problems: []string{"malformed plan", "no plan"}},
		},
		{
			name: "plan too large",
			in:   "1..99999999999999999999999\nok 1\n",
			w:    want{total: 1, passed: 1, problems: []string{"malformed plan"}},
		},
		{
			name: "version line not first",
			in:   "1..1\nTAP version 14\nok 1\n",
			w:    want{total: 1, passed: 1, problems: []string{"version line is not the first line"}},
		},
		{
			name: "old version",
			in:   "TAP version 12\n1..1\nok 1\n",
			w:    want{total: 1, passed: 1, problems: []string{`unsupported "TAP version 12"`}},
		},
		{
			name: "strict pragma makes junk a problem",
			in:   "TAP version 14\npragma +strict\n1..1\nthis is not TAP\nok 1\n",
			w:    want{total: 1, passed: 1, problems: []string{"not TAP (pragma +strict)"}},
		},
		{
			name: "junk is ignored without the strict pragma",
			in:   "TAP version 14\n1..1\nthis is not TAP\nok 1\n",
			w:    want{total: 1, passed: 1, ok: true},
		},
		{
			name: "test lines inside a YAML block are not counted",
			in:   "1..1\nnot ok 1 - x\n  ---\n  output: |\n    ok 2 - printed by the test\n  ...\n",
			w:    want{total: 1, failed: 1},
		},
		{
			name: "YAML block never closed",
			in:   "1..1\nnot ok 1 - x\n  ---\n  message: boom\n",
			w:    want{total: 1, failed: 1, problems: []string{"not terminated"}},
		},
		{
			name: "YAML after a comment is not a block",
			in:   "1..1\nok 1 - x\n# note\n  ---\n  ok\n  ...\n",
			w:    want{total: 1, passed: 1, ok: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := evidence.ParseTAP(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, "", r, evidence.FormatTAP, tc.w)
		})
	}
}

func TestTAPMessages(t *testing.T) {
	r := parseFixture(t, "tap/perl_prove.tap")
	if c := caseNamed(t, r, "keeps trailing newline"); !strings.Contains(c.Message, "Failed test 'keeps trailing newline'") ||
		!strings.Contains(c.Message, "got: 'a b c'") || strings.Contains(c.Message, "Looks like you failed") {
		t.Errorf("Test::More diagnostics: %q", c.Message)
	}
	r = parseFixture(t, "tap/node_test.tap")
	c := caseNamed(t, r, "parses dates")
	if !strings.Contains(c.Message, "2024 !== 2025") || !strings.HasPrefix(c.Message, "duration_ms: 1.204") || c.Duration != 1204*time.Microsecond {
		t.Errorf("node:test YAML: %v %q", c.Duration, c.Message)
	}
	if c := caseNamed(t, r, "adds numbers"); c.Message != "" || c.Duration != 512*time.Microsecond {
		t.Errorf("passing case: %v %q", c.Duration, c.Message)
	}
	r = parseFixture(t, "tap/tap14.tap")
	if c := caseNamed(t, r, "recursive grammars"); !strings.Contains(c.Message, "stack overflow on rule expr") {
		t.Errorf("TODO message %q", c.Message)
	}
}
