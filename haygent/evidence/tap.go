package evidence

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// tapParser holds the state of one ParseTAP call.
type tapParser struct {
	b           *builder
	seen        bool // a version, plan, test line or bail out was read
	significant int  // lines read that were neither blank nor comments
	strict      bool

	planSeen   bool
	planned    int
	planLine   int
	planAtEnd  bool // the plan came after test lines
	lateWarned bool

	tests    int // top-level test lines
	lastCase int // index in b.rep.Cases of the last test line, or -1
	diagCase int // index of the failed case '#' lines now describe, or -1

	expectYAML bool // the previous line was a top-level test line
	inYAML     bool
	yamlLine   int
	yaml       textBuf

	subYAML     bool // inside the YAML block of a subtest
	prevSubTest bool // the previous line was an indented test line

	bailed bool
}

// ParseTAP reads a TAP 13 or 14 stream and counts its top-level test
// lines; see the package documentation for how directives, subtests and
// bail outs are counted.
//
// It returns an error only when the reader fails or nothing in the input is
// TAP (no version, plan, test line or bail out). Plan mismatches, a missing
// plan, out-of-sequence numbers and bail outs are Problems.
func ParseTAP(r io.Reader) (*TestReport, error) {
	cr := newCapReader(r)
	p := &tapParser{b: newBuilder(FormatTAP), lastCase: -1, diagCase: -1, yaml: textBuf{max: MaxMessageSize}}
	lr := newLineReader(cr)
	for !p.bailed {
		line, long, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("evidence: read TAP: %w", err)
		}
		if long {
			p.b.problem("line %d: longer than %d bytes, cut", lr.n, MaxLineSize)
		}
		p.line(lr.n, string(line))
	}
	if !p.seen {
		return nil, fmt.Errorf("evidence: parse TAP: %w: no version, plan, test line or bail out", ErrNoReport)
	}
	p.end()
	return p.b.finish(cr), nil
}

func (p *tapParser) line(n int, line string) {
	if p.inYAML {
		if strings.TrimSpace(line) == "..." {
			p.closeYAML()
			return
		}
		if line == "" || line[0] == ' ' || line[0] == '\t' {
			p.yaml.WriteString(line + "\n")
			return
		}
		p.b.problem("line %d: YAML block opened at line %d not terminated by \"...\"", n, p.yamlLine)
		p.closeYAML()
	}
	expect := p.expectYAML
	p.expectYAML = false

	if line != "" && (line[0] == ' ' || line[0] == '\t') {
		p.indented(n, line, expect)
		return
	}
	p.prevSubTest, p.subYAML = false, false
	diag := p.diagCase
	p.diagCase = -1
	switch {
	case line == "":
		return
	case strings.HasPrefix(line, "TAP version"):
		p.seen = true
		if p.significant > 0 {
			p.b.problem("line %d: version line is not the first line", n)
		}
		if v, err := strconv.Atoi(strings.TrimSpace(line[len("TAP version"):])); err != nil || v < 13 {
			p.b.problem("line %d: unsupported %q", n, clean(line, 100))
		}
	case strings.HasPrefix(line, "pragma "):
		for _, f := range strings.Fields(line[len("pragma "):]) {
			switch f {
			case "+strict":
				p.strict = true
			case "-strict":
				p.strict = false
			}
		}
	case isPlan(line):
		p.seen = true
		p.plan(n, line)
	case isTestLine(line):
		p.seen = true
		p.test(n, line)
		p.expectYAML = true
		if p.lastCase >= 0 && p.b.rep.Cases[p.lastCase].Status == StatusFail {
			p.diagCase = p.lastCase
		}
	case hasFoldPrefix(line, "bail out!"):
		p.bail(line)
	case line[0] == '#':
		// A diagnostic. Those right after a failed test line (Test::More
		// writes "#   Failed test ..." there) become its message.
		if diag >= 0 {
			c := &p.b.rep.Cases[diag]
			if len(c.Message) < MaxMessageSize {
				c.Message = clean(strings.TrimSpace(c.Message+"\n"+line), MaxMessageSize)
			}
			p.diagCase = diag
		}
		return // not significant
	default:
		if p.strict {
			p.b.problem("line %d: not TAP (pragma +strict): %q", n, clean(line, 100))
		}
	}
	p.significant++
}

// indented handles a line that starts with white space: a YAML block after
// a top-level test line, or part of a subtest, which is not counted.
func (p *tapParser) indented(n int, line string, expect bool) {
	trimmed := strings.TrimSpace(line)
	prevSub := p.prevSubTest
	p.prevSubTest = false
	switch {
	case expect && trimmed == "---":
		p.inYAML, p.yamlLine = true, n
		p.yaml = textBuf{max: MaxMessageSize}
	case p.subYAML:
		if trimmed == "..." {
			p.subYAML = false
		}
	case prevSub && trimmed == "---":
		p.subYAML = true
	case hasFoldPrefix(trimmed, "bail out!"):
		p.bail(trimmed) // a subtest's bail out stops the whole run
	case isTestLine(trimmed):
		p.prevSubTest = true
	}
}

// plan handles a "1..N" line.
func (p *tapParser) plan(n int, line string) {
	digits := line[len("1.."):]
	end := 0
	for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
		end++
	}
	rest := strings.TrimSpace(digits[end:])
	count, err := strconv.Atoi(digits[:end])
	if err != nil || (rest != "" && rest[0] != '#') {
		p.b.problem("line %d: malformed plan %q", n, clean(line, 100))
		return
	}
	if p.planSeen {
		p.b.problem("line %d: second plan (the first is at line %d)", n, p.planLine)
		return
	}
	p.planSeen, p.planned, p.planLine = true, count, n
	p.planAtEnd = p.tests > 0
}

