package evidence_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/haygent/hg/haygent/evidence"
)

// want is what a fixture must parse to.
type want struct {
	total, passed, failed, skipped, todo int
	ok                                   bool
	problems                             []string // each must be a substring of some Problem; nil means none at all
	failedCases                          []string // FullName of the failed cases, in order; nil means not checked
}

var fixtures = map[string]want{
	// go test -json, recorded from real runs of go test.
	"gotest/pass.json": {total: 3, passed: 3, ok: true},
	"gotest/mixed.json": {total: 7, passed: 3, failed: 3, skipped: 1, failedCases: []string{
		"example.com/demo/mixed.TestFail", "example.com/demo/mixed.TestTable/large", "example.com/demo/mixed.TestTable"}},
	"gotest/multi.json": {total: 11, passed: 6, failed: 4, skipped: 1,
		problems: []string{"package example.com/demo/broken: build failed"}},
	"gotest/build_fail.json": {total: 1, failed: 1,
		problems:    []string{"build failed (example.com/demo/broken [example.com/demo/broken.test]): broken/broken_test.go:6:18: invalid operation"},
		failedCases: []string{"example.com/demo/broken (package)"}},
	"gotest/build_fail_text.json": {total: 1, failed: 1,
		problems:    []string{"non-JSON output at line 1: # example.com/demo/broken", "package example.com/demo/broken failed with no failing test"},
		failedCases: []string{"example.com/demo/broken (package)"}},
	"gotest/vet_fail.json": {total: 1, failed: 1,
		problems:    []string{"build failed", "fmt.Printf format %d has arg"},
		failedCases: []string{"example.com/demo/vetfail (package)"}},
	"gotest/testmain_exit.json": {total: 1, failed: 1,
		problems:    []string{"package example.com/demo/mainexit failed with no failing test: setup: database unreachable"},
		failedCases: []string{"example.com/demo/mainexit (package)"}},
	"gotest/panicky.json": {total: 2, passed: 1, failed: 1,
		failedCases: []string{"example.com/demo/panicky.TestPanics"}},
	"gotest/timeout.json": {total: 2, passed: 1, failed: 1,
		problems:    []string{"test TestSlow started but never finished"},
		failedCases: []string{"example.com/demo/timeout.TestSlow"}},
	"gotest/truncated.json": {total: 6, passed: 2, failed: 3, skipped: 1,
		problems: []string{"line 24: invalid JSON", "test TestTable started but never finished",
			"test TestTable/large started but never finished", "package example.com/demo/mixed: no final result"}},
	"gotest/bench.json":     {total: 10, passed: 10, ok: true},
	"gotest/benchfail.json": {total: 1, failed: 1, failedCases: []string{"example.com/demo/bfail.BenchmarkBad"}},
	"gotest/notests.json":   {},

	// JUnit, written after surefire, pytest, PHPUnit and jest-junit.
	"junit/surefire.xml": {total: 5, passed: 2, failed: 2, skipped: 1, failedCases: []string{
		"com.example.cart.CartServiceTest.appliesDiscount", "com.example.cart.CartServiceTest.checksOutWithCard"}},
	"junit/pytest.xml":         {total: 4, passed: 2, failed: 1, skipped: 1, failedCases: []string{"tests.test_math.test_divide_by_zero"}},
	"junit/phpunit_nested.xml": {total: 4, passed: 2, failed: 1, skipped: 1, failedCases: []string{"Tests.Unit.CalculatorTest.testDivide"}},
	"junit/jest.xml":           {total: 3, passed: 3, ok: true},
	"junit/lying.xml": {total: 3, passed: 2, failed: 1,
		problems: []string{`testsuite "auth": tests=100 but 3 testcases counted`, `testsuite "auth": failures=0 errors=0 but 1 failed`,
			"<testsuites>: tests=100 but 3 testcases counted"},
		failedCases: []string{"auth.login rejects wrong password"}},
	"junit/truncated.xml":    {total: 3, passed: 2, failed: 1, problems: []string{"malformed XML at line 21", "unexpected EOF"}},
	"junit/bomb.xml":         {total: 1, passed: 1, problems: []string{"invalid character entity &lol9;"}},
	"junit/latin1.xml":       {total: 2, passed: 1, failed: 1, failedCases: []string{"café.naïve"}},
	"junit/empty_suites.xml": {},

	// TAP, written after the TAP 14 specification, Test::More and node:test.
	"tap/tap14.tap":       {total: 6, passed: 3, failed: 1, skipped: 1, todo: 1, failedCases: []string{"tokenizer"}},
	"tap/todo.tap":        {total: 4, passed: 2, todo: 2, ok: true},
	"tap/plan_at_end.tap": {total: 5, passed: 4, failed: 1},
	"tap/plan_mismatch.tap": {total: 3, passed: 3,
		problems: []string{"plan 1..5 but 3 tests ran"}},
	"tap/bail_out.tap": {total: 3, passed: 1, failed: 2, problems: []string{"Bail out! Couldn't connect to database."},
		failedCases: []string{"database handle", "Bail out! Couldn't connect to database."}},
	"tap/no_plan.tap": {total: 3, passed: 3, problems: []string{"no plan"}},
	"tap/perl_prove.tap": {total: 7, passed: 3, failed: 2, skipped: 2,
		failedCases: []string{"keeps trailing newline", "test 6"}},
	"tap/node_test.tap":         {total: 3, passed: 1, failed: 1, skipped: 1, failedCases: []string{"parses dates"}},
	"tap/out_of_sequence.tap":   {total: 3, passed: 3, problems: []string{"test number 3 out of sequence (expected 2)", "test number 2 out of sequence (expected 3)"}},
	"tap/plan_middle.tap":       {total: 2, passed: 2, problems: []string{"test line after the plan at line 2"}},
	"tap/unterminated_yaml.tap": {total: 2, passed: 1, failed: 1, problems: []string{"YAML block opened at line 4 not terminated"}},
	"tap/skip_all.tap":          {},
}

