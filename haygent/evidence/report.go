package evidence

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Report formats, as [TestReport.Format] names them and [ParseTestReport]
// accepts them.
const (
	FormatGoTestJSON = "go-test-json" // go test -json (test2json events)
	FormatJUnit      = "junit"        // JUnit XML
	FormatTAP        = "tap"          // Test Anything Protocol 13/14
	FormatAuto       = "auto"         // sniff; accepted by ParseTestReport only
)

// Case statuses.
const (
	StatusPass = "pass"
	StatusFail = "fail"
	StatusSkip = "skip"
	StatusTodo = "todo" // TAP TODO: expected to fail, not counted as failed
)

// Limits on what a parser reads and keeps.
const (
	// MaxInputSize is the most a parser reads; the rest is left unread and
	// the report carries a Problem.
	MaxInputSize = 64 << 20

	// MaxLineSize is the longest line a line-based parser keeps; longer
	// lines are cut (and, for go test -json, are not valid JSON).
	MaxLineSize = 1 << 20

	// MaxMessageSize bounds Case.Message, in bytes.
	MaxMessageSize = 4 << 10

	// MaxNameSize bounds Case.Name and Case.Suite, in bytes.
	MaxNameSize = 1 << 10

	// MaxProblems bounds TestReport.Problems; the last entry then says how
	// many more there were.
	MaxProblems = 100

	// MaxCases bounds TestReport.Cases. Cases beyond it are counted but not
	// kept.
	MaxCases = 100_000

	// MaxFailedCases bounds the "failed_cases" list of TestReport.Data.
	MaxFailedCases = 50

	// maxProblemSize bounds one Problem, in bytes.
	maxProblemSize = 512
)

// Sentinel errors. The errors returned wrap them with context; test with
// [errors.Is].
var (
	// ErrNoReport is returned when the input holds nothing the parser
	// recognises: it is empty, or in another format.
	ErrNoReport = errors.New("no test report in input")

	// ErrUnknownFormat is returned by ParseTestReport for a format name it
	// does not know, or for input "auto" cannot identify.
	ErrUnknownFormat = errors.New("unknown test report format")
)

// Case is one counted test case.
type Case struct {
	// Name is the case's name: the test name for go test (subtests as
	// "TestX/sub"), the testcase name for JUnit, the description for TAP.
	Name string

	// Suite groups the case: the package for go test, the classname or
	// suite name for JUnit, empty for TAP.
	Suite string

	// Status is StatusPass, StatusFail, StatusSkip or StatusTodo.
	Status string

	// Duration is the time the tool reported for the case, or zero.
	Duration time.Duration

	// Message is the failure text for a failed case, the reason for a
	// skipped or todo one, cut to MaxMessageSize. It is the tool's output,
	// shown to people; it is not evidence of anything.
	Message string
}

// FullName is the case's name qualified by its suite, "Suite.Name", or the
// name alone when there is no suite.
func (c Case) FullName() string {
	if c.Suite == "" {
		return c.Name
	}
	return c.Suite + "." + c.Name
}

// TestReport is what the runtime counted in one test tool's output.
//
// The counts are the parser's own count of the cases; it never takes them
// from a summary the tool printed. Total is always Passed + Failed +
// Skipped + Todo. Cases holds the first MaxCases of them.
type TestReport struct {
	Format   string // FormatGoTestJSON, FormatJUnit or FormatTAP
	Total    int
	Passed   int
	Failed   int
	Skipped  int
	Todo     int // TAP TODO cases; never counted as failed
	Cases    []Case
	Problems []string // why the report cannot be trusted as a whole, even with no failure
}

// OK reports whether the report shows a clean run: at least one case, no
// failed case, no problem, and counts that add up. A report with Problems is
// never OK. A run whose every case was skipped is OK; a gate that needs
// something to have passed must also ask for passed > 0.
func (r *TestReport) OK() bool {
	return r != nil && r.Total > 0 && r.Failed == 0 && len(r.Problems) == 0 &&
		r.Total == r.Passed+r.Failed+r.Skipped+r.Todo
}