// test handles a top-level "ok" or "not ok" line.
func (p *tapParser) test(n int, line string) {
	notOK := strings.HasPrefix(line, "not ok")
	rest := strings.TrimPrefix(line, "not ")[len("ok"):]
	rest = strings.TrimLeft(rest, " \t")
	seq := p.tests + 1
	num := -1
	if end := leadingDigits(rest); end > 0 {
		v, err := strconv.Atoi(rest[:end])
		if err != nil {
			p.b.problem("line %d: test number %q out of range", n, clean(rest[:end], 40))
		} else {
			num = v
		}
		rest = strings.TrimLeft(rest[end:], " \t")
	}
	if num >= 0 && num != seq {
		p.b.problem("line %d: test number %d out of sequence (expected %d)", n, num, seq)
	}
	if p.planAtEnd && !p.lateWarned {
		p.lateWarned = true
		p.b.problem("line %d: test line after the plan at line %d (a plan must come first or last)", n, p.planLine)
	}
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		rest = strings.TrimLeft(r, " \t")
	}
	desc, directive := splitDirective(rest)
	c := Case{Name: unescapeTAP(strings.TrimSpace(desc)), Status: StatusPass}
	if notOK {
		c.Status = StatusFail
	}
	if c.Name == "" {
		c.Name = "test " + strconv.Itoa(seq)
		if num >= 0 {
			c.Name = "test " + strconv.Itoa(num)
		}
	}
	switch kind, reason := parseDirective(directive); kind {
	case StatusSkip:
		if notOK {
			c.Message = "not ok with a SKIP directive: " + reason
		} else {
			c.Status, c.Message = StatusSkip, reason
		}
	case StatusTodo:
		c.Status, c.Message = StatusTodo, reason
		if !notOK {
			c.Message = "TODO test passed: " + reason
		}
	}
	p.tests++
	p.lastCase = -1
	if p.b.add(c) {
		p.lastCase = len(p.b.rep.Cases) - 1
	}
}

// bail handles "Bail out!": a Problem, a failed pseudo-case, and the end
// of reading.
func (p *tapParser) bail(line string) {
	p.seen, p.bailed = true, true
	reason := strings.TrimSpace(line[len("bail out!"):])
	name := "Bail out!"
	if reason != "" {
		name += " " + reason
	}
	p.b.problem("%s", name)
	p.b.add(Case{Name: name, Status: StatusFail, Message: reason})
}

// closeYAML ends a YAML block and attaches it to the test line before it.
func (p *tapParser) closeYAML() {
	p.inYAML = false
	if p.lastCase < 0 {
		return
	}
	c := &p.b.rep.Cases[p.lastCase]
	text := p.yaml.String()
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "duration_ms:"); ok {
			if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				c.Duration = seconds(ms / 1000)
			}
		}
	}
	if c.Status != StatusPass {
		c.Message = clean(strings.TrimSpace(c.Message+"\n"+dedent(text)), MaxMessageSize)
	}
}

func (p *tapParser) end() {
	if p.inYAML {
		p.b.problem("YAML block opened at line %d not terminated by \"...\"", p.yamlLine)
		p.closeYAML()
	}
	if p.bailed {
		return // the bail out explains a short run
	}
	switch {
	case !p.planSeen:
		p.b.problem("no plan: %d tests ran but nothing says how many should have", p.tests)
	case p.planned != p.tests:
		p.b.problem("plan 1..%d but %d tests ran", p.planned, p.tests)
	}
}

// isTestLine reports whether s starts a test line: "ok" or "not ok" not
// followed by a word character.
func isTestLine(s string) bool {
	rest, ok := strings.CutPrefix(s, "not ok")
	if !ok {
		rest, ok = strings.CutPrefix(s, "ok")
	}
	if !ok {
		return false
	}
	return rest == "" || !isWordByte(rest[0])
}

// isPlan reports whether s starts like a plan, "1.." and a digit.
func isPlan(s string) bool {
	return len(s) > 3 && strings.HasPrefix(s, "1..") && s[3] >= '0' && s[3] <= '9'
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func leadingDigits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// hasFoldPrefix reports whether s starts with prefix, ignoring ASCII case.
func hasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// splitDirective splits a test line's remainder at its first unescaped '#'.
func splitDirective(s string) (desc, directive string) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '#':
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// parseDirective recognises "SKIP..." and "TODO" (case-insensitive) and
// returns StatusSkip or StatusTodo with the reason, or "".
func parseDirective(d string) (kind, reason string) {
	d = strings.TrimLeft(d, " \t")
	switch {
	case hasFoldPrefix(d, "skip"):
		i := 4
		for i < len(d) && d[i] != ' ' && d[i] != '\t' {
			i++ // SKIP\S*: "skipped", "skip:"
		}
		return StatusSkip, strings.TrimSpace(d[i:])
	case hasFoldPrefix(d, "todo") && (len(d) == 4 || d[4] == ' ' || d[4] == '\t'):
		return StatusTodo, strings.TrimSpace(d[4:])
	}
	return "", ""
}

// unescapeTAP undoes TAP 14 escaping: "\#" is '#', "\\" is '\'.
func unescapeTAP(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '#' || s[i+1] == '\\') {
			i++
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// dedent removes the indentation common to the non-blank lines of s.
func dedent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if common < 0 || n < common {
			common = n
		}
	}
	if common <= 0 {
		return s
	}
	for i, l := range lines {
		if len(l) >= common {
			lines[i] = l[common:]
		} else {
			lines[i] = strings.TrimLeft(l, " \t")
		}
	}
	return strings.Join(lines, "\n")
}