// formatOf names the format of a fixture from its directory.
func formatOf(name string) string {
	switch filepath.Dir(name) {
	case "gotest":
		return evidence.FormatGoTestJSON
	case "junit":
		return evidence.FormatJUnit
	}
	return evidence.FormatTAP
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixtures(t *testing.T) {
	// Every file in testdata has an expectation, and the reverse.
	files, err := filepath.Glob("testdata/*/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel("testdata", f)
		if _, ok := fixtures[filepath.ToSlash(rel)]; !ok {
			t.Errorf("testdata/%s has no expectation", rel)
		}
	}
	for name, w := range fixtures {
		t.Run(name, func(t *testing.T) {
			data := readFixture(t, name)
			for _, mode := range []string{"named", "auto", "one byte at a time"} {
				var r *evidence.TestReport
				var err error
				switch mode {
				case "named":
					r, err = evidence.ParseTestReport(formatOf(name), bytes.NewReader(data))
				case "auto":
					r, err = evidence.ParseTestReport(evidence.FormatAuto, bytes.NewReader(data))
				default:
					r, err = evidence.ParseTestReport(formatOf(name), iotest.OneByteReader(bytes.NewReader(data)))
				}
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				checkReport(t, mode, r, formatOf(name), w)
			}
		})
	}
}

func checkReport(t *testing.T, mode string, r *evidence.TestReport, format string, w want) {
	t.Helper()
	checkInvariants(t, r)
	if r.Format != format {
		t.Errorf("%s: Format = %q, want %q", mode, r.Format, format)
	}
	got := [5]int{r.Total, r.Passed, r.Failed, r.Skipped, r.Todo}
	exp := [5]int{w.total, w.passed, w.failed, w.skipped, w.todo}
	if got != exp {
		t.Errorf("%s: total/passed/failed/skipped/todo = %v, want %v", mode, got, exp)
	}
	if r.OK() != w.ok {
		t.Errorf("%s: OK() = %v, want %v (problems %q)", mode, r.OK(), w.ok, r.Problems)
	}
	if w.problems == nil && len(r.Problems) > 0 {
		t.Errorf("%s: unexpected problems %q", mode, r.Problems)
	}
	for _, p := range w.problems {
		if !slices.ContainsFunc(r.Problems, func(s string) bool { return strings.Contains(s, p) }) {
			t.Errorf("%s: no problem mentions %q; problems: %q", mode, p, r.Problems)
		}
	}
	if w.failedCases != nil {
		var failed []string
		for _, c := range r.Cases {
			if c.Status == evidence.StatusFail {
				failed = append(failed, c.FullName())
			}
		}
		if !slices.Equal(failed, w.failedCases) {
			t.Errorf("%s: failed cases %q, want %q", mode, failed, w.failedCases)
		}
	}
}

// checkInvariants checks what must hold for every report a parser returns.
func checkInvariants(t testing.TB, r *evidence.TestReport) {
	t.Helper()
	if r == nil {
		t.Fatal("nil report without error")
	}
	if r.Total != r.Passed+r.Failed+r.Skipped+r.Todo {
		t.Errorf("Total %d != %d+%d+%d+%d", r.Total, r.Passed, r.Failed, r.Skipped, r.Todo)
	}
	if len(r.Cases) > r.Total || len(r.Cases) > evidence.MaxCases {
		t.Errorf("%d cases kept for a total of %d", len(r.Cases), r.Total)
	}
	if len(r.Cases) < r.Total && len(r.Cases) != evidence.MaxCases {
		t.Errorf("only %d cases kept for a total of %d", len(r.Cases), r.Total)
	}
	var n [4]int
	for _, c := range r.Cases {
		switch c.Status {
		case evidence.StatusPass:
			n[0]++
		case evidence.StatusFail:
			n[1]++
		case evidence.StatusSkip:
			n[2]++
		case evidence.StatusTodo:
			n[3]++
		default:
			t.Errorf("case %q has status %q", c.Name, c.Status)
		}
		if len(c.Name) > evidence.MaxNameSize || len(c.Suite) > evidence.MaxNameSize || len(c.Message) > evidence.MaxMessageSize {
			t.Errorf("case %q: name, suite or message over its bound", c.Name)
		}
		for _, s := range []string{c.Name, c.Suite, c.Message} {
			if !utf8.ValidString(s) || strings.Contains(s, "\x00") {
				t.Errorf("case string %q is not clean UTF-8", s)
			}
		}
		if c.Duration < 0 {
			t.Errorf("case %q has negative duration", c.Name)
		}
	}
	if len(r.Cases) == r.Total && n != [4]int{r.Passed, r.Failed, r.Skipped, r.Todo} {
		t.Errorf("case statuses %v disagree with counts %v", n, [4]int{r.Passed, r.Failed, r.Skipped, r.Todo})
	}
	if len(r.Problems) > evidence.MaxProblems {
		t.Errorf("%d problems, over MaxProblems", len(r.Problems))
	}
	for _, p := range r.Problems {
		if !utf8.ValidString(p) || p == "" {
			t.Errorf("problem %q is empty or not UTF-8", p)
		}
	}
	if r.OK() && (r.Failed > 0 || len(r.Problems) > 0 || r.Total == 0) {
		t.Error("OK() with failures, problems or no case")
	}
	checkData(t, r.Data())
}

// checkData checks that v holds only what a CEL gate and DAG-CBOR accept:
// string, int64, bool, []any and map[string]any.
func checkData(t testing.TB, v any) {
	t.Helper()
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			t.Errorf("invalid UTF-8 in Data: %q", x)
		}
	case int64, bool:
	case []any:
		for _, e := range x {
			checkData(t, e)
		}
	case map[string]any:
		for _, e := range x {
			checkData(t, e)
		}
	default:
		t.Errorf("Data holds a %T", v)
	}
}