// Data returns the report as a CEL gate sees it, built only of string,
// int64, bool, []any and map[string]any:
//
//	format                string   "go-test-json", "junit" or "tap"
//	ok                    bool     OK()
//	total, passed, failed, skipped, todo   int64
//	problems              []any    strings, at most MaxProblems
//	failed_cases          []any    FullName of the first MaxFailedCases failed cases
//	failed_cases_omitted  int64    failed minus the number listed
//
// Every key is always present. The full case list is not included: it can
// be large, and a gate should judge counts and problems.
func (r *TestReport) Data() map[string]any {
	if r == nil {
		r = &TestReport{}
	}
	problems := make([]any, 0, min(len(r.Problems), MaxProblems))
	for i, p := range r.Problems {
		if i == MaxProblems-1 && len(r.Problems) > MaxProblems {
			problems = append(problems, fmt.Sprintf("... and %d more problems", len(r.Problems)-i))
			break
		}
		problems = append(problems, clean(p, maxProblemSize))
	}
	failed := make([]any, 0)
	for _, c := range r.Cases {
		if len(failed) == MaxFailedCases {
			break
		}
		if c.Status == StatusFail {
			failed = append(failed, clean(c.FullName(), 2*MaxNameSize+1))
		}
	}
	omitted := max(r.Failed-len(failed), 0)
	return map[string]any{
		"format":               r.Format,
		"ok":                   r.OK(),
		"total":                int64(r.Total),
		"passed":               int64(r.Passed),
		"failed":               int64(r.Failed),
		"skipped":              int64(r.Skipped),
		"todo":                 int64(r.Todo),
		"problems":             problems,
		"failed_cases":         failed,
		"failed_cases_omitted": int64(omitted),
	}
}

// ParseTestReport parses r as format: FormatGoTestJSON, FormatJUnit,
// FormatTAP, or FormatAuto to sniff it from the first recognisable line
// ('{' for go test -json, '<' for JUnit, "TAP version", a plan, "ok" or
// "not ok" for TAP; blank lines, '#' comments and other text before it are
// passed over).
func ParseTestReport(format string, r io.Reader) (*TestReport, error) {
	switch format {
	case FormatGoTestJSON:
		return ParseGoTestJSON(r)
	case FormatJUnit:
		return ParseJUnit(r)
	case FormatTAP:
		return ParseTAP(r)
	case FormatAuto:
		br := bufio.NewReaderSize(r, sniffSize)
		f, err := sniff(br)
		if err != nil {
			return nil, err
		}
		return ParseTestReport(f, br)
	}
	return nil, fmt.Errorf("evidence: %w %q (want %q, %q, %q or %q)",
		ErrUnknownFormat, format, FormatGoTestJSON, FormatJUnit, FormatTAP, FormatAuto)
}

// sniffSize is how much of the input sniff looks at.
const sniffSize = 64 << 10

// sniff names the format of the input br holds without consuming it.
func sniff(br *bufio.Reader) (string, error) {
	head, err := br.Peek(sniffSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("evidence: sniff test report format: %w", err)
	}
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		line = bytes.TrimSpace(line)
		switch {
		case len(line) == 0 || line[0] == '#':
			continue
		case line[0] == '{':
			return FormatGoTestJSON, nil
		case line[0] == '<':
			return FormatJUnit, nil
		case bytes.HasPrefix(line, []byte("TAP version")),
			bytes.HasPrefix(line, []byte("1..")),
			isTestLine(string(line)),
			hasFoldPrefix(string(line), "bail out!"):
			return FormatTAP, nil
		}
	}
	return "", fmt.Errorf("evidence: sniff test report format: %w: no line in the first %d bytes looks like go test -json, JUnit or TAP",
		ErrUnknownFormat, sniffSize)
}

// builder accumulates a report; finish computes the counts from the cases.
type builder struct {
	rep      TestReport
	problems int // problems reported, including those not kept
}

func newBuilder(format string) *builder {
	return &builder{rep: TestReport{Format: format, Cases: []Case{}, Problems: []string{}}}
}

// problem records a Problem, keeping at most MaxProblems-1 of them so the
// last slot can say how many were dropped.
func (b *builder) problem(format string, args ...any) {
	b.problems++
	if len(b.rep.Problems) < MaxProblems-1 {
		b.rep.Problems = append(b.rep.Problems, clean(fmt.Sprintf(format, args...), maxProblemSize))
	}
}