func TestData(t *testing.T) {
	r, err := evidence.ParseGoTestJSON(bytes.NewReader(readFixture(t, "gotest/mixed.json")))
	if err != nil {
		t.Fatal(err)
	}
	d := r.Data()
	exp := map[string]any{
		"format":               "go-test-json",
		"ok":                   false,
		"total":                int64(7),
		"passed":               int64(3),
		"failed":               int64(3),
		"skipped":              int64(1),
		"todo":                 int64(0),
		"problems":             []any{},
		"failed_cases":         []any{"example.com/demo/mixed.TestFail", "example.com/demo/mixed.TestTable/large", "example.com/demo/mixed.TestTable"},
		"failed_cases_omitted": int64(0),
	}
	if fmt.Sprint(d) != fmt.Sprint(exp) {
		t.Errorf("Data() =\n%v\nwant\n%v", d, exp)
	}
	if _, err := json.Marshal(d); err != nil {
		t.Error(err)
	}
	checkData(t, d)
	checkData(t, (*evidence.TestReport)(nil).Data())
}

func TestDataBounded(t *testing.T) {
	var in strings.Builder
	in.WriteString("TAP version 14\n")
	for i := range 120 {
		fmt.Fprintf(&in, "not ok %d - case %d\n", i+1000, i) // out of sequence: one problem each
	}
	r, err := evidence.ParseTAP(strings.NewReader(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	d := r.Data()
	if n := len(d["failed_cases"].([]any)); n != evidence.MaxFailedCases {
		t.Errorf("%d failed_cases, want %d", n, evidence.MaxFailedCases)
	}
	if n := d["failed_cases_omitted"].(int64); n != 120-evidence.MaxFailedCases {
		t.Errorf("failed_cases_omitted = %d", n)
	}
	p := d["problems"].([]any)
	if len(p) != evidence.MaxProblems || !strings.Contains(p[len(p)-1].(string), "more problems") {
		t.Errorf("%d problems, last %q", len(p), p[len(p)-1])
	}

	// A report built by hand with too many problems is bounded in Data too.
	h := &evidence.TestReport{Problems: make([]string, 500)}
	for i := range h.Problems {
		h.Problems[i] = strings.Repeat("é", 1000)
	}
	hp := h.Data()["problems"].([]any)
	if len(hp) != evidence.MaxProblems || len(hp[0].(string)) > 600 {
		t.Errorf("hand-made report: %d problems, first %d bytes", len(hp), len(hp[0].(string)))
	}
	checkData(t, h.Data())
}

func TestOK(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *evidence.TestReport
		ok   bool
	}{
		{"nil", nil, false},
		{"empty", &evidence.TestReport{}, false},
		{"green", &evidence.TestReport{Total: 2, Passed: 2}, true},
		{"all skipped", &evidence.TestReport{Total: 2, Skipped: 2}, true},
		{"todo", &evidence.TestReport{Total: 2, Passed: 1, Todo: 1}, true},
		{"failed", &evidence.TestReport{Total: 2, Passed: 1, Failed: 1}, false},
		{"problem", &evidence.TestReport{Total: 2, Passed: 2, Problems: []string{"no plan"}}, false},
		{"counts do not add up", &evidence.TestReport{Total: 3, Passed: 2}, false},
	} {
		if got := tc.r.OK(); got != tc.ok {
			t.Errorf("%s: OK() = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestNothingToParse(t *testing.T) {
	for _, in := range []string{"", "\n\n  \n", "hello world\n", "# only a comment\n", "\xff\xfe\x00garbage"} {
		for _, f := range []string{evidence.FormatGoTestJSON, evidence.FormatJUnit, evidence.FormatTAP} {
			r, err := evidence.ParseTestReport(f, strings.NewReader(in))
			if !errors.Is(err, evidence.ErrNoReport) || r != nil {
				t.Errorf("%s of %q: %v, %v; want ErrNoReport", f, in, r, err)
			}
		}
		if _, err := evidence.ParseTestReport(evidence.FormatAuto, strings.NewReader(in)); !errors.Is(err, evidence.ErrUnknownFormat) {
			t.Errorf("auto of %q: %v, want ErrUnknownFormat", in, err)
		}
	}
	if _, err := evidence.ParseJUnit(strings.NewReader("<html><body>not a report</body></html>")); !errors.Is(err, evidence.ErrNoReport) {
		t.Errorf("JUnit of HTML: %v", err)
	}
	if _, err := evidence.ParseJUnit(strings.NewReader(`<?xml version="1.0" encoding="EBCDIC"?><testsuite/>`)); !errors.Is(err, evidence.ErrNoReport) {
		t.Errorf("JUnit in EBCDIC: %v", err)
	}
	if _, err := evidence.ParseTestReport("xml", strings.NewReader("<testsuite/>")); !errors.Is(err, evidence.ErrUnknownFormat) {
		t.Errorf("format xml: %v", err)
	}
}

func TestReaderError(t *testing.T) {
	boom := errors.New("disk on fire")
	for _, f := range []string{evidence.FormatGoTestJSON, evidence.FormatJUnit, evidence.FormatTAP, evidence.FormatAuto} {
		for _, head := range []string{"", "1..1\n", "<testsuite>", `{"Action":"start","Package":"x"}` + "\n"} {
			in := io.MultiReader(strings.NewReader(head), iotest.ErrReader(boom))
			r, err := evidence.ParseTestReport(f, in)
			if !errors.Is(err, boom) || r != nil {
				t.Errorf("%s after %q: %v, %v; want the reader's error", f, head, r, err)
			}
		}
	}
}

// endless repeats a line forever.
type endless struct {
	line []byte
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.line[e.off:])
		n += c
		e.off = (e.off + c) % len(e.line)
	}
	return n, nil
}

func TestInputLimit(t *testing.T) {
	// An endless stream stops at MaxInputSize and is never OK.
	in := io.MultiReader(strings.NewReader("1..1\nok 1 - the only test\n"),
		&endless{line: []byte("# " + strings.Repeat("chatter ", 500) + "\n")})
	r, err := evidence.ParseTAP(in)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	if r.Passed != 1 || r.OK() || !slices.ContainsFunc(r.Problems, func(s string) bool { return strings.HasPrefix(s, "input truncated") }) {
		t.Errorf("endless TAP: passed %d, OK %v, problems %q", r.Passed, r.OK(), r.Problems)
	}
}

func TestMaxCases(t *testing.T) {
	const n = evidence.MaxCases + 10
	var in bytes.Buffer
	fmt.Fprintf(&in, "1..%d\n", n)
	for i := range n {
		if i == n-1 {
			in.WriteString("not ok - last\n")
		} else {
			in.WriteString("ok\n")
		}
	}
	r, err := evidence.ParseTAP(&in)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	if r.Total != n || r.Failed != 1 || len(r.Cases) != evidence.MaxCases || len(r.Problems) != 0 {
		t.Errorf("total %d failed %d, %d cases kept, problems %q", r.Total, r.Failed, len(r.Cases), r.Problems)
	}
	if d := r.Data(); d["failed_cases_omitted"] != int64(1) {
		t.Errorf("failed_cases_omitted = %v, want 1 (the failure was not kept)", d["failed_cases_omitted"])
	}
}

func TestSniffSkipsLeadingText(t *testing.T) {
	for in, format := range map[string]string{
		"\xef\xbb\xbfTAP version 14\n1..1\nok\n":                         evidence.FormatTAP,
		"# comment\n\nnot ok 1 - x\n1..1\n":                              evidence.FormatTAP,
		"Bail out! no database\n":                                        evidence.FormatTAP,
		"  <?xml version=\"1.0\"?>\n<testsuite/>":                        evidence.FormatJUnit,
		"# pkg\nx.go:1:1: oops\n{\"Action\":\"fail\"}\n":                 evidence.FormatGoTestJSON,
		"go: downloading example.com/m v1.0.0\n{\"Action\":\"start\"}\n": evidence.FormatGoTestJSON,
	} {
		r, err := evidence.ParseTestReport(evidence.FormatAuto, strings.NewReader(in))
		if err != nil {
			t.Errorf("auto of %q: %v", in, err)
			continue
		}
		if r.Format != format {
			t.Errorf("auto of %q: format %q, want %q", in, r.Format, format)
		}
		checkInvariants(t, r)
	}
}

func TestCaseFullName(t *testing.T) {
	if got := (evidence.Case{Name: "TestX/sub", Suite: "example.com/p"}).FullName(); got != "example.com/p.TestX/sub" {
		t.Errorf("FullName = %q", got)
	}
	if got := (evidence.Case{Name: "adds numbers"}).FullName(); got != "adds numbers" {
		t.Errorf("FullName = %q", got)
	}
}