// add counts a case and keeps it, with its strings bounded and cleaned,
// unless MaxCases are kept already. It reports whether it kept it.
func (b *builder) add(c Case) bool {
	r := &b.rep
	r.Total++
	switch c.Status {
	case StatusPass:
		r.Passed++
	case StatusSkip:
		r.Skipped++
	case StatusTodo:
		r.Todo++
	default:
		c.Status = StatusFail
		r.Failed++
	}
	if len(r.Cases) >= MaxCases {
		return false
	}
	c.Name = clean(c.Name, MaxNameSize)
	c.Suite = clean(c.Suite, MaxNameSize)
	c.Message = clean(strings.TrimSpace(c.Message), MaxMessageSize)
	if c.Duration < 0 {
		c.Duration = 0
	}
	r.Cases = append(r.Cases, c)
	return true
}

// finish closes the Problems list and returns the report.
func (b *builder) finish(cr *capReader) *TestReport {
	if cr != nil && cr.over {
		b.problem("input truncated: only the first %d bytes were read", inputLimit)
	}
	if extra := b.problems - len(b.rep.Problems); extra > 0 {
		b.rep.Problems = append(b.rep.Problems, fmt.Sprintf("... and %d more problems", extra))
	}
	return &b.rep
}

// seconds converts a duration in seconds reported by a tool, refusing
// negative, NaN and absurd values.
func seconds(s float64) time.Duration {
	if !(s > 0 && s < 1e9) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// clean makes s valid UTF-8 without NUL bytes and cuts it to at most
// limit bytes on a rune boundary, marking the cut.
func clean(s string, limit int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= limit {
		return s
	}
	const mark = " …[cut]"
	cut := max(limit-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// firstLine returns the first non-blank line of s, cut to n bytes.
func firstLine(s string, n int) string {
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return clean(line, n)
		}
	}
	return ""
}

// textBuf keeps the first max bytes written to it and notes that more came.
type textBuf struct {
	b   []byte
	max int
	cut bool
}

func (t *textBuf) WriteString(s string) {
	if room := t.max - len(t.b); room >= len(s) {
		t.b = append(t.b, s...)
	} else {
		if room > 0 {
			t.b = append(t.b, s[:room]...)
		}
		t.cut = true
	}
}

// Len is the number of bytes kept.
func (t *textBuf) Len() int { return len(t.b) }

func (t *textBuf) String() string {
	if t.cut {
		return string(t.b) + "\n…[cut]"
	}
	return string(t.b)
}

// inputLimit is MaxInputSize; tests lower it.
var inputLimit int64 = MaxInputSize

// capReader reads at most inputLimit bytes from r, then notes whether r had
// more. It also keeps the first error of r other than io.EOF, so a parser
// can tell a failing reader from bad input.
type capReader struct {
	r      io.Reader
	left   int64
	over   bool  // r had more than the cap
	err    error // r's first error other than io.EOF
	probed bool
}

func newCapReader(r io.Reader) *capReader {
	return &capReader{r: r, left: inputLimit}
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		if !c.probed {
			c.probed = true
			var one [1]byte
			if n, _ := io.ReadFull(c.r, one[:]); n > 0 {
				c.over = true
			}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) && c.err == nil {
		c.err = err
	}
	return n, err
}

// lineReader splits its input into lines, dropping "\n" or "\r\n" and
// cutting lines to MaxLineSize.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
	n   int // number of the line last returned, from 1
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line, valid until the following call, and whether
// it was cut. It returns io.EOF after the last line.
func (l *lineReader) next() (line []byte, long bool, err error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		if room := MaxLineSize - len(l.buf); len(frag) <= room {
			l.buf = append(l.buf, frag...)
		} else {
			l.buf = append(l.buf, frag[:room]...)
			long = true
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(l.buf) == 0 && !long {
				return nil, false, io.EOF
			}
		case err != nil:
			return nil, false, err
		}
		l.n++
		line = bytes.TrimSuffix(l.buf, []byte("\n"))
		if l.n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // byte order mark
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, long, nil
	}
}
